"""Running a zread command's session as the process: ``zread <command> --stdio``.

Owns: turning the parsed command line into a session (its scenario, its files in HOME
and the project, its journal) and handing it to the process runner
(:class:`~simulator.runners.stdio.ProcessRunner`), or a cassette to the replay runner
(``--scenario replay:CASSETTE``).

Must not: parse arguments or print help; it is given them parsed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, BinaryIO

from simulator.cli.options import UsageError
from simulator.launch import build_session, flags_of

if TYPE_CHECKING:
    from simulator.hosts.journal import JournalWriter
    from simulator.scenario import Scenario


def run(
    args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO, environ: Mapping[str, str]
) -> int:
    from simulator.scenario import load_scenario

    if args.scenario.startswith("replay:"):  # a cassette played back (simulator.tools.replay)
        return _replay(args, stdin, stdout)
    scenario = load_scenario(args.scenario)  # a bad scenario reads and writes no file
    if not args.journal:
        return _session(args, scenario, stdin, stdout, environ, None)
    from simulator.hosts.journal import JournalWriter
    from simulator.runners.stdio import write_line

    def warn(line: str) -> None:  # on the process's stderr, where the runner writes
        write_line(2, f"{args.program}: {line}")

    # Opened before anything else is done: a path it cannot append to is exit 2.
    journal = JournalWriter.open(args.journal, warn=warn)
    try:
        return _session(args, scenario, stdin, stdout, environ, journal)
    finally:
        journal.close()


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
