"""The command line: ``zread <command> [flags] --stdio`` and ``zread-sim``'s own commands.

Owns: argument and environment parsing (argparse), the help and version texts, the exit
codes, turning every expected failure into one line on stderr, ``zread-sim install``,
and starting the process runner. ``main`` takes its streams as arguments so tests can
run it in-process.

One program, two names. Invoked as ``zread`` (``argv[0]``'s basename, or ``prog=``) it
is the drop-in: zread's six commands, zread's help, errors naming ``zread``. Invoked
under any other name it is ``zread-sim``, which adds its own commands (``scenarios``,
``load``, ``install``, ``journal``, ``record``, ``check``, ``coverage``, ``paths``,
``charts``, ``schema``) and lists the simulator options in its help. Both accept the
simulator options after a command.

Every simulator option is also an environment variable, so a client that spawns plain
``zread ...`` can be steered: ``ZREAD_SIM_SCENARIO``, ``ZREAD_SIM_SEED``,
``ZREAD_SIM_SPEED``, ``ZREAD_SIM_HOME``, ``ZREAD_SIM_PROJECT``, ``ZREAD_SIM_FILES``,
``ZREAD_SIM_CONTROL``, ``ZREAD_SIM_FRAME``, ``ZREAD_SIM_JOURNAL``. A flag beats its
variable. ``zread-sim
install DIR`` bakes options into a ``DIR/zread`` script as defaults of those variables
(``simulator.hosts.executable``), for clients that strip their child's environment.

The help is written here by hand in the layout of cobra, Go's usual command-line
library: ``Usage:``, ``Available Commands:``, ``Flags:`` in pflag's columns, with
``-h, --help`` as ``help for X``. argparse's layout differs (``usage:``, ``options:``,
other columns), and zread, a Go program, is expected to print cobra's; clients probe
``zread <command> --help`` for zread's texts. The flag lines are formatted from the
same argparse actions that parse the flags (``simulator.launch.add_zread_flags``), so
the help cannot list a flag that is not taken.

Start-up stays lean: a command imports what it needs when it needs it.
"""

from __future__ import annotations

import argparse
import enum
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, BinaryIO, NoReturn, Protocol

from simulator.errors import ConfigurationError
from simulator.launch import add_zread_flags, build_session, flags_of, integer, number
from statecharts import COMMANDS

if TYPE_CHECKING:
    from simulator.hosts.journal import JournalWriter
    from simulator.scenario import Scenario

__all__ = ["ExitCode", "main"]

PROG = "zread-sim"
ZREAD = "zread"


class ExitCode(enum.IntEnum):
    OK = 0
    USAGE = 2
    INTERNAL = 70


class UsageError(ConfigurationError):
    """A bad flag, variable or scenario: one line on stderr, exit 2."""


class _HelpRequested(Exception):
    """``-h``/``--help`` was given: print the help of ``topic`` ("" is the program's)."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.topic = topic


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, which formats no text here (the help is this module's), with
    a fixed width: argparse makes one per flag added (to check its metavar), and left
    to itself each asks the terminal for its width, importing shutil to do so."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80)


class _Parser(argparse.ArgumentParser):
    """Raises instead of printing: an error is one line, help is this module's text."""

    def __init__(self, topic: str, name: str) -> None:
        super().__init__(
            prog=f"{name} {topic}".strip(),
            add_help=False,
            allow_abbrev=False,
            formatter_class=_Formatter,
        )
        self.topic = topic
        self.add_argument(
            "-h", "--help", action=_HelpAction, nargs=0, help=f"help for {topic or name}"
        )

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.topic}: {message}" if self.topic else message)


class _HelpAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> NoReturn:
        raise _HelpRequested(parser.topic if isinstance(parser, _Parser) else "")


# -- the simulator options ----------------------------------------------------------------


_speed = number(0.0)
_seed = integer


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
    "project": ("ZREAD_SIM_PROJECT", "", str),
    "files": ("ZREAD_SIM_FILES", "1", _switch),
    "control": ("ZREAD_SIM_CONTROL", "", str),
    "frame": ("ZREAD_SIM_FRAME", "0", _switch),
    "journal": ("ZREAD_SIM_JOURNAL", "", str),
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


def _add_simulator_options(parser: argparse.ArgumentParser) -> None:
    """The simulator's own options; each defaults to None, then to its variable."""
    parser.add_argument(
        "--scenario",
        metavar="NAME|PATH",
        default=None,
        help="a built-in scenario or a TOML file (ZREAD_SIM_SCENARIO; default: default)",
    )
    parser.add_argument(
        "--seed",
        metavar="N",
        type=_seed,
        help="seed of every random draw (ZREAD_SIM_SEED; default: 0)",
    )
    parser.add_argument(
        "--speed",
        metavar="X",
        type=_speed,
        help="multiplies every delay; 0 = no delay (ZREAD_SIM_SPEED; default: 1)",
    )
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=None,
        help="the folder that plays HOME: ~/.zread/ is DIR/.zread/ (ZREAD_SIM_HOME)",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        default=None,
        help="the project whose .zread/ is used (ZREAD_SIM_PROJECT; default: the working "
        "directory)",
    )
    parser.add_argument(
        "--no-files",
        dest="files",
        action="store_const",
        const=False,
        default=None,
        help="keep the whole world in memory and write no file (ZREAD_SIM_FILES=0)",
    )
    parser.add_argument(
        "--control",
        metavar="stdio|unix:PATH",
        default=None,
        help="open the admin API on stdio or a Unix socket (ZREAD_SIM_CONTROL; default: off)",
    )
    parser.add_argument(
        "--frame",
        action="store_const",
        const=True,
        default=None,
        help="write events as clijson chunks, the last one also framed (ZREAD_SIM_FRAME=1)",
    )
    parser.add_argument(
        "--journal",
        metavar="FILE",
        default=None,
        help="append a JSON line per line read, event and exit to FILE (ZREAD_SIM_JOURNAL)",
    )


# -- the help -----------------------------------------------------------------------------

_SHORT = {
    "browse": "Browse the generated wiki in a local web server",
    "config": "Edit zread's configuration",
    "generate": "Generate wiki documentation for the current repository",
    "help": "Help about any command",
    "login": "Login flow: sign in and choose a model",
    "update": "Update Zread to the latest version",
    "version": "Print the version of Zread",
}
"""Each zread command's one-line summary, as ``zread --help`` lists it."""

_SIMULATOR_SHORT = {
    "install": "Write a zread executable with simulator options baked in",
    "journal": "Print a --journal file; exit 1 when it holds the client's mistakes",
    "load": "Run many sessions at once and measure (see: load --help)",
    "record": "Record a zread run into a cassette, checking both sides (see: record --help)",
    "check": "Check a cassette against the charts (see: check --help)",
    "coverage": "Which states, transitions and gates journaled runs reached (see: coverage --help)",
    "paths": "Test cases that together take every transition of a chart (see: paths --help)",
    "charts": "Draw a chart as a mermaid or Graphviz diagram (see: charts --help)",
    "schema": "Print the JSON Schema of events, commands or scenarios (see: schema --help)",
    "scenarios": "List the built-in scenarios, or show one",
}
"""``zread-sim``'s own commands, which ``zread`` does not have."""

_SAFETY = (
    "{who}. It writes where zread writes: ~/.zread/\n"
    "and the project's .zread/ (--no-files writes nothing)."
)

_LONG = {
    "": "Zread turns a code repository into a wiki: it generates the pages with an LLM and\n"
    "serves them in the browser.\n\n" + _SAFETY,
    "browse": "Browse the generated wiki in a local web server.\n\n"
    "Serves the project's .zread/wiki (the current version, or the one --version names)\n"
    "on http://127.0.0.1:9681, the next free port upward when that one is busy.",
    "config": "Edit zread's configuration: languages, concurrency and the LLM provider,\n"
    "kept in ~/.zread/config.yaml.",
    "generate": "Generate wiki documentation for the current repository.\n\n"
    "Writes a catalog, then each page, into .zread/wiki/drafts/ in the project; when it\n"
    "is done the draft becomes .zread/wiki/versions/<id> and .zread/wiki/current names it.",
    "login": "Login flow: sign in to Zread in the browser, then choose a model.\n\n"
    "With --custom, use your own LLM provider instead.",
    "update": "Update Zread to the latest version.",
    "version": "Print the version of Zread.",
    "help": "Help provides help for any command in the application.\n"
    "Simply type zread help [path to command] for full details.",
    "install": "Write an executable DIR/zread that runs this simulator with the options given\n"
    "here baked in as defaults: a ZREAD_SIM_* variable set when it runs overrides a baked\n"
    "option, and a flag on its command line overrides both. It needs no variable, so a\n"
    "client that strips its child's environment is steered anyway.",
    "journal": "Print a file written by --journal (ZREAD_SIM_JOURNAL), one line per entry,\n"
    "grouped per process, and each mistake of the client: a line out of turn, bad JSON\n"
    "or params, an internal (_) command, anything after done, a client gone before it\n"
    "read done, a process ended by a signal instead of quit. Exits 1 when there is one,\n"
    "0 when there is none, 2 when the file cannot be read.",
    "load": _SIMULATOR_SHORT["load"] + ".",
    "record": _SIMULATOR_SHORT["record"] + ".",
    "check": _SIMULATOR_SHORT["check"] + ".",
    "coverage": _SIMULATOR_SHORT["coverage"] + ".",
    "paths": _SIMULATOR_SHORT["paths"] + ".",
    "charts": _SIMULATOR_SHORT["charts"] + ".",
    "schema": _SIMULATOR_SHORT["schema"] + ".",
    "scenarios": "List the built-in scenarios, or show one as TOML.",
}

_USE = {
    "help": "help [command]",
    "install": "install DIR",
    "journal": "journal FILE",
    "load": "load COMMAND",
    "record": "record --out FILE -- PROGRAM [ARG...]",
    "check": "check CASSETTE",
    "coverage": "coverage JOURNAL...",
    "paths": "paths COMMAND",
    "charts": "charts COMMAND",
    "schema": "schema events|commands COMMAND, or schema scenario",
    "scenarios": "scenarios [list|show NAME]",
}
"""A command's usage line where it takes more than flags."""


_TOOLS = {
    "coverage": "simulator.tools.coverage",
    "paths": "simulator.tools.paths",
    "charts": "simulator.tools.charts",
    "schema": "simulator.tools.schema",
}
"""``zread-sim`` commands that are a tool module's ``main(argv)``, given the arguments
after the command's name."""

_WITHOUT_SIMULATOR_OPTIONS = (
    "help",
    "journal",
    "load",
    "record",
    "check",
    "scenarios",
    *_TOOLS,
)


def _flag_rows(actions: Iterable[argparse.Action]) -> list[tuple[str, str, str]]:
    """(name, flag column, usage) of each flag, as pflag writes them."""
    rows = []
    for action in actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs:
            continue
        shorts = [o for o in action.option_strings if not o.startswith("--")]
        column = f"  {shorts[0]}, {longs[0]}" if shorts else f"      {longs[0]}"
        if action.nargs != 0:
            column += f" {action.metavar or 'string'}"
        usage = action.help or ""
        default = action.default
        if action.nargs != 0 and default not in (None, "", 0):
            usage += (
                f' (default "{default}")' if isinstance(default, str) else f" (default {default})"
            )
        rows.append((longs[0].lstrip("-"), column, usage))
    return sorted(rows)


def _flag_usages(actions: Iterable[argparse.Action]) -> list[str]:
    """pflag's FlagUsages: sorted by name, the usages three spaces after the widest."""
    rows = _flag_rows(actions)
    width = max((len(column) for _, column, _ in rows), default=0)
    return [f"{column:<{width}}   {usage}".rstrip() for _, column, usage in rows]


def _command_lines(commands: Mapping[str, str]) -> list[str]:
    padding = max(11, *map(len, commands))
    return [f"  {name:<{padding}} {summary}" for name, summary in sorted(commands.items())]


def _help_text(topic: str, name: str) -> str:
    """The help of ``topic`` ("" for the program) in cobra's layout."""
    simulator = name != ZREAD
    who = "zread-sim stands in for zread" if simulator else "This zread is zread-sim, a stand-in"
    lines = [_LONG[topic].format(who=who), "", "Usage:"]
    if not topic:
        lines += [f"  {name} [command]", "", "Available Commands:", *_command_lines(_SHORT)]
        if simulator:
            lines += ["", "Simulator Commands:", *_command_lines(_SIMULATOR_SHORT)]
    else:
        lines.append(f"  {name} {_USE.get(topic, topic)} [flags]")
    parser = _topic_parser(topic, name, with_simulator_options=False)
    lines += ["", "Flags:", *_flag_usages(parser._actions)]
    if simulator and topic not in _WITHOUT_SIMULATOR_OPTIONS:
        options = argparse.ArgumentParser(add_help=False)
        _add_simulator_options(options)
        heading = "Simulator Flags:" if topic != "install" else "Options to bake in:"
        lines += ["", heading, *_flag_usages(options._actions)]
    if not topic:
        lines += ["", f'Use "{name} [command] --help" for more information about a command.']
    return "\n".join(lines) + "\n"


# -- the parsers --------------------------------------------------------------------------


def _topic_parser(topic: str, name: str, *, with_simulator_options: bool = True) -> _Parser:
    """The parser of ``topic``: "" (the program), a zread command, or a simulator one."""
    parser = _Parser(topic, name)
    if not topic:
        parser.add_argument("-v", "--version", action="store_true", help=f"version for {name}")
    elif topic in COMMANDS:
        add_zread_flags(parser, topic)
    elif topic == "help":
        parser.add_argument("about", nargs="?", default="")
    elif topic == "scenarios":
        parser.add_argument("action", nargs="?", choices=("list", "show"), default="list")
        parser.add_argument("name", nargs="?", help="the scenario to show as TOML")
    elif topic == "install":
        parser.add_argument("dir", help="the folder to write zread in")
    elif topic == "journal":
        parser.add_argument("file", help="the journal to read")
    if with_simulator_options and topic not in _WITHOUT_SIMULATOR_OPTIONS:
        _add_simulator_options(parser)
    return parser


def _parsed_arguments(topic: str, name: str, argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by the parser of ``topic``.

    ``version --stdio``, the line a client runs to find out what it talks to, gets the
    namespace that parser returns for it without the parser being built (eleven
    actions, a formatter made for each, and argparse's message catalogue looked up on
    disk): ``--stdio``, and every other option left to its default, None for each
    simulator option (then its variable). A test holds the two equal.
    """
    if topic == "version" and argv[1:] == ["--stdio"]:
        return argparse.Namespace(help=None, stdio=True, **dict.fromkeys(_ENVIRONMENT))
    return _topic_parser(topic, name).parse_args(argv[1:] if topic else argv)


def _topics(name: str) -> tuple[str, ...]:
    own = tuple(_SIMULATOR_SHORT) if name != ZREAD else ()
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


def _baked(args: argparse.Namespace) -> dict[str, str]:
    """The variables ``install`` writes into the script: the options given, as text that
    means the same from any working directory (paths made absolute)."""
    baked: dict[str, str] = {}
    for option, (variable, _, _) in _ENVIRONMENT.items():
        value = getattr(args, option)
        if value is None:
            continue
        if option == "scenario":
            from simulator.scenario import load_scenario

            load_scenario(value)  # an unknown scenario fails now, not in every run
            if value.endswith(".toml") or "/" in value or os.sep in value:  # a file, not a name
                value = os.path.abspath(value)
        elif option in ("home", "project", "journal") and value:
            value = os.path.abspath(value)
        elif option == "control" and value.startswith("unix:") and value != "unix:":
            value = "unix:" + os.path.abspath(value[len("unix:") :])
        elif option == "speed":
            value = repr(value)
        elif isinstance(value, bool):
            value = "1" if value else "0"
        baked[variable] = str(value)
    return baked


def _install(args: argparse.Namespace, out: BinaryIO) -> int:
    from pathlib import Path

    from simulator.hosts.executable import write_zread_executable

    baked = _baked(args)
    folder = Path(args.dir).absolute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        script = write_zread_executable(folder, baked)
    except OSError as error:
        raise UsageError(f"install: {folder}: {error.strerror or error}") from None
    out.write(f"{script}\n".encode())
    out.flush()
    return ExitCode.OK


def _run(
    args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO, environ: Mapping[str, str]
) -> int:
    from simulator.scenario import load_scenario

    if args.scenario.startswith("replay:"):  # a cassette played back (simulator.tools.replay)
        return _run_replay(args, stdin, stdout)
    scenario = load_scenario(args.scenario)  # a bad scenario reads and writes no file
    if not args.journal:
        return _run_session(args, scenario, stdin, stdout, environ, None)
    from simulator.hosts.journal import JournalWriter
    from simulator.runners.stdio import write_line

    def warn(line: str) -> None:  # on the process's stderr, where the runner writes
        write_line(2, f"{args.program}: {line}")

    # Opened before anything else is done: a path it cannot append to is exit 2.
    journal = JournalWriter.open(args.journal, warn=warn)
    try:
        return _run_session(args, scenario, stdin, stdout, environ, journal)
    finally:
        journal.close()


def _run_replay(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> int:
    from simulator.tools.replay import cassette_of, run_replay

    for option, flag in (("control", "--control"), ("journal", "--journal")):
        if getattr(args, option):
            raise UsageError(f"{flag} cannot be used with --scenario replay:CASSETTE")
    path = cassette_of(args.scenario) or ""
    return run_replay(path, stdin, stdout, speed=args.speed, frame=args.frame, program=args.program)


def _run_session(
    args: argparse.Namespace,
    scenario: Scenario,
    stdin: BinaryIO,
    stdout: BinaryIO,
    environ: Mapping[str, str],
    journal: JournalWriter | None,
) -> int:
    from simulator.hosts.effects import EffectHost
    from simulator.runners.stdio import LATENESS_FILE, ProcessRunner

    store = None
    # zread's files: HOME's (or --home's) .zread/ and the project's; version reads none.
    if args.files and args.command != "version":
        from simulator.hosts.files import FileStore
        from statecharts import load_chart

        home = args.home or environ.get("HOME") or None
        project = (args.project or os.getcwd()) if load_chart(args.command).uses_project else None
        store = FileStore(home, project)
    session = build_session(
        args.command,
        flags_of(args),
        scenario=scenario,
        seed=args.seed,
        speed=args.speed,
        home=store,
    )
    session.secrets.add(scenario.world.config.llm_api_key)  # the scenario's, under config.yaml's
    runner = ProcessRunner(
        session,
        stdin,
        stdout,
        effects=EffectHost(home=store),
        frame=args.frame,
        control=args.control,
        journal=journal,
        lateness_file=environ.get(LATENESS_FILE, ""),
        secrets=session.secrets,
    )
    if journal is not None:
        journal.secrets = session.secrets
        journal.start(args.invocation, os.getcwd(), args.command)
    return runner.run()


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
    try:
        args = _parsed_arguments(topic, name, argv)
    except _HelpRequested as help_requested:
        _release_signals()
        return write(_help_text(help_requested.topic, name))
    args.command = topic
    args.program, args.invocation = name, [name, *argv]  # what the journal says
    if topic in ("", "help", "scenarios", "install", "journal") or not args.stdio:
        _release_signals()  # no session: the signals act as on any program
    if not topic:
        if not args.version:
            return write(_help_text("", name))
        _apply_environment(args, environ)
        if name != ZREAD:  # the tool's own version, and the zread it plays
            return write(_tool_version_line(args, name))
        return write(_version_line(args, with_platform=False))
    if topic == "help":
        if args.about and args.about not in _topics(name):
            raise UsageError(f'unknown help topic "{args.about}" (see: {name} --help)')
        return write(_help_text(args.about, name))
    if topic == "scenarios":
        return _scenarios(args, out)
    if topic == "install":
        return _install(args, out)
    if topic == "journal":
        from simulator.tools.journal import report

        return report(args.file, out)
    _apply_environment(args, environ)
    if not args.stdio:
        if topic == "version":
            return write(_version_line(args, with_platform=True))
        err.write(
            f"{name}: the simulator stands in for zread's machine-readable mode only; "
            f"run: {name} {topic} --stdio\n"
        )
        return ExitCode.USAGE
    return _run(args, stdin or _standard_input(), out, environ)


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
    if name != ZREAD and argv[:1] and argv[0] in ("load", "record", "check", *_TOOLS):
        _release_signals()  # a tool acts on signals as any program does
    if argv[:1] == ["load"] and name != ZREAD:
        from simulator.tools.load import main as load_main

        return load_main(argv[1:])
    if argv[:1] in (["record"], ["check"]) and name != ZREAD:
        from simulator.tools.record import main as record_main

        return record_main(argv)
    if argv and argv[0] in _TOOLS and name != ZREAD:
        import importlib

        tool_main: Any = importlib.import_module(_TOOLS[argv[0]]).main
        return int(tool_main(argv[1:]))
    if environment.get("ZREAD_SIM_RECORD"):  # the drop-in recorder, around ZREAD_SIM_REAL
        mode = environment.get("ZREAD_SIM_RECORD_MODE", "once")
        cassette = environment["ZREAD_SIM_RECORD"]
        if mode not in RECORD_MODES:
            err.write(f"{name}: ZREAD_SIM_RECORD_MODE: {mode!r} is not one of none, once, all\n")
            return ExitCode.USAGE
        if mode == "none" or (mode == "once" and os.path.exists(cassette)):
            environment = {  # play the cassette back instead of running zread
                **{k: v for k, v in environment.items() if k != "ZREAD_SIM_RECORD"},
                "ZREAD_SIM_SCENARIO": f"replay:{cassette}",
            }
        else:
            from simulator.tools.record import record_as_dropin

            _release_signals()  # the real zread recorded gets them as it would
            return record_as_dropin(argv, environment)
    try:
        return _dispatch(argv, name, stdin, stdout, err, environment)
    except ConfigurationError as error:  # the user's setup: one line, nothing changed
        err.write(f"{name}: {_one_line(str(error))}\n")
        return ExitCode(error.exit_code)
    except KeyboardInterrupt:
        return ExitCode.OK
    except BrokenPipeError:  # the reader went away: nothing left to say, and no one to say it to
        _silence_stdout()
        return ExitCode.OK
    except OSError as error:  # the environment's: a full disk, a stream that cannot be used
        where = f" ({error.filename})" if error.filename else ""
        err.write(f"{name}: {_one_line(f'{error.strerror or error}{where}')}\n")
        return ExitCode.USAGE
    except Exception as error:  # the simulator's own bug: one line, never a traceback
        err.write(f"{name}: internal error: {type(error).__name__}: {_one_line(str(error))}\n")
        if os.environ.get("ZREAD_SIM_DEBUG"):
            import traceback

            traceback.print_exc(file=err)
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
