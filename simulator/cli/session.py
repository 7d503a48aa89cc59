"""Running a zread command's session as the process: ``zread <command> --stdio``.

Owns: turning the parsed command line into a session (its scenario, its files in HOME
and the project, its journal) and handing it to the process runner
(:class:`~simulator.runners.stdio.ProcessRunner`), or a cassette to the replay runner
(``--scenario replay:CASSETTE``).

A session can also run in another program's process, on a thread, as if it were a
process of its own (``zread_popen``): :data:`IN_PROCESS` then says which pid the journal
names, the working directory, where stderr goes, and who is handed the runner (to
signal or kill it).

Must not: parse arguments or print help; it is given them parsed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

from simulator.cli.options import UsageError
from simulator.launch import build_session, flags_of

if TYPE_CHECKING:
    from simulator.hosts.journal import JournalWriter
    from simulator.runners.stdio import ProcessRunner
    from simulator.scenario import Scenario


class InProcess(NamedTuple):
    """A run on a thread of another program, standing in for a process of its own."""

    pid: int
    """The pid its journal records carry (none of a real process)."""
    cwd: str
    """Its working directory: the project by default, relative paths start there."""
    stderr_fd: int
    started: Callable[[ProcessRunner], None]
    """Handed the runner before it runs (its ``terminate`` and ``kill`` are the signals)."""


IN_PROCESS: ContextVar[InProcess | None] = ContextVar("zread_sim_in_process", default=None)
"""Set on the thread that runs a session in-process; None (a process) everywhere else."""


def run(
    args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO, environ: Mapping[str, str]
) -> int:
    from simulator.scenario import load_scenario

    hosted = IN_PROCESS.get()
    if hosted is not None:  # relative paths start from the run's own directory
        _rooted(args, hosted.cwd)
    if args.scenario.startswith("replay:"):  # a cassette played back (simulator.tools.replay)
        return _replay(args, stdin, stdout)
    if args.control:  # a bad address is refused before anything is read or written
        from simulator.runners.controlled import parse_address

        parse_address(args.control)
    # A bad scenario reads and writes no file.
    scenario = load_scenario(args.scenario, base=None if hosted is None else hosted.cwd)
    places = _places(args, environ)  # checked before anything is written, the journal too
    if not args.journal:
        return _session(args, scenario, stdin, stdout, environ, None, places)
    from simulator.hosts.journal import JournalWriter
    from simulator.runners.stdio import write_line

    def warn(line: str) -> None:  # on the process's stderr, where the runner writes
        write_line(2 if hosted is None else hosted.stderr_fd, f"{args.program}: {line}")

    # Opened before anything else is done: a path it cannot append to is exit 2.
    journal = JournalWriter.open(
        args.journal, warn=warn, pid=None if hosted is None else hosted.pid
    )
    try:
        return _session(args, scenario, stdin, stdout, environ, journal, places)
    finally:
        journal.close()


def _places(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """zread's folders for the run, (HOME, project: "" when the command has none),
    each checked as the command needs it (:func:`~simulator.hosts.places.check_places`);
    None: no files (``--no-files``, or ``version``, which reads none)."""
    if not args.files or args.command == "version":
        return None
    from pathlib import Path

    from simulator.hosts.places import check_places
    from statecharts import load_chart

    hosted = IN_PROCESS.get()
    chart = load_chart(args.command)
    home = args.home or environ.get("HOME") or ""
    project = (
        (args.project or (os.getcwd() if hosted is None else hosted.cwd))
        if chart.uses_project
        else ""
    )
    check_places(
        Path(home) if home else None,
        Path(project) if project else None,
        chart.writes,
        home_named=bool(args.home),
    )
    return home, project


def _rooted(args: argparse.Namespace, cwd: str) -> None:
    """A run in-process: each relative path it was given (but the scenario's, which
    :func:`load_scenario` reads from ``cwd`` itself) is made to start from ``cwd``,
    its own working directory, not the hosting process's."""
    for option in ("home", "project", "journal"):
        if getattr(args, option):
            setattr(args, option, os.path.join(cwd, getattr(args, option)))
    for option, prefix in (("scenario", "replay:"), ("control", "unix:")):
        value = getattr(args, option) or ""
        if value.startswith(prefix) and len(value) > len(prefix):
            setattr(args, option, prefix + os.path.join(cwd, value[len(prefix) :]))


def _replay(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> int:
    from simulator.tools.replay import cassette_of, run_replay

    for option, flag in (("control", "--control"), ("journal", "--journal")):
        if getattr(args, option):
            raise UsageError(f"{flag} cannot be used with --scenario replay:CASSETTE")
    path = cassette_of(args.scenario) or ""
    return run_replay(path, stdin, stdout, speed=args.speed, frame=args.frame, program=args.program)


def _session(
    args: argparse.Namespace,
    scenario: Scenario,
    stdin: BinaryIO,
    stdout: BinaryIO,
    environ: Mapping[str, str],
    journal: JournalWriter | None,
    places: tuple[str, str] | None,
) -> int:
    from simulator.hosts.effects import EffectHost
    from simulator.runners.stdio import LATENESS_FILE, ProcessRunner

    hosted = IN_PROCESS.get()
    cwd = os.getcwd() if hosted is None else hosted.cwd
    store = None
    if places is not None:  # zread's files: HOME's (or --home's) .zread/ and the project's
        from simulator.hosts.files import FileStore

        home, project = places
        store = FileStore(home or None, project or None)
    session = build_session(
        args.command,
        flags_of(args.command, args),
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
        scenario=scenario,
        seed=args.seed,
        effects=EffectHost.for_scenario(scenario, seed=args.seed, home=store),
        frame=args.frame,
        control=args.control,
        journal=journal,
        lateness_file=environ.get(LATENESS_FILE, ""),
        secrets=session.secrets,
        stderr_fd=2 if hosted is None else hosted.stderr_fd,
        quit_at_eof=args.eof == "quit",
    )
    if hosted is not None:
        hosted.started(runner)
    if journal is not None:
        journal.secrets = session.secrets
        journal.start(args.invocation, cwd, args.command)
    return runner.run()
