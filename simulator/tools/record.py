"""``zread-sim record`` and ``zread-sim check``: the command line of recording a run
into a cassette and checking a cassette against the charts.

Owns: :func:`main` (argparse: ``record --out FILE [--redact PATTERN]... [--command C]
-- PROGRAM ...`` and ``check CASSETTE [--command C]``; the exit codes) and
:func:`record_as_dropin`, what the command line calls when ``ZREAD_SIM_RECORD`` and
``ZREAD_SIM_REAL`` are set. The work is the modules':

- :mod:`simulator.tools.proxy`: the recorder between the client and the program;
- :mod:`simulator.tools.cassette`: the cassette's format, writing, reading and
  redaction;
- :mod:`simulator.tools.conformance`: the check against the charts, and its report.

Must not: record, redact or check anything itself; write anywhere but the cassette path
the user gave (the report goes to stderr when recording, never to stdout, which is the
client's); let a traceback reach a user (bad input is one line on stderr and exit 2;
the tool's own bug one line and exit 70).
Must not be imported by the core, scenarios, runners or hosts.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from simulator.tools.arguments import raising
from simulator.tools.cassette import RecordError, read_cassette
from simulator.tools.conformance import check_cassette, report
from simulator.tools.proxy import record
from statecharts import COMMANDS

PROG: Final = "zread-sim"
RECORD_VAR: Final = "ZREAD_SIM_RECORD"
REAL_VAR: Final = "ZREAD_SIM_REAL"


def record_as_dropin(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """The command line's drop-in recording: ``ZREAD_SIM_REAL argv...`` recorded into
    ``ZREAD_SIM_RECORD``; both variables are kept from the program (so a real binary that
    is itself a simulator does not record again). ``argv`` is zread's arguments, without
    the program name. Returns the exit code; the report is on stderr."""
    out, real = environ.get(RECORD_VAR, ""), environ.get(REAL_VAR, "")
    try:
        if not out:
            raise RecordError(f"{RECORD_VAR} is not set: no cassette to write")
        if not real:
            raise RecordError(f"{RECORD_VAR} is set but {REAL_VAR} does not name the real zread")
        env = {k: v for k, v in environ.items() if k not in (RECORD_VAR, REAL_VAR)}
        done = record([real, *argv], Path(out), environ=env)
    except RecordError as exc:
        _say(f"{PROG} record: {exc}")
        return 2
    _say("\n".join(done.report))
    return done.exit_code


# -- the command line ---------------------------------------------------------------------


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _parser() -> argparse.ArgumentParser:
    parser = raising(RecordError)(
        prog=PROG, description="Record a zread --stdio run; check a cassette."
    )
    sub = parser.add_subparsers(dest="tool", required=True, parser_class=raising(RecordError))
    rec = sub.add_parser(
        "record",
        help="run a program between the client and it, writing a cassette",
        description="Pass stdin, stdout and stderr through to PROGRAM unchanged; write every "
        "line each way, redacted, to a cassette; check both sides against the charts "
        "(report on stderr). Exits with the program's exit code.",
    )
    rec.add_argument("--out", required=True, type=Path, help="the cassette to write")
    rec.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a regular expression whose matches are replaced (repeatable)",
    )
    rec.add_argument("--command", choices=sorted(COMMANDS), help="the chart to check against")
    rec.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    chk = sub.add_parser(
        "check",
        help="check a cassette against the charts",
        description="Exit 0 when both sides follow the charts, 1 on deviations, 2 when the "
        "cassette cannot be read.",
    )
    chk.add_argument("cassette", type=Path)
    chk.add_argument("--command", choices=sorted(COMMANDS), help="the chart to check against")
    return parser


def _record(args: argparse.Namespace) -> int:
    """``record``: the program's exit code; the report on stderr."""
    program = list(args.program)
    if program[:1] == ["--"]:
        program = program[1:]
    done = record(program, args.out, patterns=args.redact, command=args.command)
    _say("\n".join(done.report))
    return done.exit_code


def _check(args: argparse.Namespace) -> int:
    """``check``: 0 clean, 1 on deviations; the report on stdout."""
    cassette = read_cassette(args.cassette)
    checker = check_cassette(cassette, args.command)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write("\n".join(report(checker, cassette)) + "\n")
        sys.stdout.flush()
    return 0 if checker.clean else 1


def main(argv: list[str]) -> int:
    """``record --out FILE [--redact PATTERN]... -- PROGRAM ...`` or ``check CASSETTE``."""
    tool = argv[0] if argv and argv[0] in ("record", "check") else ""
    try:
        args = _parser().parse_args(argv)
    except RecordError as exc:
        _say(f"{PROG} {tool}".rstrip() + f": {exc}")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return _record(args) if args.tool == "record" else _check(args)
    except RecordError as exc:
        _say(f"{PROG} {args.tool}: {exc}")
        return 2
    except Exception as exc:  # the tool's own bug: one line, as the command line does
        _say(f"{PROG} {args.tool}: internal error: {type(exc).__name__}: {exc}")
        return 70


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
