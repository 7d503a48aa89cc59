"""The command line: ``python -m simulator <command> [zread flags] --stdio``.

Owns: argument and environment parsing (argparse), the exit codes, turning every
expected failure into one line on stderr, and choosing the runner. ``main`` takes its
streams as arguments so tests can run it in-process.

Every simulator option is also an environment variable, so a client that spawns plain
``zread ...`` can be steered: ``ZREAD_SIM_SCENARIO``, ``ZREAD_SIM_SEED``,
``ZREAD_SIM_SPEED``. A flag beats its variable.
"""

from __future__ import annotations

import argparse
import enum
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any, BinaryIO, NoReturn

from statecharts import COMMANDS

__all__ = ["ExitCode", "main"]

PROG = "zread-sim"


class ExitCode(enum.IntEnum):
    OK = 0
    USAGE = 2
    INTERNAL = 70


class UsageError(Exception):
    """A bad flag, variable or scenario: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


_SPEED_TYPE: Any = _speed
_SEED_TYPE: Any = _seed


_ENVIRONMENT: dict[str, tuple[str, str, Any]] = {
    "scenario": ("ZREAD_SIM_SCENARIO", "default", str),
    "seed": ("ZREAD_SIM_SEED", "0", _seed),
    "speed": ("ZREAD_SIM_SPEED", "1", _speed),
}
"""option -> (variable, default, parser): what an option falls back to when not given."""


def _apply_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    for option, (variable, default, parse) in _ENVIRONMENT.items():
        if getattr(args, option, None) is not None:
            continue
        text = environ.get(variable, default)
        try:
            setattr(args, option, parse(text))
        except argparse.ArgumentTypeError as error:
            raise UsageError(f"{variable}: {error}") from None


def _simulator_options() -> _Parser:
    parent = _Parser(add_help=False)
    group = parent.add_argument_group("simulator options (each also an environment variable)")
    group.add_argument(
        "--scenario",
        metavar="NAME|PATH",
        default=None,
        help="built-in scenario name or TOML file (ZREAD_SIM_SCENARIO; default: default)",
    )
    group.add_argument(
        "--seed",
        metavar="N",
        type=_SEED_TYPE,
        help="seed of every random draw (ZREAD_SIM_SEED; default: 0)",
    )
    group.add_argument(
        "--speed",
        metavar="X",
        type=_SPEED_TYPE,
        help="multiplies every delay; 0 = no delay (ZREAD_SIM_SPEED; default: 1)",
    )
    return parent


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="A stand-in for zread's --stdio mode: the six drivers, with delays "
        "and failures on demand.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parent = _simulator_options()
    for name, summary in COMMANDS.items():
        command = sub.add_parser(name, help=summary, description=summary, parents=[parent])
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
    scenarios = sub.add_parser("scenarios", help="list the built-in scenarios, or show one")
    scenarios.add_argument("action", nargs="?", choices=("list", "show"), default="list")
    scenarios.add_argument("name", nargs="?", help="the scenario to show as TOML")
    return parser


def _scenarios(args: argparse.Namespace, out: BinaryIO) -> int:
    from simulator.scenario import builtin_names, builtin_text, load_scenario

    if args.action == "show":
        if not args.name:
            raise UsageError("scenarios show: name a scenario")
        out.write(builtin_text(args.name).encode("utf-8"))
    else:
        names = builtin_names()
        width = max(map(len, names))
        for name in names:
            out.write(f"{name:<{width}}  {load_scenario(name).description}\n".encode())
    out.flush()
    return ExitCode.OK


def _run(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> int:
    from simulator.driver import Flags
    from simulator.scenario import load_scenario
    from simulator.session import Session
    from simulator.stdio import StdioRunner
    from statecharts import load_chart

    scenario = load_scenario(args.scenario)
    flags = Flags(
        yes=getattr(args, "yes", False),
        draft_action=getattr(args, "draft_action", ""),
        skip_failed=getattr(args, "skip_failed", False),
        custom=getattr(args, "custom", False),
    )
    session = Session(
        load_chart(args.command), scenario, flags=flags, seed=args.seed, speed=args.speed
    )
    return StdioRunner(session, stdin, stdout).run()


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run the simulator; returns the exit code."""
    from simulator.scenario import ScenarioError
    from simulator.session import SessionError

    err = stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
        _apply_environment(args, os.environ if environ is None else environ)
        if args.command == "scenarios":
            return _scenarios(args, sys.stdout.buffer if stdout is None else stdout)
        if not args.stdio:
            err.write(
                f"{PROG}: the simulator stands in for zread's machine-readable mode only; "
                f"run: {PROG} {args.command} --stdio\n"
            )
            return ExitCode.USAGE
        return _run(args, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)
    except (UsageError, ScenarioError, SessionError) as error:
        err.write(f"{PROG}: {error}\n")
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.OK
    except BrokenPipeError:  # the reader went away: nothing left to say, and no one to say it to
        _silence_stdout()
        return ExitCode.OK
    except Exception as error:  # the simulator's own bug: one line, never a traceback
        err.write(f"{PROG}: internal error: {type(error).__name__}: {error}\n")
        if os.environ.get("ZREAD_SIM_DEBUG"):
            import traceback

            traceback.print_exc(file=err)
        return ExitCode.INTERNAL


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail loudly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
