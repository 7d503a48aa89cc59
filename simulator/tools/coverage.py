"""Coverage of the charts by a client's tests: what its sessions reached, against all
there is.

Owns: :class:`Coverage`, which gathers what sessions reached
(:class:`~simulator.core.coverage.Reached`: in-process sessions, and the ``cover``
records of journals), and reports it per command against the totals of the chart:
states entered, transitions taken, gates answered (a command sent in a state that waits
for it, ``quit`` included), failure points met and transport faults met; then what was
never reached, in words. ``pytest --zread-coverage`` (:mod:`simulator.pytest_plugin`)
and ``zread-sim coverage JOURNAL...`` print the same table.

The percentage a run can be held to (``--fail-under``) is of transitions, over the
commands the tests ran: a client that never starts ``login`` is not marked down for
login's transitions (its table row says ``not run``).

Must not: run sessions or write anything but the report it is asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from typing import Any

from simulator.core.coverage import Reached
from simulator.errors import ConfigurationError
from simulator.tools.arguments import raising
from statecharts import COMMANDS, load_chart

PROG = "zread-sim coverage"


class CoverageError(ConfigurationError):
    """A journal or a coverage report that cannot be read: one line, exit 2."""


@dataclass(frozen=True)
class CommandCoverage:
    """One command's figures: each ``(reached, total)``, and what was never reached."""

    command: str
    sessions: int
    states: tuple[int, int]
    transitions: tuple[int, int]
    gates: tuple[int, int]
    failures: tuple[int, int]
    faults: tuple[str, ...]
    """The kinds of transport faults met (processes only)."""
    never: tuple[str, ...]
    """What was never reached, one phrase each, in chart order."""

    def as_json(self) -> dict[str, Any]:
        def pair(value: tuple[int, int]) -> dict[str, int]:
            return {"reached": value[0], "total": value[1]}

        return {
            "command": self.command,
            "sessions": self.sessions,
            "states": pair(self.states),
            "transitions": pair(self.transitions),
            "gates": pair(self.gates),
            "failures": pair(self.failures),
            "faults": list(self.faults),
            "never": list(self.never),
        }


def _percent(value: tuple[int, int]) -> str:
    reached, total = value
    return f"{reached}/{total} {100 * reached / total:.0f}%" if total else "-"


class Coverage:
    """What sessions reached, command by command; see the module docstring."""

    def __init__(self) -> None:
        self._reached: dict[str, Reached] = {}
        self._sessions: dict[str, int] = {}

    def add(self, reached: Reached, *, sessions: int = 1) -> None:
        """Count one session's (or ``sessions`` sessions', merged) reach."""
        if reached.command not in COMMANDS:
            raise CoverageError(f"{reached.command!r} is not a zread command")
        old = self._reached.get(reached.command)
        self._reached[reached.command] = reached if old is None else old | reached
        self._sessions[reached.command] = self._sessions.get(reached.command, 0) + sessions

    def add_journal(self, path: str) -> int:
        """Count every process of the journal at ``path`` that says what it reached;
        how many did."""
        from simulator.tools.journal import JournalReadError, read

        try:
            processes = read(path)
        except JournalReadError as err:
            raise CoverageError(str(err)) from None
        counted = 0
        for process in processes:
            if process.reached is not None:
                self.add(process.reached)
                counted += 1
        return counted

    def merge(self, other: Coverage) -> None:
        """Add everything ``other`` counted."""
        for command, reached in other._reached.items():
            self.add(reached, sessions=other._sessions[command])

    # -- the report ----------------------------------------------------------------

    def commands(self) -> list[CommandCoverage]:
        """The figures of every command the sessions ran, in zread's order."""
        return [self._of(command) for command in COMMANDS if command in self._reached]

    def percent(self) -> float:
        """Transitions taken, in percent of those of the commands run (0 for none)."""
        taken = total = 0
        for command in self.commands():
            taken += command.transitions[0]
            total += command.transitions[1]
        return 100.0 * taken / total if total else 0.0

    def table(self) -> list[str]:
        """The report as lines of text: one row per command, then what was never
        reached."""
        ran = self.commands()
        sessions = sum(self._sessions.values())
        lines = [
            f"zread coverage: {sessions} session{'s' if sessions != 1 else ''}; "
            f"transitions {self.percent():.1f}% of the commands run",
            f"{'command':<10} {'sessions':>8}  {'states':<12} {'transitions':<12} "
            f"{'gates':<12} {'failures':<12} faults",
        ]
        by_name = {c.command: c for c in ran}
        for command in COMMANDS:
            row = by_name.get(command)
            if row is None:
                lines.append(f"{command:<10} {'-':>8}  not run")
                continue
            lines.append(
                f"{command:<10} {row.sessions:>8}  {_percent(row.states):<12} "
                f"{_percent(row.transitions):<12} {_percent(row.gates):<12} "
                f"{_percent(row.failures):<12} {', '.join(row.faults) or '-'}"
            )
        for row in ran:
            if row.never:
                lines.append(f"{row.command}: never reached:")
                lines.extend(f"  {phrase}" for phrase in row.never)
        return lines

    def as_json(self) -> dict[str, Any]:
        """The report as data (``--zread-coverage-json``, ``--json``): the figures, and
        what was reached, which :meth:`from_json` reads back."""
        return {
            "percent": round(self.percent(), 2),
            "commands": [c.as_json() for c in self.commands()],
            "reached": [
                {**self._reached[c].as_json(), "sessions": self._sessions[c]}
                for c in COMMANDS
                if c in self._reached
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> Coverage:
        """A coverage from :meth:`as_json`'s data (its ``reached`` part)."""
        coverage = cls()
        try:
            for entry in data["reached"]:
                coverage.add(Reached.from_json(entry), sessions=int(entry.get("sessions", 1)))
        except (KeyError, TypeError, ValueError) as err:
            raise CoverageError(f"not a coverage report: {err}") from None
        return coverage

    def _of(self, command: str) -> CommandCoverage:
        chart = load_chart(command)
        reached = self._reached[command]
        states = list(chart.states)
        keys = [t.key for t in chart.transitions]
        gates = [f"{state}:{cmd}" for state, cmd in chart.gates]
        never = [f"state `{s}` never entered" for s in states if s not in reached.states]
        never += [
            f"transition `{t.key}` never taken"
            for t in chart.transitions
            if t.key not in reached.transitions
        ]
        for (state, cmd), key in zip(chart.gates, gates, strict=True):
            if key not in reached.gates:
                shown = chart.states[state].vm_state
                where = f"`{state}`" + (f" ({shown})" if shown != state else "")
                never.append(f"`{cmd}` never sent in {where}")
        never += [f"failure `{p}` never met" for p in chart.failures if p not in reached.failures]
        return CommandCoverage(
            command=command,
            sessions=self._sessions[command],
            states=(len(reached.states & set(states)), len(states)),
            transitions=(len(reached.transitions & set(keys)), len(keys)),
            gates=(len(reached.gates & set(gates)), len(gates)),
            failures=(len(reached.failures & set(chart.failures)), len(chart.failures)),
            faults=tuple(sorted(reached.faults)),
            never=tuple(never),
        )


def below(coverage: Coverage, fail_under: float | None) -> str:
    """The line that says the run is below ``fail_under`` percent, or ""."""
    if fail_under is None or coverage.percent() >= fail_under:
        return ""
    return (
        f"zread coverage: transitions {coverage.percent():.1f}% is below the "
        f"required {fail_under:g}%"
    )


def _parser() -> argparse.ArgumentParser:
    parser = raising(CoverageError)(
        prog=PROG,
        description="Which states, transitions and gates of zread's charts the journaled "
        "processes reached (journals: --journal or ZREAD_SIM_JOURNAL).",
    )
    parser.add_argument("journals", nargs="+", metavar="JOURNAL", help="journal files")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    parser.add_argument(
        "--fail-under",
        type=float,
        metavar="N",
        help="exit 1 when fewer than N percent of the transitions were taken",
    )
    return parser


def main(argv: list[str], out: Any = None) -> int:
    """``zread-sim coverage JOURNAL... [--json FILE] [--fail-under N]``: 0, or 1 below
    ``--fail-under``; 2 when a journal cannot be read."""
    out = out or sys.stdout
    try:
        args = _parser().parse_args(argv)
    except CoverageError as refused:
        sys.stderr.write(f"{PROG}: {refused}\n")
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    coverage = Coverage()
    try:
        counted = sum(coverage.add_journal(path) for path in args.journals)
        if not counted:
            raise CoverageError(
                "no process in " + ", ".join(args.journals) + " says what it reached "
                "(no cover records)"
            )
        if args.json:
            write_json(coverage, args.json)
    except CoverageError as err:
        sys.stderr.write(f"{PROG}: {err}\n")
        return 2
    except OSError as err:  # only the report's write: a journal's errors are CoverageError
        sys.stderr.write(f"{PROG}: --json {args.json}: cannot write: {err.strerror or err}\n")
        return 2
    failed = below(coverage, args.fail_under)
    with contextlib.suppress(OSError, ValueError):
        out.write("\n".join([*coverage.table(), *([failed] if failed else [])]) + "\n")
        out.flush()
    return 1 if failed else 0


def write_json(coverage: Coverage, path: str) -> None:
    """Write :meth:`Coverage.as_json` to ``path``."""
    import json

    with open(path, "w", encoding="utf-8") as file:
        json.dump(coverage.as_json(), file, indent=2)
        file.write("\n")
