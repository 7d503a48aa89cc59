"""The command line: ``python -m simulator <command> [zread flags] --stdio``.

Owns: argument and environment parsing (argparse), the exit codes, turning every
expected failure into one line on stderr, and starting the process runner. ``main``
takes its streams as arguments so tests can run it in-process.

Every simulator option is also an environment variable, so a client that spawns plain
``zread ...`` can be steered: ``ZREAD_SIM_SCENARIO``, ``ZREAD_SIM_SEED``,
``ZREAD_SIM_SPEED``, ``ZREAD_SIM_HOME``, ``ZREAD_SIM_CONTROL``, ``ZREAD_SIM_FRAME``. A
flag beats its variable.

With ``--home DIR`` the world persists in DIR across commands (``simulator.hosts.home``);
without it nothing is written anywhere.
"""

from __future__ import annotations

import argparse
import enum
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any, BinaryIO, NoReturn

from simulator.core.errors import ConfigurationError
from simulator.launch import add_zread_flags, build_session, flags_of
from statecharts import COMMANDS

__all__ = ["ExitCode", "main"]

PROG = "zread-sim"


class ExitCode(enum.IntEnum):
    OK = 0
    USAGE = 2
    INTERNAL = 70


class UsageError(ConfigurationError):
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


_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")


def _switch(text: str) -> bool:
    if text.lower() in _YES:
        return True
    if text.lower() in _NO:
        return False
    raise argparse.ArgumentTypeError(f"expected 1 or 0 (true/false), got {text!r}")


_ENVIRONMENT: dict[str, tuple[str, str, Any]] = {
    "scenario": ("ZREAD_SIM_SCENARIO", "default", str),
    "seed": ("ZREAD_SIM_SEED", "0", _seed),
    "speed": ("ZREAD_SIM_SPEED", "1", _speed),
    "home": ("ZREAD_SIM_HOME", "", str),
    "control": ("ZREAD_SIM_CONTROL", "", str),
    "frame": ("ZREAD_SIM_FRAME", "0", _switch),
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
        type=_seed,
        help="seed of every random draw (ZREAD_SIM_SEED; default: 0)",
    )
    group.add_argument(
        "--speed",
        metavar="X",
        type=_speed,
        help="multiplies every delay; 0 = no delay (ZREAD_SIM_SPEED; default: 1)",
    )
    group.add_argument(
        "--home",
        metavar="DIR",
        default=None,
        help="keep the world in DIR across commands (ZREAD_SIM_HOME; default: none, "
        "nothing is written)",
    )
    group.add_argument(
        "--control",
        metavar="stdio|unix:PATH",
        default=None,
        help="open the admin API on stdio or a Unix socket (ZREAD_SIM_CONTROL; default: off)",
    )
    group.add_argument(
        "--frame",
        action="store_const",
        const=True,
        default=None,
        help="write events as clijson chunks, the last one also framed (ZREAD_SIM_FRAME=1)",
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
        add_zread_flags(command, name)
    scenarios = sub.add_parser("scenarios", help="list the built-in scenarios, or show one")
    scenarios.add_argument("action", nargs="?", choices=("list", "show"), default="list")
    scenarios.add_argument("name", nargs="?", help="the scenario to show as TOML")
    sub.add_parser("load", help="run many sessions at once and measure (see: load --help)")
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
    from simulator.hosts.effects import EffectHost, Store
    from simulator.runners.stdio import ProcessRunner
    from simulator.scenario import load_scenario

    scenario = load_scenario(args.scenario)  # a bad scenario leaves no home behind
    home: Store | None = None
    if args.home:
        from simulator.hosts.home import Home

        home = Home(args.home)
    try:
        session = build_session(
            args.command,
            flags_of(args),
            scenario=scenario,
            seed=args.seed,
            speed=args.speed,
            home=home,
        )
        runner = ProcessRunner(
            session,
            stdin,
            stdout,
            effects=EffectHost(home=home),
            frame=args.frame,
            control=args.control,
        )
        return runner.run()
    finally:
        if home is not None:
            home.close()


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run the simulator; returns the exit code."""
    err = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["load"]:
        from simulator.tools.load import main as load_main

        return load_main(argv[1:])
    try:
        args = _parser().parse_args(argv)
        if args.command == "scenarios":
            return _scenarios(args, sys.stdout.buffer if stdout is None else stdout)
        _apply_environment(args, os.environ if environ is None else environ)
        if not args.stdio:
            name = "zread" if os.path.basename(sys.argv[0]) == "zread" else PROG
            err.write(
                f"{name}: the simulator stands in for zread's machine-readable mode only; "
                f"run: {name} {args.command} --stdio\n"
            )
            return ExitCode.USAGE
        return _run(args, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)
    except ConfigurationError as error:  # the user's setup: one line, nothing changed
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
    from simulator.runners.stdio import point_at_devnull

    point_at_devnull(sys.stdout.fileno())
