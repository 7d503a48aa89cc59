"""``zread-sim journal --summary JOURNAL...``: the journals of every machine of a load
test, summed up.

Owns: :class:`Summary`, which reads journals one after the other (each within the
journal's bound, :func:`simulator.tools.journal.stream_lines`), record by record, and
keeps only figures and the processes still open, each cut to what its outcome needs
(its start, its last event): a process is folded into the figures at its ``exit``
record, one that never wrote one at the end of its journal (or at the next ``start`` of
its pid). So a 256 MiB journal costs its figures, not its records. A record a pid writes
after its ``exit`` is not its process's any more: an ``http_fault`` record (the wiki
server's thread may write one then) is not counted anyway, and any other one (the
writer writes none) starts a process of its own, without a start. And what it prints
(:meth:`Summary.lines`, every name from a journal with its control characters escaped,
:func:`simulator.tools.journal.printable`) and writes as JSON (:meth:`Summary.as_json`):

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

from simulator.hosts.journal import Cover, Event, Exit, HttpFaultMet, Line, Record, Start
from simulator.tools.journal import (
    JournalReadError,
    Process,
    decode_line,
    printable,
    records,
    refusal,
    say,
    stream_lines,
    violations,
)

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
                return bool(decode_line(record.line)["error"])
            except (KeyError, TypeError):
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
    """The figures of every journal added (:meth:`add`), none of their records: see the
    module docstring."""

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
        still_open: dict[int, Process] = {}
        for record in records(stream_lines(path, torn=say), f"journal {path}"):
            self._fold(record, still_open)
        self.journals.append(path)
        for process in still_open.values():
            self.add_process(process)

    def _fold(self, record: Record, still_open: dict[int, Process]) -> None:
        """Count ``record`` now, or keep what its process's outcome needs of it."""
        if isinstance(record, HttpFaultMet | Cover):
            return  # neither is counted
        process = still_open.get(record.pid)
        if process is None or isinstance(record, Start):
            if process is not None:  # its pid's next process: it never exited
                self.add_process(process)
            process = still_open[record.pid] = Process(record.pid)
        if isinstance(record, Start):
            process.start = record
        elif isinstance(record, Line):
            if record.error:
                self.mistakes[refusal(record)] += 1
        elif isinstance(record, Event):
            process.records = [record]  # its outcome needs its last event only
        elif isinstance(record, Exit):
            process.records.append(record)
            self.add_process(still_open.pop(record.pid))
        else:  # a timer record
            self._late.append(record.late)

    def add_process(self, process: Process) -> None:
        """Count ``process``, a whole one (or one cut as :meth:`add` cuts them)."""
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
        shown = {command: printable(command) for command in self.sessions}
        width = max([len("command"), len("all"), *map(len, shown.values())])
        head = f"  {'command':<{width}}  {'sessions':>8}" + "".join(f"  {o:>7}" for o in OUTCOMES)
        lines.append(head)
        for command in sorted(self.sessions):
            counts = self.outcomes[command]
            row = "".join(f"  {counts[o]:>7}" for o in OUTCOMES)
            lines.append(f"  {shown[command]:<{width}}  {self.sessions[command]:>8}{row}")
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
    counted = counter.most_common()
    return ", ".join(f"{printable(name)} {count}" for name, count in counted) or "none"


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
