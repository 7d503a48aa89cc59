"""Building a session as ``zread <command> [flags]`` would start: zread's own flags and
the session made from them, a scenario and a home.

Owns: the flags of each zread command (:func:`add_zread_flags`, shared by the command
line and :func:`parse_flags`), turning parsed flags into :class:`Flags`, and
:func:`build_session`, which every runner and tool uses to start a session, so none of
them imports the command line; and the parsers of the simulator's own values a session
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
from statecharts import COMMANDS

if TYPE_CHECKING:
    from simulator.core.session import Session
    from simulator.hosts.effects import Store
    from simulator.scenario import Scenario

__all__ = [
    "FlagError",
    "add_zread_flags",
    "build_session",
    "flags_of",
    "integer",
    "number",
    "parse_flags",
]


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


LOOPBACK = ("127.0.0.1", "localhost", "::1", "127.x.y.z")
"""The hosts ``browse --host`` takes: the simulator serves on this machine only."""


def _host(text: str) -> str:
    """A loopback host, or a usage error: the simulator never listens elsewhere."""
    import ipaddress

    if text.lower() == "localhost":
        return text
    try:
        loopback = ipaddress.ip_address(text).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise argparse.ArgumentTypeError(
            f"refusing to serve on {text!r}: the simulator listens on a loopback address "
            f"only ({', '.join(LOOPBACK)})"
        )
    return text


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535 (0: any free one), got {text!r}")
    return port


def add_zread_flags(command: argparse.ArgumentParser, name: str) -> None:
    """The flags of ``zread <name>`` itself, as the real command takes them.

    Each flag's ``metavar`` is the value type zread's help shows (``string``, ``int``)
    and its ``help`` the line it shows; the command line formats both (``simulator.cli``).
    """
    command.add_argument(
        "--stdio",
        action="store_true",
        help="machine-readable mode: JSON events on stdout, JSON commands on stdin",
    )
    if name == "browse":
        command.add_argument(
            "--host", metavar="string", type=_host, default="127.0.0.1", help="host to serve on"
        )
        command.add_argument(
            "--port",
            metavar="int",
            type=_port,
            default=9681,
            help="port to serve on, the next free one upward when busy; 0: any free port",
        )
        command.add_argument(
            "--version",
            metavar="string",
            default="",
            help="the wiki version to serve (an id under .zread/wiki/versions)",
        )
        command.add_argument(
            "--generate",
            action="store_true",
            help="generate the wiki first when there is none (accepted, not simulated)",
        )
    if name == "generate":
        command.add_argument(
            "-y", "--yes", action="store_true", help="start at once, without asking what to do"
        )
        command.add_argument(
            "--draft",
            "--draft-action",
            dest="draft_action",
            metavar="string",
            choices=("resume", "clear", "cancel"),
            default="",
            help="what to do with an unfinished draft: resume, clear or cancel",
        )
        command.add_argument(
            "--skip-failed",
            action="store_true",
            help="skip the pages that failed instead of waiting for a retry",
        )
    if name == "login":
        command.add_argument(
            "--custom", action="store_true", help="use your own LLM provider and API key"
        )


def flags_of(args: argparse.Namespace) -> Flags:
    """The :class:`Flags` of parsed arguments (absent flags keep their defaults)."""
    return Flags(
        yes=getattr(args, "yes", False),
        draft_action=getattr(args, "draft_action", ""),
        skip_failed=getattr(args, "skip_failed", False),
        custom=getattr(args, "custom", False),
        host=getattr(args, "host", "127.0.0.1"),
        port=getattr(args, "port", 9681),
        version=getattr(args, "version", ""),
    )


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
    return flags_of(parsed)


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
    from statecharts import load_chart

    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    flags = args if isinstance(args, Flags) else parse_flags(command, args)
    if home is not None:
        import msgspec

        loaded = msgspec.structs.replace(loaded, world=home.world(loaded.world, seed=seed))
    return Session(load_chart(command), loaded, flags=flags, seed=seed, speed=speed)
