"""``zread-sim journal --summary JOURNAL...``: the journals of every machine of a load
test, summed up.

Owns: :class:`Summary`, which reads journals one after the other (each within the
journal's bound, :func:`simulator.tools.journal.read`) and keeps only figures, and what
it prints (:meth:`Summary.lines`) and writes as JSON (:meth:`Summary.as_json`):

- sessions: one per process (a process of one file is not one of another, whatever
  their pids), counted per command (its ``start`` record's);
- outcomes, per command (:func:`outcome`): ``done`` (ended by itself, its last event
  without an error), ``failed`` (ended by itself in an ``error`` state or with an
  error, or an ``exit`` fault, a non-zero exit code, the simulator's own abort),
  ``quit`` (the client's ``quit``, a control peer's, a signal taken as one, or a reader
  gone before done), ``killed`` (no ``exit`` record: SIGKILL, a crash, still running; or
  a ``hang`` fault); then how each process ended (the ``exit`` records' ``how``) and its
  exit code;
- session seconds (the ``exit`` record's ``t``) and timer lateness (the ``timer``
  records' ``late``), as p50, p90, p99 and max in milliseconds (nearest rank);
- the client's mistakes (:func:`simulator.tools.journal.violations`), counted by kind:
  ``zread-sim journal FILE`` lists them.

Must not: write anything but to the stream (and the JSON file) it is given; journals are
only read.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any, BinaryIO, Final

import msgspec

from simulator.hosts.journal import Event
from simulator.tools.journal import JournalReadError, Process, read, violations

OUTCOMES: Final = ("done", "failed", "quit", "killed")
"""The outcomes of a session, in the order the summary shows them."""

_QUIT: Final = frozenset(
    {"quit", "control-quit", "signal", "stdin-closed-left-waiting", "eof-quit"}
)
_QUIT_OR_GONE: Final = _QUIT | {"reader-gone"}

PERCENTILES: Final = (50, 90, 99)


def _last_event_failed(process: Process) -> bool:
    """Its last event shows the ``error`` state, or carries an error."""
    for record in reversed(process.records):
        if isinstance(record, Event):
            if record.state == "error":
                return True
            try:
                return bool(msgspec.json.decode(record.line)["error"])
            except (msgspec.DecodeError, KeyError, TypeError):
                return False
    return False


def outcome(process: Process) -> str:
    """``done``, ``failed``, ``quit`` or ``killed``: see the module docstring."""
    end = process.exit
    if end is None or end.how == "hang":
        return "killed"
    if end.how in _QUIT_OR_GONE:
        return "quit"
    if end.how == "done" and end.code == 0 and not _last_event_failed(process):
        return "done"
    return "failed"


def percentiles(values: Iterable[float]) -> dict[str, float] | None:
    """``{"p50", "p90", "p99", "max"}`` of ``values`` in milliseconds (nearest rank), and
    ``count``; None when there is none."""
    ordered = sorted(values)
    if not ordered:
        return None
    count = len(ordered)
    figures = {f"p{p}": ordered[max(math.ceil(p / 100 * count), 1) - 1] * 1000 for p in PERCENTILES}
    return {**figures, "max": ordered[-1] * 1000, "count": count}


class Summary:
    """The figures of every journal added (:meth:`add`), none of their records."""

    def __init__(self) -> None:
        self.journals: list[str] = []
        self.sessions: Counter[str] = Counter()
        self.outcomes: dict[str, Counter[str]] = {}
        self.hows: Counter[str] = Counter()
        self.codes: Counter[str] = Counter()
        self.mistakes: Counter[str] = Counter()
        self._late = array("d")
        self._seconds = array("d")

    def add(self, path: str) -> None:
        """Read the journal at ``path`` and count its processes; JournalReadError (exit
        2) when it cannot be read."""
        processes = read(path)
        self.journals.append(path)
        for process in processes:
            self.add_process(process)

    def add_process(self, process: Process) -> None:
        command = process.start.command if process.start is not None else "(no start)"
        self.sessions[command] += 1
        self.outcomes.setdefault(command, Counter())[outcome(process)] += 1
        end = process.exit
        self.hows[end.how if end is not None else "no exit record"] += 1
        code = "none" if end is None or end.code is None else str(end.code)
        self.codes[code] += 1
        if end is not None:
            self._seconds.append(end.t)
        self._late.extend(process.late)
        self.mistakes.update(found.kind for found in violations(process))

    @property
    def lateness(self) -> dict[str, float] | None:
        """Percentiles of how late the timers fired, in ms (None: no timer record)."""
        return percentiles(self._late)

    @property
    def session_time(self) -> dict[str, float] | None:
        """Percentiles of the sessions' lengths, in ms (None: none ended)."""
        return percentiles(self._seconds)

    def total(self, outcome_: str) -> int:
        return sum(counts[outcome_] for counts in self.outcomes.values())

    def lines(self) -> list[str]:
        """What ``zread-sim journal --summary`` prints."""
        count, files = sum(self.sessions.values()), len(self.journals)
        lines = [f"{count} session{_s(count)} in {files} journal{_s(files)}", ""]
        width = max([len("command"), len("all"), *map(len, self.sessions)])
        head = f"  {'command':<{width}}  {'sessions':>8}" + "".join(f"  {o:>7}" for o in OUTCOMES)
        lines.append(head)
        for command in sorted(self.sessions):
            counts = self.outcomes[command]
            row = "".join(f"  {counts[o]:>7}" for o in OUTCOMES)
            lines.append(f"  {command:<{width}}  {self.sessions[command]:>8}{row}")
        if len(self.sessions) > 1:
            row = "".join(f"  {self.total(o):>7}" for o in OUTCOMES)
            lines.append(f"  {'all':<{width}}  {count:>8}{row}")
        lines += ["", "ended: " + _counted(self.hows), "exit codes: " + _counted(self.codes)]
        lines.append("session time: " + _figures(self.session_time))
        lines.append("timer lateness: " + _figures(self.lateness))
        if self.mistakes:
            total = sum(self.mistakes.values())
            lines.append(
                f"client mistakes ({total}): {_counted(self.mistakes)} "
                "(zread-sim journal FILE lists them)"
            )
        else:
            lines.append("client mistakes: none")
        return lines

    def as_json(self) -> dict[str, Any]:
        """The summary as data (``--json FILE``)."""
        return {
            "journals": list(self.journals),
            "sessions": sum(self.sessions.values()),
            "commands": [
                {
                    "command": command,
                    "sessions": self.sessions[command],
                    **{o: self.outcomes[command][o] for o in OUTCOMES},
                }
                for command in sorted(self.sessions)
            ],
            "outcomes": {o: self.total(o) for o in OUTCOMES},
            "ended": dict(self.hows.most_common()),
            "exit_codes": dict(self.codes.most_common()),
            "session_ms": self.session_time,
            "lateness_ms": self.lateness,
            "mistakes": dict(self.mistakes.most_common()),
        }


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _counted(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counter.most_common()) or "none"


def _figures(figures: dict[str, float] | None) -> str:
    if figures is None:
        return "none recorded"
    shown = ", ".join(f"{name} {figures[name]:.1f} ms" for name in ("p50", "p90", "p99", "max"))
    return f"{shown} (of {int(figures['count'])})"


def summarize(files: list[str], out: BinaryIO, *, json_path: str = "") -> int:
    """``zread-sim journal --summary FILE...``: the summary of ``files`` on ``out``,
    also written as JSON to ``json_path`` when given; 1 when the journals hold the
    client's mistakes, else 0; JournalReadError (exit 2) for a file that cannot be read
    or written."""
    totals = Summary()
    for path in files:
        totals.add(path)
    if json_path:
        try:
            with open(json_path, "wb") as file:
                file.write(msgspec.json.format(msgspec.json.encode(totals.as_json())) + b"\n")
        except OSError as err:
            raise JournalReadError(f"journal: {json_path}: {err.strerror or err}") from None
    out.write(("\n".join(totals.lines()) + "\n").encode("utf-8", "backslashreplace"))
    out.flush()
    return 1 if totals.mistakes else 0
