"""The program: ``main``, a command line parsed, the help, the version, the exit codes.

Owns: dispatching a command line to zread's commands (their modules under
``statecharts/``) or ``zread-sim``'s own (:data:`~simulator.cli.commands.SUBCOMMANDS`);
parsing it with the simulator options and their variables; the help of the program,
of zread's commands and of ``help`` in cobra's layout (:mod:`simulator.cobra`), since
clients probe ``zread <command> --help`` for zread's texts; the version lines; the exit
codes, and turning every expected failure into one line on stderr, never a traceback.
``main`` takes its streams as arguments so tests can run it in-process.

Start-up stays lean: a command imports what it needs when it needs it.
"""

from __future__ import annotations

import argparse
import enum
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, BinaryIO, Protocol

from simulator.cli.commands import SUBCOMMANDS, run_tool, tool_help
from simulator.cli.options import (
    UsageError,
    add_simulator_options,
    apply_environment,
)
from simulator.cli.parsers import (
    parsed_arguments,
    takes_simulator_options,
    topic_parser,
)
from simulator.cobra import command_lines, flag_usages, help_page
from simulator.errors import ConfigurationError
from simulator.hosts import limits  # now: out of descriptors, no import would work
from statecharts import COMMANDS, command_module

PROG = "zread-sim"
ZREAD = "zread"


class ExitCode(enum.IntEnum):
    OK = 0
    USAGE = 2
    INTERNAL = 70


# -- the help -----------------------------------------------------------------------------


def _zread_commands() -> dict[str, str]:
    """Each zread command's one-line summary (its module's ``SUMMARY``), as ``zread
    --help`` lists it."""
    return {
        **{command: command_module(command).SUMMARY for command in COMMANDS},
        "help": "Help about any command",
    }


_SAFETY = (
    "{who}. It writes where zread writes: ~/.zread/\n"
    "and the project's .zread/ (--no-files writes nothing)."
)
_PROGRAM = (
    "Zread turns a code repository into a wiki: it generates the pages with an LLM and\n"
    "serves them in the browser.\n\n" + _SAFETY
)
_HELP = (
    "Help provides help for any command in the application.\n"
    "Simply type zread help [path to command] for full details."
)


def _long_help(topic: str, who: str) -> str:
    """What the help of ``topic`` says before the usage: a zread command's module's
    ``HELP``, a simulator command's ``help``, or the program's."""
    if topic in COMMANDS:
        return str(command_module(topic).HELP)
    if topic in SUBCOMMANDS:
        return SUBCOMMANDS[topic].help
    return _HELP if topic == "help" else _PROGRAM.format(who=who)


def _help_text(topic: str, name: str) -> str:
    """The help of ``topic`` ("" for the program) in cobra's layout."""
    simulator = name != ZREAD
    if simulator and topic in SUBCOMMANDS and SUBCOMMANDS[topic].tool:
        return tool_help(topic)
    who = "zread-sim stands in for zread" if simulator else "This zread is zread-sim, a stand-in"
    sections: list[tuple[str, list[str]]] = []
    if not topic:
        usage = f"{name} [command]"
        sections.append(("Available Commands:", command_lines(_zread_commands())))
        if simulator:
            own = {command: spec.summary for command, spec in SUBCOMMANDS.items()}
            sections.append(("Simulator Commands:", command_lines(own)))
    else:
        spec = SUBCOMMANDS.get(topic)
        usage = f"{name} {spec.usage if spec and spec.usage else _USE.get(topic, topic)} [flags]"
    parser = topic_parser(topic, name, with_simulator_options=False)
    sections.append(("Flags:", flag_usages(parser._actions)))
    if simulator and takes_simulator_options(topic):
        options = argparse.ArgumentParser(add_help=False)
        add_simulator_options(options)
        heading = "Simulator Flags:" if topic in ("", *COMMANDS) else "Options to bake in:"
        sections.append((heading, flag_usages(options._actions)))
    footer = f'Use "{name} [command] --help" for more information about a command.'
    return help_page(
        _long_help(topic, who), usage, sections=sections, footer="" if topic else footer
    )


_USE = {"help": "help [command]"}
"""The usage of ``help``, the one command zread and zread-sim share that takes more than
flags."""


def _topics(name: str) -> tuple[str, ...]:
    own = tuple(SUBCOMMANDS) if name != ZREAD else ()
    return (*COMMANDS, "help", *own)


def _invoked_name() -> str:
    base = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return ZREAD if base.lower().removesuffix(".exe") == ZREAD else PROG


# -- the commands -------------------------------------------------------------------------


def _zread_version(args: argparse.Namespace) -> str:
    """The version of zread the scenario plays (``0.2.13``)."""
    from simulator.scenario import load_scenario

    return load_scenario(args.scenario).world.release.current_version


def _version_line(args: argparse.Namespace, *, with_platform: bool) -> str:
    """``zread version 0.2.13`` (cobra's ``--version``), with the OS/arch for ``version``."""
    version = _zread_version(args)
    if not with_platform:
        return f"{ZREAD} version {version}\n"
    from statecharts.version import go_arch, go_os

    return f"{ZREAD} version {version} {go_os()}/{go_arch()}\n"


def _tool_version_line(args: argparse.Namespace, name: str) -> str:
    """``zread-sim 0.1.0 (plays zread 0.2.13)``: what ``zread-sim --version`` prints."""
    from importlib import metadata

    try:
        own = metadata.version("zread-sim")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        own = "(not installed)"
    return f"{name} {own} (plays {ZREAD} {_zread_version(args)})\n"


def _dispatch(
    argv: list[str],
    name: str,
    stdin: BinaryIO | None,
    stdout: BinaryIO | None,
    err: _TextWriter,
    environ: Mapping[str, str],
) -> int:
    out = _standard_output() if stdout is None else stdout

    def write(text: str) -> int:
        out.write(text.encode("utf-8"))
        out.flush()
        return ExitCode.OK

    topic = "" if not argv or argv[0].startswith("-") else argv[0]
    if topic not in ("", *_topics(name)):
        raise UsageError(f'unknown command "{topic}" for "{name}" (see: {name} --help)')
    args = parsed_arguments(topic, name, argv)
    if isinstance(args, str):  # --help: the help of that topic
        _release_signals()
        return write(_help_text(args, name))
    args.command = topic
    args.program, args.invocation = name, [name, *argv]  # what the journal says
    if topic not in COMMANDS or not args.stdio:
        _release_signals()  # no session: the signals act as on any program
    if topic not in COMMANDS:
        return _not_a_session(args, name, out, environ, write)
    apply_environment(args, environ)
    if not args.stdio:
        if topic == "version":
            return write(_version_line(args, with_platform=True))
        err.write(
            f"{name}: the simulator stands in for zread's machine-readable mode only; "
            f"run: {name} {topic} --stdio\n"
        )
        return ExitCode.USAGE
    from simulator.cli.session import run

    return run(args, stdin or _standard_input(), out, environ)


def _not_a_session(
    args: argparse.Namespace,
    name: str,
    out: BinaryIO,
    environ: Mapping[str, str],
    write: Callable[[str], int],
) -> int:
    """The program alone, ``help``, or one of zread-sim's own commands."""
    if not args.command:
        return write(_program(args, name, environ))
    if args.command == "help":
        if args.about and args.about not in _topics(name):
            raise UsageError(f'unknown help topic "{args.about}" (see: {name} --help)')
        return write(_help_text(args.about, name))
    run = SUBCOMMANDS[args.command].run
    assert run is not None, "a tool is run before the command line is parsed"
    return run(args, out)


def _program(args: argparse.Namespace, name: str, environ: Mapping[str, str]) -> str:
    """What the program alone prints: its help, or with ``--version`` its version."""
    if not args.version:
        return _help_text("", name)
    apply_environment(args, environ)
    if name != ZREAD:  # the tool's own version, and the zread it plays
        return _tool_version_line(args, name)
    return _version_line(args, with_platform=False)


RECORD_MODES = ("none", "once", "all")
"""``ZREAD_SIM_RECORD_MODE``, as vcrpy's: ``none`` replays the cassette (it must exist),
``once`` (the default) replays it when it exists and records it when it does not,
``all`` records it every time."""


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
    prog: str | None = None,
) -> int:
    """Run the program; returns the exit code.

    ``prog`` is the name it was invoked by (``zread`` or ``zread-sim``); by default the
    basename of ``sys.argv[0]``. Help, version and ``scenarios`` write to ``stdout``.
    """
    err = stderr or sys.stderr or _Fd2()
    argv = list(sys.argv[1:] if argv is None else argv)
    name = prog or _invoked_name()
    environment = os.environ if environ is None else environ
    if name != ZREAD and argv[:1] and argv[0] in SUBCOMMANDS and SUBCOMMANDS[argv[0]].tool:
        _release_signals()  # a tool acts on signals as any program does
        return run_tool(argv[0], argv[1:])
    if environment.get("ZREAD_SIM_RECORD"):  # the drop-in recorder, around ZREAD_SIM_REAL
        recorded = _recording(argv, name, environment, err)
        if isinstance(recorded, int):
            return recorded
        environment = recorded
    try:
        return _dispatch(argv, name, stdin, stdout, err, environment)
    except BaseException as error:
        topic = argv[0] if argv and not argv[0].startswith("-") else ""
        return _exit_code(error, name, err, doing=f"running {topic or name}")


def _recording(
    argv: list[str], name: str, environment: Mapping[str, str], err: _TextWriter
) -> Mapping[str, str] | int:
    """With ``ZREAD_SIM_RECORD``: the environment that plays its cassette back, or the
    exit code of the real zread recorded into it (or of a bad mode)."""
    mode = environment.get("ZREAD_SIM_RECORD_MODE", "once")
    cassette = environment["ZREAD_SIM_RECORD"]
    if mode not in RECORD_MODES:
        err.write(f"{name}: ZREAD_SIM_RECORD_MODE: {mode!r} is not one of none, once, all\n")
        return ExitCode.USAGE
    if mode == "none" or (mode == "once" and os.path.exists(cassette)):
        return {  # play the cassette back instead of running zread
            **{k: v for k, v in environment.items() if k != "ZREAD_SIM_RECORD"},
            "ZREAD_SIM_SCENARIO": f"replay:{cassette}",
        }
    from simulator.tools.record import record_as_dropin

    _release_signals()  # the real zread recorded gets them as it would
    return record_as_dropin(argv, environment)


def _exit_code(error: BaseException, name: str, err: _TextWriter, *, doing: str = "") -> int:
    """What a run that raised ``error`` says on stderr, as its exit code says whose fault
    it was; anything but an exit or an error of the run's is raised again. Out of
    descriptors, memory or threads where nothing named the work, ``doing`` does."""
    if limits.exhausted(error) and not isinstance(error, ConfigurationError):
        error = limits.out_of(error, doing or "running")  # the machine's: exit 2
    if isinstance(error, ConfigurationError):  # the user's setup: one line, nothing changed
        err.write(f"{name}: {_one_line(str(error))}\n")
        return ExitCode(error.exit_code)
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.OK
    if isinstance(error, BrokenPipeError):  # the reader went away: no one to tell
        _silence_stdout()
        return ExitCode.OK
    if isinstance(error, OSError):  # the environment's: a full disk, a stream unusable
        where = f" ({error.filename})" if error.filename else ""
        err.write(f"{name}: {_one_line(f'{error.strerror or error}{where}')}\n")
        return ExitCode.USAGE
    if not isinstance(error, Exception):  # SystemExit and the like: not ours to answer
        raise error
    err.write(f"{name}: internal error: {type(error).__name__}: {_one_line(str(error))}\n")
    if os.environ.get("ZREAD_SIM_DEBUG"):
        import traceback

        traceback.print_exception(error, file=err)
    return ExitCode.INTERNAL


def _release_signals() -> None:
    from simulator import signals

    signals.release()


def _one_line(text: str) -> str:
    """``text`` with every character that is not printable (a newline, a terminal
    escape, a line or paragraph separator, a direction override) escaped: a name from a
    hostile file or directory cannot break the one line an error is, or reach the
    terminal as anything but text."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class StreamClosedError(ConfigurationError):
    """A standard stream the run needs was closed before it started."""


def _standard_output() -> BinaryIO:
    if sys.stdout is None:  # started with stdout closed (>&-)
        raise StreamClosedError("stdout is closed: there is nowhere to write the events")
    return sys.stdout.buffer


def _standard_input() -> BinaryIO:
    """stdin; started with it closed (<&-), no input at all, as with a null stdin."""
    if sys.stdin is None:
        return open(os.devnull, "rb")
    return sys.stdin.buffer


class _TextWriter(Protocol):
    def write(self, text: str, /) -> int: ...


class _Fd2:
    """stderr when ``sys.stderr`` is None (started with it closed): a line written to fd
    2 if it can be, else nowhere."""

    def write(self, text: str) -> int:
        from simulator.runners.stdio import write_line

        write_line(2, text.rstrip("\n"))
        return len(text)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail loudly."""
    from simulator.runners.stdio import point_at_devnull

    point_at_devnull(sys.stdout.fileno())
