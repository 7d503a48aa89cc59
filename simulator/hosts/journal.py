"""The journal file: what ``--journal FILE`` (``ZREAD_SIM_JOURNAL``) appends, one JSON
line per thing that happened to the process.

Owns: the record format (:data:`Record`, one tagged struct per ``kind``; the reader,
:mod:`simulator.tools.journal`, decodes with the same structs) and
:class:`JournalWriter`, which appends them. Every record carries the ``pid`` of the
process that wrote it, so several processes can share one file:

- ``start``: ``pid``, ``argv`` (the program name and the arguments it parsed),
  ``cwd``, ``time`` (wall clock, ISO 8601 in UTC, milliseconds, ``Z``), ``command``;
- ``line``: one non-blank line the client sent, as the session journaled it
  (:meth:`~simulator.core.entries.JournalEntry.as_json`: ``t``, ``line``, ``state``,
  ``waiting_for``, ``after_done``, ``error``);
- ``event``: ``t`` and ``line``, one event the session produced, as it went to the
  output (before ``--frame`` framing and transport faults);
- ``cover``: ``t``, ``command``, and what of its chart the session reached since the
  previous ``cover`` record (:mod:`simulator.core.coverage`): ``states``,
  ``transitions``, ``gates``, ``failures`` and ``faults``, lists of names; written
  before the events that show it are written out, so a process killed later keeps it;
- ``timer``: ``t``, and ``late``: how many seconds after it was due, on the runner's
  clock, one timer of the session fired (the lateness a loaded machine adds);
- ``exit``: ``t``, ``code`` (null for a hang), ``how`` (:data:`HOWS`);
- ``http_fault``: ``t``, ``method``, ``path``, ``fault`` (its id, ``http-1``...) and
  ``fault_kind`` (``status``, ``delay``, ``dribble``, ``reset``,
  ``close_after_headers``): one request to browse's wiki server met an HTTP fault
  (written from the server's thread, when the fault is applied; it may come after
  the ``exit`` record of a run that ended while a request was under way).

``t`` is session seconds (since the first event, less the time spent paused). Lines
are text, bytes that are not UTF-8 as ``\\xNN`` escapes (``backslashreplace``). No API
key is written: everything a record says (lines, events, errors, argv, cwd, the stderr
line) goes through the writer's :attr:`JournalWriter.secrets`
(:mod:`simulator.core.secrets`), the session's own registry once the process has one,
so a key is hidden by name in any spelling and, once known (the world's, HOME's
``config.yaml``'s, one a line named), by value wherever it occurs.

The file is opened once, with ``O_APPEND``, and each record is written whole lines at a
time, so records of processes sharing the file never mix: one ``write`` a record, or,
while a runner works between two waits (:meth:`JournalWriter.hold`), one ``write`` for
all the records of that stretch, before it waits again (:meth:`JournalWriter.release`):
whenever the process waits, its journal is whole; a kill while it works loses what it
did since its last wait, as a process's own buffered writes would be lost. A write that fails
later (a full disk) is said once on stderr and journaling stops; the run goes on as it
would without a journal. A record the failure cut short is cut off the file again
(``ftruncate`` back to where it began), unless another process appended after it.

Must not: write anywhere but the journal file (and that one stderr line), or decide
anything about the session: the live session says what happened.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import msgspec

from simulator.core.coverage import Reached
from simulator.core.entries import JournalEntry
from simulator.core.secrets import Secrets
from simulator.errors import ConfigurationError
from simulator.hosts import limits
from simulator.regularfile import APPEND, NotRegularFile, open_regular


class JournalError(ConfigurationError):
    """The journal file cannot be opened for appending; the message says why."""


class Start(msgspec.Struct, tag_field="kind", tag="start", frozen=True):
    pid: int
    argv: list[str]
    cwd: str
    time: str
    command: str


class Line(msgspec.Struct, tag_field="kind", tag="line", frozen=True):
    pid: int
    t: float
    line: str
    state: str
    waiting_for: list[str]
    after_done: bool
    error: str


class Event(msgspec.Struct, tag_field="kind", tag="event", frozen=True):
    pid: int
    t: float
    line: str
    state: str = ""
    """The vm state the event shows (config's vm has no ``state`` field: ``editing``)."""


class Cover(msgspec.Struct, tag_field="kind", tag="cover", frozen=True, omit_defaults=True):
    pid: int
    t: float
    command: str
    states: list[str] = []
    transitions: list[str] = []
    gates: list[str] = []
    failures: list[str] = []
    faults: list[str] = []

    def reached(self) -> Reached:
        return Reached(
            self.command,
            frozenset(self.states),
            frozenset(self.transitions),
            frozenset(self.gates),
            frozenset(self.failures),
            frozenset(self.faults),
        )


class Timer(msgspec.Struct, tag_field="kind", tag="timer", frozen=True):
    pid: int
    t: float
    late: float


class Exit(msgspec.Struct, tag_field="kind", tag="exit", frozen=True):
    pid: int
    t: float
    code: int | None
    how: str


class HttpFaultMet(msgspec.Struct, tag_field="kind", tag="http_fault", frozen=True):
    pid: int
    t: float
    method: str
    path: str
    fault: str
    fault_kind: str


Record = Start | Line | Event | Cover | Timer | Exit | HttpFaultMet
"""One line of a journal file."""

HOWS: Final = {
    "done": "the session ended by itself, done:true written",
    "quit": "the client's quit, done:true written",
    "control-quit": "a control peer's quit, done:true written",
    "signal": "SIGTERM, SIGINT or SIGHUP, taken as quit: done:true written",
    "stdin-closed-left-waiting": "a signal, after stdin closed while zread waited for an "
    "answer nobody could give",
    "eof-quit": "stdin closed while zread waited for an answer, taken as quit (--eof quit): "
    "done:true written",
    "reader-gone": "stdout's reader went away before done:true was written",
    "fault-exit": "an exit transport fault",
    "hang": "a hang transport fault: it reads and writes nothing until killed",
    "aborted": "the run stopped before it was over: the simulator's own error",
}
"""What an ``exit`` record's ``how`` can say."""

_ENCODER: Final = msgspec.json.Encoder()


class JournalWriter:
    """Appends one process's records to a journal file; see the module docstring."""

    __slots__ = ("_fd", "_held", "_lock", "_warn", "exited", "path", "pid", "secrets")

    def __init__(
        self,
        fd: int,
        path: str,
        *,
        pid: int,
        warn: Callable[[str], None],
        secrets: Secrets | None = None,
    ) -> None:
        self._fd: int | None = fd
        self._held: list[bytes] | None = None
        """The records written since :meth:`hold`, not yet in the file."""
        self._lock = threading.Lock()
        """Held to write or close: ``http_fault`` records come from the server's thread."""
        self.path = path
        self.pid = pid
        self._warn = warn
        self.secrets = secrets or Secrets()
        """What every record is redacted with: set it to the session's
        (``Session.secrets``) before the first record."""
        self.exited = False
        """An ``exit`` record was written: there is none after it."""

    @classmethod
    def open(
        cls,
        path: str,
        *,
        warn: Callable[[str], None],
        pid: int | None = None,
        secrets: Secrets | None = None,
    ) -> JournalWriter:
        """Open ``path`` to append (created if missing, 0600: a journal holds what the
        client sent); JournalError if it cannot be, or is not a regular file (a FIFO, a
        device: refused at once). ``warn`` is given
        the one line to say when a later write fails."""
        try:  # a FIFO or a device is refused at once, never waited on
            fd = open_regular(path, f"journal {path}", APPEND)
        except NotRegularFile as err:
            raise JournalError(str(err)) from None
        except OSError as err:
            limits.reraise(err)  # out of descriptors: the machine's, said as such
            raise JournalError(f"journal {path}: {err.strerror or err}") from None
        if pid is None:  # the process the client started (a warm server's: its launcher)
            from simulator.launcher import launched_pid

            pid = launched_pid()
        return cls(fd, path, pid=pid, warn=warn, secrets=secrets)

    @property
    def writing(self) -> bool:
        """False once closed, or once a write failed."""
        return self._fd is not None

    def start(self, argv: Sequence[str], cwd: str, command: str) -> None:
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        hide = self.secrets.redact_text
        argv = [hide(word) for word in argv]
        self._write(Start(self.pid, argv, hide(cwd), now.replace("+00:00", "Z"), command))

    def line(self, entry: JournalEntry) -> None:
        """One line the session recorded (``JournalEntry.as_json``'s fields)."""
        secrets = self.secrets
        self._write(
            Line(
                self.pid,
                entry.time,
                self._text(entry.line),
                entry.state,
                list(entry.waiting_for),
                entry.after_done,
                secrets.redact_text(entry.error),
            )
        )

    def event(self, t: float, line: bytes, state: str = "") -> None:
        self._write(Event(self.pid, t, self._text(line), state))

    def cover(self, t: float, reached: Reached) -> None:
        """What the session reached that no earlier ``cover`` record of it said."""
        self._write(
            Cover(
                self.pid,
                t,
                reached.command,
                sorted(reached.states),
                sorted(reached.transitions),
                sorted(reached.gates),
                sorted(reached.failures),
                sorted(reached.faults),
            )
        )

    def timer(self, t: float, late: float) -> None:
        """One timer fired at session time ``t``, ``late`` seconds after it was due."""
        self._write(Timer(self.pid, t, late))

    def exit(self, t: float, code: int | None, how: str) -> None:
        """The last record of the process; once (a second call writes nothing)."""
        if not self.exited:
            self.exited = True
            self._write(Exit(self.pid, t, code, how))

    def http_fault(self, t: float, seen: Mapping[str, str]) -> None:
        """A request to the wiki server met an HTTP fault at session time ``t``:
        ``seen`` has its ``method``, ``path``, ``fault`` (the id) and ``kind``."""
        path = self._text(seen.get("path", "").encode("utf-8", "surrogateescape"))
        self._write(
            HttpFaultMet(
                self.pid,
                t,
                seen.get("method", ""),
                path,
                seen.get("fault", ""),
                seen.get("kind", ""),
            )
        )

    def http_faults_at(self, now: Callable[[], float]) -> Callable[[Mapping[str, str]], None]:
        """What writes an ``http_fault`` record for each request that meets a fault,
        at session time ``now()`` (a live session's ``now``): an
        :attr:`~simulator.hosts.effects.EffectHost.http_journal`."""

        def seen(met: Mapping[str, str]) -> None:
            self.http_fault(now(), met)

        return seen

    def hold(self) -> None:
        """Keep the records from now on, to be written together by :meth:`release`."""
        with self._lock:
            if self._held is None:
                self._held = []

    def release(self) -> None:
        """Write the records kept since :meth:`hold` (one ``write``), and write each
        one at once again."""
        with self._lock:
            self._flush()

    def flush(self) -> None:
        """Write the records kept so far (one ``write``) and go on keeping them: what
        must be in the file before an event goes out."""
        with self._lock:
            held = self._held
            if held:
                self._held = []
                self._append(b"".join(held))

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held:
            self._append(b"".join(held))

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        self._flush()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _write(self, record: Record) -> None:
        if self._fd is None:
            return
        data = _ENCODER.encode(record) + b"\n"
        with self._lock:
            if self._held is not None:
                self._held.append(data)
            else:
                self._append(data)

    def _append(self, data: bytes) -> None:
        if self._fd is None:
            return
        fd, view, span = self._fd, memoryview(data), None
        try:
            while view:  # one write for a whole line; the loop only on a short one
                count = os.write(fd, view)
                view = view[count:]
                if view or span is not None:  # short: where it began, to cut it if need be
                    span = _span(fd, count, span)
        except OSError as err:
            if span is not None:
                _untear(fd, span)
            self._close()
            what = f"journal {self.path}: {err.strerror or err}; journaling stops"
            self._warn(self.secrets.redact_text(what))

    def _text(self, line: bytes) -> str:
        line = line.removesuffix(b"\n")
        return self.secrets.redact_line(line).decode("utf-8", "backslashreplace")


def _span(fd: int, count: int, span: tuple[int, int] | None) -> tuple[int, int] | None:
    """Where the record being written begins and ends in the file after a write of
    ``count`` more bytes of it: ``(start, end)``, (-1, end) once another process's
    record came in between (O_APPEND puts each write at the end), or None when the
    file has no offsets (a pipe)."""
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None
    if span is None:
        return (end - count, end)
    start = span[0] if end - count == span[1] else -1
    return (start, end)


def _untear(fd: int, span: tuple[int, int]) -> None:
    """Cut a record a full disk left half written off the file, back to where it
    began, so its readers are not left a torn last line; only when nothing was appended
    after it since (the file is shared: another process's records are not ours to cut)."""
    start, end = span
    with contextlib.suppress(OSError):
        if start >= 0 and os.fstat(fd).st_size == end:
            os.ftruncate(fd, start)
