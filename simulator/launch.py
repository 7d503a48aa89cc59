"""Building a session as ``zread <command> [flags]`` would start: zread's own flags and
the session made from them, a scenario and a home.

Owns: parsing each zread command's flags as its module declares them
(:func:`add_zread_flags`, shared by the command line and :func:`parse_flags`) into its
:class:`Flags`, and :func:`build_session`, which every runner and tool uses to start a
session, so none of them imports the command line (it also refuses a scenario whose
failures name a point no command declares); and the parsers of the simulator's own values a session
is started with, shared by the command line and ``load``: :func:`integer` (``--seed``)
and :func:`number` (``--speed``, durations), each refusing in the simulator's words.

Must not: read the environment, touch the streams or run anything.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from simulator.core.driver import Flags
from simulator.errors import MisuseError
from statecharts import COMMANDS, failure_points, load_chart

if TYPE_CHECKING:
    from simulator.core.session import Session
    from simulator.hosts.effects import Store
    from simulator.scenario import Scenario


def integer(text: str) -> int:
    """``text`` as an integer of any size (a seed)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def number(minimum: float, strict: bool = False) -> Callable[[str], float]:
    """A parser of a finite number at least ``minimum`` (above it, when ``strict``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            sign = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"expected a number {sign} {minimum:g}, got {text!r}")
        return value

    return parse


def add_zread_flags(command: argparse.ArgumentParser, name: str) -> None:
    """The flags of ``zread <name>`` itself, as the real command takes them: ``--stdio``
    and those its module declares (:class:`~simulator.core.command.Flag`).

    Each flag's ``metavar`` is the value type zread's help shows (``string``, ``int``)
    and its ``help`` the line it shows; the command line formats both (``simulator.cli``).
    """
    from simulator.core.command import flag_fields

    command.add_argument(
        "--stdio",
        action="store_true",
        help="machine-readable mode: JSON events on stdout, JSON commands on stdin",
    )
    for field in flag_fields(load_chart(name).flags_type):
        flag = field.flag
        if field.switch:
            command.add_argument(*flag.names, dest=field.name, action="store_true", help=flag.help)
            continue
        command.add_argument(
            *flag.names,
            dest=field.name,
            metavar=flag.metavar or "string",
            type=_parser(flag.parse) if flag.parse else str,
            choices=flag.choices or None,
            default=field.default,
            help=flag.help,
        )


def _parser(parse: Callable[[str], object]) -> Callable[[str], object]:
    """``parse`` as argparse calls a type: its ValueError's message becomes the error."""

    def typed(text: str) -> object:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return typed


def flags_of(command: str, args: argparse.Namespace) -> Flags:
    """The flags of ``zread <command>`` from parsed arguments (absent ones: defaults)."""
    from simulator.core.command import flag_fields

    flags_type = load_chart(command).flags_type
    given = {
        f.name: getattr(args, f.name) for f in flag_fields(flags_type) if hasattr(args, f.name)
    }
    return flags_type(**given)


class FlagError(MisuseError, ValueError):
    """Flags ``zread <command>`` does not take (or a command it does not have)."""


class _FlagParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise FlagError(message)


def parse_flags(command: str, args: Sequence[str]) -> Flags:
    """The zread flags of ``zread <command> *args``; :class:`FlagError` naming a bad one.

    Only zread's own flags (and ``--stdio``) are taken: a simulator option such as
    ``--scenario`` is an error here, where it is a keyword argument.
    """
    if command not in COMMANDS:
        raise FlagError(f"unknown command {command!r} (one of {', '.join(COMMANDS)})")
    return _parsed_flags(command, tuple(args))


@functools.lru_cache(maxsize=128)
def _parsed_flags(command: str, args: tuple[str, ...]) -> Flags:
    """The flags of one command line, parsed once: a load run starts thousands of
    sessions with the same few (argparse builds and parses in ~100 us, and looks up its
    message catalogue on disk)."""
    parser = _FlagParser(prog=f"zread {command}", add_help=False, allow_abbrev=False)
    add_zread_flags(parser, command)
    try:
        parsed = parser.parse_args(list(args))
    except FlagError as error:
        raise FlagError(f"zread {command}: {error}") from None
    return flags_of(command, parsed)


def check_failure_points(scenario: Scenario) -> None:
    """:class:`~simulator.scenario.ScenarioError` when a failure of ``scenario`` names
    a point no command declares (a misspelt point would otherwise never fail)."""
    from simulator.scenario import ScenarioError

    points = failure_points()
    for index, failure in enumerate(scenario.failures):
        if failure.point not in points:
            raise ScenarioError(
                f"scenario {scenario.name}: failures[{index}].point: {failure.point!r} is not "
                f"a failure point (one of {', '.join(points)})"
            )


def build_session(
    command: str,
    args: Sequence[str] | Flags = (),
    *,
    scenario: str | Scenario = "default",
    seed: int = 0,
    speed: float = 1.0,
    home: Store | None = None,
) -> Session:
    """A new session of ``zread <command> *args``, as the process would start it.

    ``args`` are zread's flags, as strings or parsed. ``scenario`` is a built-in name,
    a TOML path or a loaded :class:`Scenario`; with a ``home``, the world it keeps is
    laid over the scenario's.
    """
    from simulator.core.session import Session
    from simulator.scenario import load_scenario
    from statecharts import load_chart  # looked up now: a test may stand another in

    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    if loaded.failures:
        check_failure_points(loaded)
    flags = args if isinstance(args, Flags) else parse_flags(command, args)
    if not isinstance(flags, load_chart(command).flags_type):
        raise FlagError(f"zread {command}: flags of type {type(flags).__name__} are not its own")
    chart = load_chart(command)
    if home is not None:
        import msgspec

        read = chart.model.versions_read(flags)
        loaded = msgspec.structs.replace(
            loaded, world=home.world(loaded.world, seed=seed, versions=read)
        )
    return Session(chart, loaded, flags=flags, seed=seed, speed=speed)
