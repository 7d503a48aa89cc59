"""``zread-sim journal FILE``: a journal written by ``--journal`` read back, printed, and
judged.

Owns: reading a journal file (the records of :mod:`simulator.hosts.journal`), grouping
them per process (a process is a pid from its ``start`` record on; a later ``start``
with the same pid is a new process), finding the client's mistakes in them
(:func:`violations`) and printing it all, one line per record (:func:`render`); with
``--summary``, the figures of many journals at once, is
:mod:`simulator.tools.journal_summary`'s.

A last line with no newline that is not a record (a write a full disk cut short) is
left out, with one line on stderr saying so; any other line that is not a record
refuses the file.

A violation is:

- a line the session refused: a command out of turn, bad JSON or params, an internal
  (``_``) command;
- anything sent after done;
- a client that went away without reading to done (``exit`` how ``reader-gone``);
- a process ended by a signal instead of ``quit`` (how ``signal`` or
  ``stdin-closed-left-waiting``), or one with no ``exit`` record at all (SIGKILL, or
  still running).

An ``exit`` of a transport fault (``fault-exit``, ``hang``) is the scenario's doing,
and ``aborted`` the simulator's: neither is the client's mistake. Nor is an
``http_fault`` record (a request to the wiki server met a fault): it is listed, as
``http  GET /api/wiki: http-1 status``.

Every name, line and error taken from a journal is printed with its control characters
(C0, DEL, C1) escaped (:func:`printable`): a journal is anyone's file, and one could
otherwise retitle, clear or rewrite the terminal it is read in. A time a record gives
(``t``, a timer's ``late``) must be finite in milliseconds: a journal with one that is
not is refused as a line that is not a record.

What it prints holds no API key, even from a file written before the journal writer
hid them all: every record is redacted again (:mod:`simulator.core.secrets`), by name
in any spelling, and by value with every key some record of the file names (an
``update_fields`` line, a config event), before it is printed or cut to its width.

Must not: write anything but to the stream it is given (and ``--summary``'s ``--json``
file); journals are only read.

Over 400 lines, for a reason: reading a hostile file (its bound, a torn last line, its
depth, its times, its control characters) and judging it are one reader's rules, which
``--summary`` shares; split, each half would restate the other's.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final

import msgspec

from simulator.core.coverage import Reached
from simulator.core.entries import JournalEntry
from simulator.core.secrets import Secrets
from simulator.errors import ConfigurationError
from simulator.formats.bounds import (
    LIMITS,
    FormatError,
    check_json_nesting,
    in_words,
    too_large,
)
from simulator.hosts.journal import HOWS, Cover, Event, Exit, HttpFaultMet, Line, Record, Start
from simulator.regularfile import NotRegularFile, open_regular

_WIDTH: Final = 160
"""How much of a line or an event the listing shows."""

_DECODER: Final = msgspec.json.Decoder(Record)

_ESCAPES: Final = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
}
"""C0, DEL and C1, as ``repr`` writes them."""


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``, ``\\n``), the rest as it is."""
    return text.translate(_ESCAPES)


def decode_line(line: str) -> Any:
    """The JSON value of a recorded line; None when it is not JSON, or nests deeper than
    any event (msgspec would recurse to Python's limit on a hostile one)."""
    data = line.encode("utf-8", "surrogatepass")
    try:
        check_json_nesting(data, "line")
        return msgspec.json.decode(data)
    except (FormatError, msgspec.DecodeError):
        return None


class JournalReadError(ConfigurationError):
    """The journal cannot be read, or holds a line that is not a record (exit 2)."""


@dataclass
class Process:
    """One process's records, in the order it wrote them."""

    pid: int
    start: Start | None = None
    records: list[Line | Event | Exit | HttpFaultMet] = field(default_factory=list)
    covers: list[Cover] = field(default_factory=list)
    """Its ``cover`` records: what of its chart it reached, piece by piece."""
    late: list[float] = field(default_factory=list)
    """How late each of its timers fired, in seconds (its ``timer`` records)."""

    @property
    def exit(self) -> Exit | None:
        """Its ``exit`` record, when it is its last but ``http_fault`` records (the
        server's thread may write one after it)."""
        for record in reversed(self.records):
            if not isinstance(record, HttpFaultMet):
                return record if isinstance(record, Exit) else None
        return None

    @property
    def reached(self) -> Reached | None:
        """What its cover records say it reached; None when it wrote none (a journal
        from before they were written, or a run that never started a session)."""
        if not self.covers:
            return None
        reached = self.covers[0].reached()
        for cover in self.covers[1:]:
            reached = reached | cover.reached()
        return reached


@dataclass(frozen=True)
class Violation:
    """One mistake of the client: what kind, and the whole story in one line."""

    pid: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"pid {self.pid}: {self.kind}: {self.text}"


def records(lines: Iterable[bytes], where: str = "journal", first: int = 1) -> Iterator[Record]:
    """The records of a journal's lines (the first is line ``first``), blank lines
    skipped; JournalReadError at the first line that is not one."""
    for number, raw in enumerate(lines, first):
        if not raw.strip():
            continue
        try:
            check_json_nesting(raw, f"{where}: line {number}")
            record = _DECODER.decode(raw)
        except FormatError as err:
            raise JournalReadError(str(err)) from None
        except msgspec.DecodeError as err:
            raise JournalReadError(
                f"{where}: line {number} is not a journal record: {in_words(err)}"
            ) from None
        for name in ("t", "late"):
            # every figure is shown in ms: 1e308 s would be inf ms, and JSON's null
            if not math.isfinite(getattr(record, name, 0.0) * 1000):
                raise JournalReadError(
                    f"{where}: line {number} is not a journal record: {name}: out of range"
                )
        yield record


def parse(lines: Iterable[bytes], where: str = "journal") -> list[Process]:
    """The processes of a journal's lines, in the order each first appears."""
    processes: list[Process] = []
    current: dict[int, Process] = {}
    for record in records(lines, where):
        add_record(processes, current, record)
    return processes


def add_record(processes: list[Process], current: dict[int, Process], record: Record) -> None:
    """Put ``record`` in its process (``current``: the last process of each pid), a
    new one at a ``start``."""
    process = current.get(record.pid)
    if process is None or isinstance(record, Start):
        process = current[record.pid] = Process(record.pid)
        processes.append(process)
    if isinstance(record, Start):
        process.start = record
    elif isinstance(record, Cover):
        process.covers.append(record)
    elif isinstance(record, Line | Event | Exit | HttpFaultMet):
        process.records.append(record)
    else:  # a timer record
        process.late.append(record.late)


def stream_lines(path: str, torn: Callable[[str], None] | None = None) -> Iterator[bytes]:
    """The lines of the journal at ``path``, one at a time as it is read, within the
    journal's bound (:mod:`simulator.formats.bounds`; the lines before a line past it
    come first); JournalReadError if it cannot be read. A last line with no newline
    that is not a record (a write a full disk cut short, or one still being written)
    is left out, and ``torn`` told so in one line."""
    left = LIMITS["journal"]
    try:
        with open(open_regular(path, f"journal {path}"), "rb") as file:  # a FIFO: refused
            while chunk := file.readline(left + 1):
                left -= len(chunk)
                if left < 0:
                    raise JournalReadError(str(too_large("journal", f"journal {path}")))
                lines = chunk.splitlines()  # as a whole file's splitlines() would
                if not chunk.endswith(b"\n") and lines and not _is_record(lines[-1]):
                    lines.pop()  # only the last chunk has no newline: the file ends there
                    if torn is not None:
                        cut = "its last line is cut short (a full disk?); read without it"
                        torn(f"journal {path}: {cut}")
                yield from lines
    except NotRegularFile as err:
        raise JournalReadError(str(err)) from None
    except OSError as err:
        raise JournalReadError(f"journal {path}: {err.strerror or err}") from None


def _is_record(raw: bytes) -> bool:
    """Whether ``raw`` is blank or decodes as a record."""
    if not raw.strip():
        return True
    try:
        check_json_nesting(raw, "journal")
        _DECODER.decode(raw)
    except (FormatError, msgspec.DecodeError):
        return False
    return True


def read(path: str, torn: Callable[[str], None] | None = None) -> list[Process]:
    """The processes of the journal at ``path``; JournalReadError if it cannot be read
    (``torn``: :func:`stream_lines`')."""
    return parse(stream_lines(path, torn), f"journal {path}")


def _entry(record: Line) -> JournalEntry:
    line = record.line.encode("utf-8", "backslashreplace")
    waiting = tuple(record.waiting_for)
    return JournalEntry(record.t, line, record.state, waiting, record.after_done, record.error)


def refusal(record: Line) -> str:
    """The kind of mistake a refused line is."""
    if record.after_done:
        return "sent after done"
    if record.error.startswith('command "_'):
        return "an internal (_) command"
    if record.error.startswith("command "):
        return "a command out of turn"
    if record.error.startswith("invalid JSON"):
        return "bad JSON"
    if record.error.startswith("invalid params"):
        return "bad params"
    return "a refused line"


def _last_waiting_for(process: Process) -> str:
    for record in reversed(process.records):
        if isinstance(record, Event):
            try:
                event = decode_line(record.line)
                if not event["done"]:  # the one before the done:true the signal wrote
                    return ", ".join(event["waiting_for"]) or "nothing"
            except (KeyError, TypeError):
                break
    return "an answer"


def violations(process: Process) -> list[Violation]:
    """The client's mistakes in ``process``, in order; see the module docstring."""
    found = [
        Violation(process.pid, refusal(record), str(_entry(record)))
        for record in process.records
        if isinstance(record, Line) and record.error
    ]
    end = process.exit
    if end is None:
        found.append(
            Violation(
                process.pid,
                "no exit recorded",
                "killed with SIGKILL (no quit, no SIGTERM), crashed, or still running",
            )
        )
    elif end.how == "reader-gone":
        quit_sent = any(
            isinstance(r, Line) and not r.error and r.line.startswith('{"type":"quit"')
            for r in process.records
        )
        after = "it sent quit, but " if quit_sent else ""
        found.append(
            Violation(
                process.pid,
                "left without reading to done",
                f"at t={end.t:.3f}s {after}stdout's reader went away before done:true was written",
            )
        )
    elif end.how == "signal":
        found.append(
            Violation(
                process.pid,
                "ended by a signal instead of quit",
                f'at t={end.t:.3f}s; send {{"type":"quit"}} and read to done:true',
            )
        )
    elif end.how == "stdin-closed-left-waiting":
        found.append(
            Violation(
                process.pid,
                "ended by a signal instead of quit",
                f"at t={end.t:.3f}s, after stdin closed while zread waited for "
                f"{_last_waiting_for(process)}",
            )
        )
    return found


def _short(text: str, width: int = _WIDTH) -> str:
    return text if len(text) <= width else text[:width] + "..."


def _record_line(record: Line | Event | Exit | HttpFaultMet) -> str:
    if isinstance(record, HttpFaultMet):
        where = _short(f"{record.method} {record.path}")
        return f"  {record.t:9.3f}  http   {where}: {record.fault} {record.fault_kind}"
    if isinstance(record, Line):
        mark = f"  !! {record.error}" if record.error else ""
        if record.after_done:
            mark = f"  !! after done: {record.error}"
        return f"  {record.t:9.3f}  line   {_short(record.line)}{mark}"
    if isinstance(record, Event):
        return f"  {record.t:9.3f}  event  {_event_summary(record.line)}"
    code = "none" if record.code is None else str(record.code)
    meaning = HOWS.get(record.how, "")
    suffix = f": {meaning}" if meaning else ""
    return f"  {record.t:9.3f}  exit   code {code}, {record.how}{suffix}"


def _event_summary(line: str) -> str:
    """``state S; waiting for A, B`` (or ``done``), the error if any, then the vm."""
    try:
        event = decode_line(line)
        vm = event["vm"]
        parts = [f"state {vm['state']}"] if isinstance(vm, dict) and "state" in vm else []
        waiting = ", ".join(event["waiting_for"]) or "nothing"
        parts.append("done" if event["done"] else f"waiting for {waiting}")
        if event["error"]:
            parts.append(f"error: {event['error']}")
        vm_text = msgspec.json.encode(vm).decode("utf-8", "backslashreplace")
    except (KeyError, TypeError):
        return _short(line)
    return "; ".join(parts) + "; vm " + _short(vm_text, _WIDTH // 2)


def render(processes: list[Process]) -> tuple[list[str], list[Violation]]:
    """The listing (one line per record, each process under a heading), and every
    violation, in order."""
    lines: list[str] = []
    found: list[Violation] = []
    for process in processes:
        start = process.start
        if start is None:
            lines.append(f"pid {process.pid}: (no start record)")
        else:
            lines.append(
                f"pid {process.pid}: {start.command}, started {start.time} in {start.cwd}: "
                + " ".join(start.argv)
            )
        lines.extend(_record_line(record) for record in process.records)
        if process.exit is None:
            lines.append("  (no exit record)")
        found.extend(violations(process))
    if found:
        lines += ["", f"violations ({len(found)}):", *(f"  {v}" for v in found)]
    count = len(processes)
    lines.append(
        f"{count} process{'es' if count != 1 else ''}, "
        f"{len(found) or 'no'} violation{'s' if len(found) != 1 else ''}"
    )
    return lines, found


def redacted(processes: list[Process]) -> Secrets:
    """Hide every API key in ``processes``' records (in place): first learn the keys
    each record names, then redact every record with all of them. The registry."""
    secrets = Secrets()
    for process in processes:
        for record in process.records:
            if isinstance(record, Line | Event):
                secrets.learn(record.line.encode("utf-8", "surrogatepass"))
    hide = secrets.redact_text
    for process in processes:
        if process.start is not None:
            start = process.start
            argv = [hide(word) for word in start.argv]
            process.start = msgspec.structs.replace(start, argv=argv, cwd=hide(start.cwd))
        process.records = [_hidden(record, hide) for record in process.records]
    return secrets


def _hidden(
    record: Line | Event | Exit | HttpFaultMet, hide: Callable[[str], str]
) -> Line | Event | Exit | HttpFaultMet:
    if isinstance(record, HttpFaultMet):
        return msgspec.structs.replace(record, path=hide(record.path))
    if isinstance(record, Line):
        return msgspec.structs.replace(record, line=hide(record.line), error=hide(record.error))
    if isinstance(record, Event):
        return msgspec.structs.replace(record, line=hide(record.line))
    return record


def report(path: str, out: BinaryIO) -> int:
    """Print the journal at ``path`` to ``out``, every API key hidden (:func:`redacted`);
    1 when it holds violations, else 0 (JournalReadError, exit 2, when it cannot be
    read)."""
    processes = read(path, torn=say)
    secrets = redacted(processes)
    lines, found = render(processes)
    text = "\n".join(printable(secrets.redact_text(line)) for line in lines) + "\n"
    out.write(text.encode("utf-8", "backslashreplace"))
    out.flush()
    return 1 if found else 0


def say(line: str) -> None:
    """A notice on stderr, as the command's errors are said (a torn last line's)."""
    sys.stderr.write(f"zread-sim: {printable(line)}\n")
    sys.stderr.flush()


def run(files: list[str], out: BinaryIO, *, json_path: str = "") -> int:
    """``zread-sim journal FILE`` without ``--summary`` (:func:`report`; the summary is
    :func:`simulator.tools.journal_summary.summarize`): JournalReadError (exit 2) for
    more than one file, or ``--json``, which need ``--summary``."""
    if json_path or len(files) != 1:
        what = "--json" if json_path else "more than one journal"
        raise JournalReadError(f"journal: {what} needs --summary")
    return report(files[0], out)
