"""Building a session as ``zread <command> [flags]`` would start: zread's own flags and
the session made from them, a scenario and a home.

Owns: the flags of each zread command (:func:`add_zread_flags`, shared by the command
line and :func:`parse_flags`), turning parsed flags into :class:`Flags`, and
:func:`build_session`, which every runner and tool uses to start a session, so none of
them imports the command line.

Must not: read the environment, touch the streams or run anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from simulator.core.driver import Flags
from simulator.core.errors import MisuseError
from statecharts import COMMANDS

if TYPE_CHECKING:
    from simulator.core.session import Session
    from simulator.hosts.effects import Store
    from simulator.scenario import Scenario

__all__ = ["FlagError", "add_zread_flags", "build_session", "flags_of", "parse_flags"]


def add_zread_flags(command: argparse.ArgumentParser, name: str) -> None:
    """The flags of ``zread <name>`` itself, as the real command takes them."""
    command.add_argument("--stdio", action="store_true", help="JSON lines on stdin/stdout")
    if name == "generate":
        command.add_argument("-y", "--yes", action="store_true", help="skip select_action")
        command.add_argument(
            "--draft-action",
            choices=("resume", "clear", "cancel"),
            default="",
            help="answer the draft prompt",
        )
        command.add_argument(
            "--skip-failed", action="store_true", help="answer a retry gate with skip_all"
        )
    if name == "login":
        command.add_argument("--custom", action="store_true", help="use your own LLM provider")


def flags_of(args: argparse.Namespace) -> Flags:
    """The :class:`Flags` of parsed arguments (absent flags keep their defaults)."""
    return Flags(
        yes=getattr(args, "yes", False),
        draft_action=getattr(args, "draft_action", ""),
        skip_failed=getattr(args, "skip_failed", False),
        custom=getattr(args, "custom", False),
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
    parser = _FlagParser(prog=f"zread {command}", add_help=False)
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
