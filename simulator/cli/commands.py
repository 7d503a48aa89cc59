"""``zread-sim``'s own commands: a table, each command with its help beside what it does.

Owns: :data:`SUBCOMMANDS`, every command ``zread-sim`` has and ``zread`` does not, as a
:class:`Subcommand`: its summary (the line ``zread-sim --help`` lists), and either what
it does here (``scenarios``, ``install``, ``journal``: its help text, usage, arguments
and run function) or the tool module whose ``main(argv)`` runs it and prints its own
help (``load``, ``record``, ``check``, ``coverage``, ``paths``, ``charts``,
``schema``). zread's own commands are not here: each is its module under
``statecharts/`` (``SUMMARY``, ``HELP``, its flags).

Must not: parse the command line or catch errors; ``simulator.cli.program`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
from collections.abc import Callable
from typing import BinaryIO

from simulator.cli.options import UsageError, baked


class Subcommand:
    """One of ``zread-sim``'s own commands (a plain class: ``dataclasses`` would cost
    every start-up its import).

    ``help``: what its help says before the usage (a tool's help is its module's own);
    ``usage``: its usage after the program's name, where it takes more than flags;
    ``arguments`` adds its arguments to its parser, ``run`` does it; ``tool``: the
    module whose ``main(argv)`` runs it instead, given the words after its name (with
    its name too when ``with_name``: ``record`` and ``check`` share one);
    ``bakes_options``: it takes the simulator options (``install`` writes them into a
    script).
    """

    __slots__ = (
        "arguments",
        "bakes_options",
        "help",
        "run",
        "summary",
        "tool",
        "usage",
        "with_name",
    )

    def __init__(
        self,
        summary: str,
        *,
        help: str = "",
        usage: str = "",
        arguments: Callable[[argparse.ArgumentParser], None] | None = None,
        run: Callable[[argparse.Namespace, BinaryIO], int] | None = None,
        tool: str = "",
        with_name: bool = False,
        bakes_options: bool = False,
    ) -> None:
        self.summary, self.help, self.usage = summary, help, usage
        self.arguments, self.run = arguments, run
        self.tool, self.with_name, self.bakes_options = tool, with_name, bakes_options


def run_tool(command: str, argv: list[str]) -> int:
    """Run the tool behind ``command`` with ``argv`` (the words after its name)."""
    spec = SUBCOMMANDS[command]
    main: Callable[[list[str]], int] = importlib.import_module(spec.tool).main
    return int(main([command, *argv] if spec.with_name else argv))


def tool_help(command: str) -> str:
    """What ``zread-sim <command> --help`` prints for a tool: its parser's own help."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        run_tool(command, ["--help"])
    return text.getvalue()


# -- scenarios ------------------------------------------------------------------------------


def _scenario_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("list", "show"), default="list")
    parser.add_argument("name", nargs="?", help="the scenario to show as TOML")


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
    return 0


# -- install --------------------------------------------------------------------------------


def _install_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="the folder to write zread in")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="start a warm server of your own at the first run, which serves every later "
        "one and ends by itself (docs/serve.md)",
    )
    parser.add_argument(
        "--warm-idle",
        metavar="SECONDS",
        type=_idle_seconds,
        help="with --warm: the server ends once no run came for SECONDS (default: 60)",
    )


def _idle_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _install(args: argparse.Namespace, out: BinaryIO) -> int:
    from pathlib import Path

    from simulator.hosts.executable import write_zread_executable
    from simulator.launcher import VARIABLE

    variables = baked(args)
    warm = getattr(args, "warm", False)
    idle = getattr(args, "warm_idle", None)
    if idle is not None and not warm:
        raise UsageError("install: --warm-idle needs --warm")
    if warm:  # its own server, found or started at each run
        from simulator.warmlaunch import DEFAULT_IDLE
        from simulator.warmlaunch import VARIABLE as WARM

        variables[WARM] = format(DEFAULT_IDLE if idle is None else idle, "g")
    elif os.environ.get(VARIABLE):  # a warm server runs: the script hands its runs to it
        variables.setdefault(VARIABLE, os.environ[VARIABLE])
    folder = Path(args.dir).absolute()
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        script = write_zread_executable(folder, variables)
    except OSError as error:
        raise UsageError(f"install: {folder}: {error.strerror or error}") from None
    if made:  # said on stderr: stdout is the script's path alone, for a script to take
        sys.stderr.write(f"zread-sim install: created the folder {folder}\n")
        sys.stderr.flush()
    out.write(f"{script}\n".encode())
    out.flush()
    return 0


# -- journal --------------------------------------------------------------------------------


def _journal_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="the journals to read")
    parser.add_argument(
        "--summary",
        action="store_true",
        help="sum up every journal given: sessions, outcomes, lateness",
    )
    parser.add_argument("--json", metavar="FILE", help="with --summary: also write it as JSON")


def _journal(args: argparse.Namespace, out: BinaryIO) -> int:
    if args.summary:
        from simulator.tools.journal_summary import summarize

        return summarize(args.files, out, json_path=args.json or "")
    from simulator.tools.journal import run

    return run(args.files, out, json_path=args.json or "")


def _one(name: str, help: str) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(name, help=help)

    return arguments


def _tool(summary: str, module: str, *, with_name: bool = False) -> Subcommand:
    return Subcommand(summary, tool=module, with_name=with_name)


SUBCOMMANDS: dict[str, Subcommand] = {
    "install": Subcommand(
        "Write a zread executable with simulator options baked in",
        help="Write an executable DIR/zread that runs this simulator with the options given\n"
        "here baked in as defaults: a ZREAD_SIM_* variable set when it runs overrides a baked\n"
        "option, and a flag on its command line overrides both. It needs no variable, so a\n"
        "client that strips its child's environment is steered anyway. With --warm, its first\n"
        "run starts a warm server of your own (a private folder, a socket only you can\n"
        "reach), which serves the runs after it and ends by itself once idle or once the\n"
        "installed package changes.",
        usage="install DIR",
        arguments=_install_arguments,
        run=_install,
        bakes_options=True,
    ),
    "journal": Subcommand(
        "Print a --journal file; exit 1 when it holds the client's mistakes",
        help="Print a file written by --journal (ZREAD_SIM_JOURNAL), one line per entry,\n"
        "grouped per process, and each mistake of the client: a line out of turn, bad JSON\n"
        "or params, an internal (_) command, anything after done, a client gone before it\n"
        "read done, a process ended by a signal instead of quit. With --summary, the\n"
        "journals of every machine summed up instead: sessions per command, outcomes (done,\n"
        "failed, quit, killed), exit codes, session time and timer lateness (p50, p90, p99,\n"
        "max). Exits 1 when there is a mistake, 0 when there is none, 2 when a file cannot\n"
        "be read.",
        usage="journal FILE...",
        arguments=_journal_arguments,
        run=_journal,
    ),
    "load": _tool(
        "Run many sessions at once and measure (see: load --help)", "simulator.tools.load"
    ),
    "record": _tool(
        "Record a zread run into a cassette, checking both sides (see: record --help)",
        "simulator.tools.record",
        with_name=True,
    ),
    "check": _tool(
        "Check a cassette against the charts (see: check --help)",
        "simulator.tools.record",
        with_name=True,
    ),
    "coverage": _tool(
        "Which states, transitions and gates journaled runs reached (see: coverage --help)",
        "simulator.tools.coverage",
    ),
    "paths": _tool(
        "Test cases that together take every transition of a chart (see: paths --help)",
        "simulator.tools.paths",
    ),
    "charts": _tool(
        "Draw a chart as a mermaid or Graphviz diagram (see: charts --help)",
        "simulator.tools.charts",
    ),
    "schema": _tool(
        "Print the JSON Schema of events, commands or scenarios (see: schema --help)",
        "simulator.tools.schema",
    ),
    "serve": _tool(
        "Serve zread launches from one warm process (see: serve --help)",
        "simulator.servecommand",
    ),
    "scenarios": Subcommand(
        "List the built-in scenarios, or show one",
        help="List the built-in scenarios, or show one as TOML.",
        usage="scenarios [list|show NAME]",
        arguments=_scenario_arguments,
        run=_scenarios,
    ),
}
"""``zread-sim``'s own commands, which ``zread`` does not have, in help order."""
