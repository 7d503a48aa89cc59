"""A cassette played back as a session, sans-I/O: ``--scenario replay:CASSETTE``.

Owns: :class:`ReplaySession`, which a runner drives exactly as it drives a
:class:`~simulator.core.session.Session` (duck-typed: ``start``, ``feed``, ``quit``,
``deliver``, ``resolve``, ``advance``, ``step``, ``next_deadline``, ``next_timer``,
``armed``, ``speed``, ``done``, ``journal``, ``transcript``, ``snapshot`` ...). It is given the
decoded cassette (:func:`simulator.tools.record.read_cassette`), never a file.

The recorded ``out`` lines (events) are written at their recorded times, multiplied by
the speed, as timers: those before the first ``in`` line from the start, those after an
``in`` line from the moment the client sent the matching line. A client line matches
the next recorded ``in`` line when both parse to the same JSON (key order and spacing
aside; the client's line is redacted as the recorder redacts, so a recorded ``***``
API key matches the real one). A line that does not match is a divergence: the
session answers with an event whose ``error`` is ``replay diverged: expected <line>``
repeating the previous vm and waiting_for (as a rejection does), tells ``on_divergence``
the stderr line, and stays where it is. ``quit`` always ends the session (the
``done:true`` event with the last vm, as zread does) unless it is what the cassette
expects next, in which case the recorded answer is played.

Events still due from before a matching line are written first, so the order is the
recording's. When the recording's events run out (its ``done:true`` event, or its
last event when no client line is followed by another) the session is done and
:attr:`ReplaySession.exit_code` is the recorded exit code. The recorded ``err``
lines are not replayed.
"""

from __future__ import annotations

import base64
import heapq
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from simulator.core.envelope import JSON_WHITESPACE, RejectedLine, decode_command, encode_event
from simulator.core.secrets import redact, redact_line
from simulator.core.session import JournalEntry, Outcome, SessionError, Timer
from simulator.core.transcript import Transcript

__all__ = ["DIVERGED", "ReplaySession"]

DIVERGED: Final = "replay diverged: expected {expected}"
"""The ``error`` of the event that answers a line the cassette did not expect."""

_NOTHING: Final = "nothing more (the recording ends here)"
"""What the cassette expects once its client lines are all used."""

_TRIGGER: Final = "_replay"


class _Event(msgspec.Struct):
    """What the session reads from a recorded event: its vm as raw bytes."""

    vm: msgspec.Raw
    waiting_for: list[str] = []
    done: bool = False


@dataclass(frozen=True, slots=True)
class _Transport:
    """Stands where a session's scenario is for the output stage: no transport faults."""

    name: str = "replay"
    faults: list[Any] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Out:
    t: float
    data: bytes
    """The line as written: with its newline unless the recording had none."""
    vm: bytes | None
    waiting_for: tuple[str, ...]
    done: bool
    state: str


@dataclass(frozen=True, slots=True)
class _In:
    t: float
    n: int
    text: str
    key: str
    """The canonical JSON of the line (or the line itself when it is not JSON)."""


def _line_of(entry: Mapping[str, Any]) -> bytes:
    if isinstance(entry.get("line"), str):
        return str(entry["line"]).encode("utf-8", "surrogateescape")
    if isinstance(entry.get("line_b64"), str):
        return base64.b64decode(str(entry["line_b64"]), validate=True)
    raise SessionError("a cassette line has neither line nor line_b64")


def _key(raw: bytes) -> str:
    """Compared instead of the bytes: canonical JSON (1, 1.0 and true stay apart)."""
    try:
        return "json:" + json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):
        return "raw:" + raw.strip(JSON_WHITESPACE).decode("utf-8", "backslashreplace")


def _out(t: float, raw: bytes, eol: bool) -> _Out:
    data = raw + b"\n" if eol else raw
    try:
        event = msgspec.json.decode(raw, type=_Event)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _Out(t, data, None, (), False, "")
    vm = bytes(event.vm)
    try:
        state = msgspec.json.decode(vm)
    except msgspec.DecodeError:  # pragma: no cover - Raw is valid JSON
        state = None
    shown = state.get("state") if isinstance(state, dict) else None
    return _Out(
        t, data, vm, tuple(event.waiting_for), event.done, shown if isinstance(shown, str) else ""
    )


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


class ReplaySession:
    """A cassette's lines as a session; see the module docstring."""

    def __init__(
        self,
        cassette: Mapping[str, Any],
        *,
        speed: float = 1.0,
        on_divergence: Callable[[str], None] | None = None,
        program: str = "zread-sim",
    ) -> None:
        if not 0 <= speed < float("inf"):
            raise SessionError("speed must be a number >= 0")
        self._speed = speed
        self.on_divergence = on_divergence
        """Told each divergence's stderr line (the runner writes it)."""
        self._program = program
        code = cassette.get("exit_code")
        self.recorded_exit_code = code if isinstance(code, int) else 0
        """The exit code of the recorded run."""
        # The recording cut at each client line: the events before it, then the line.
        self._segments: list[list[_Out]] = [[]]
        self._ins: list[_In] = []
        lines: Sequence[Mapping[str, Any]] = cassette.get("lines") or []
        for entry in lines:
            if entry.get("dir") == "out":
                eol = entry.get("eol", True) is not False
                self._segments[-1].append(_out(float(entry["t"]), _line_of(entry), eol))
            elif entry.get("dir") == "in":
                raw = _line_of(entry)
                if not raw.strip(JSON_WHITESPACE):
                    continue  # blank lines are nothing to either side
                self._ins.append(_In(float(entry["t"]), int(entry["n"]), _text(raw), _key(raw)))
                self._segments.append([])
        self._next_in = 0
        """The index of the client line the cassette expects next."""
        self._heap: list[Timer] = []
        self._queued: dict[int, _Out] = {}
        self._seq = 0
        self._now = 0.0
        self._started = False
        self._done = False
        self._ended_as_recorded = False
        self._last_vm = b"{}"
        self._last_waiting_for: tuple[str, ...] = ()
        self._shown_state = ""
        self._sent = 0
        self.transcript: Transcript[JournalEntry] = Transcript()
        """What the session keeps of the client's lines, as a live session does."""
        self.scenario = _Transport()
        """What the output stage reads: no transport faults."""
        self.seed = 0
        self.peer_attached = False

    # -- what a runner reads ----------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._done

    @property
    def now(self) -> float:
        return self._now

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def state(self) -> str:
        return self._shown_state

    @property
    def shown_state(self) -> str:
        return self._shown_state

    @property
    def waiting_for(self) -> tuple[str, ...]:
        return self._last_waiting_for

    @property
    def journal(self) -> list[JournalEntry]:
        """The client's most recent lines, as ``Session.journal`` keeps them."""
        return self.transcript.recent

    @property
    def violations(self) -> list[JournalEntry]:
        """The client's lines the cassette did not expect (and anything after done),
        as ``Session.violations`` keeps them: the first 10 and the most recent 100."""
        return self.transcript.violations

    @property
    def exit_code(self) -> int | None:
        """The recorded exit code once the recording was played to its end; None when
        the session is still running or ended otherwise (a ``quit`` it did not expect)."""
        return self.recorded_exit_code if self._ended_as_recorded else None

    @property
    def armed(self) -> int:
        return self._seq

    def next_deadline(self) -> float | None:
        if self._done or not self._heap:
            return None
        return self._heap[0].deadline

    def next_timer(self) -> Timer | None:
        return None if self.next_deadline() is None else self._heap[0]

    def pending(self) -> list[Timer]:
        return sorted(self._heap)

    def snapshot(self) -> dict[str, Any]:
        try:
            vm = redact(msgspec.json.decode(self._last_vm))
        except msgspec.DecodeError:  # pragma: no cover - only valid vms are kept
            vm = {}
        return {
            "command": "replay",
            "state": self._shown_state,
            "chart_state": self._shown_state,
            "vm": vm,
            "waiting_for": list(self._last_waiting_for),
            "done": self._done,
            "clock": self._now,
            "speed": self._speed,
            "timers": [
                {
                    "trigger": t.trigger,
                    "deadline": t.deadline,
                    "in": max(0.0, t.deadline - self._now),
                }
                for t in self.pending()
            ],
        }

    # -- what moves it ----------------------------------------------------------------

    def start(self) -> Outcome:
        """Nothing is written yet: the first events are timers from time 0."""
        if self._started:
            raise SessionError("start() was already called")
        self._started = True
        self._queue(0, since=0.0)
        out = Outcome()
        self._settle(out)
        return out

    def feed(self, line: bytes) -> Outcome:
        """Answer one client line (without its newline)."""
        self._require_started()
        out = Outcome()
        if not line.strip(JSON_WHITESPACE):
            return out
        if self._done:
            self._record(line, "the session is already done (done:true was written)")
            return out
        self._sent += 1
        expected = self._ins[self._next_in] if self._next_in < len(self._ins) else None
        if expected is not None and _key(redact_line(line)) == expected.key:
            self._record(line, "")
            self._flush(out)
            self._next_in += 1
            self._queue(self._next_in, since=expected.t)
            self._settle(out)
            return out
        if _is_quit(line):
            self._record(line, "")
            return self.quit()
        wanted = expected.text if expected is not None else _NOTHING
        error = DIVERGED.format(expected=wanted)
        self._record(line, error)
        if self.on_divergence is not None:
            sent = _text(redact_line(line))
            self.on_divergence(
                f"{self._program}: replay diverged at line {self._sent}: "
                f"the cassette expected {wanted}, the client sent {sent}"
            )
        out.append(encode_event(self._last_vm, self._last_waiting_for, False, error))
        out.states.append(self._shown_state)
        out.done = self._done
        return out

    def quit(self) -> Outcome:
        """End as ``quit`` does: the vm as it stood, ``done:true``."""
        self._require_started()
        if self._done:
            raise SessionError("the session is already done")
        out = Outcome()
        self._done = True
        self._heap.clear()
        self._queued.clear()
        out.append(encode_event(self._last_vm, (), True, ""))
        out.states.append(self._shown_state)
        self._last_waiting_for = ()
        out.done = True
        return out

    def advance(self, now: float, *, limit: int = 0) -> Outcome:
        """Move the clock to ``now``, writing every recorded event due by then."""
        self._require_started()
        out = Outcome()
        while self._heap and self._heap[0].deadline <= now and not self._done:
            if limit and len(out) >= limit:
                return out
            self._fire(heapq.heappop(self._heap), out)
        self._now = max(self._now, now)
        self._settle(out)
        return out

    def step(self) -> Outcome:
        """Write the next recorded event, whenever it is due."""
        self._require_started()
        out = Outcome()
        if self.next_deadline() is not None:
            self._fire(heapq.heappop(self._heap), out)
        self._settle(out)
        return out

    def deliver(self, trigger: str, **payload: object) -> Outcome:
        """No internal triggers in a recording: nothing happens."""
        self._require_started()
        out = Outcome()
        out.done = self._done
        return out

    def resolve(self, effect: object, result: object) -> Outcome:
        """A replay asks for no effects: nothing happens."""
        out = Outcome()
        out.done = self._done
        return out

    def set_speed(self, speed: float) -> None:
        """Change the speed now; pending events keep the share of their wait done."""
        if not 0 <= speed < float("inf"):
            raise SessionError("speed must be a number >= 0")
        old, self._speed = self._speed, speed
        for timer in self._heap:
            remaining = timer.deadline - self._now
            timer.deadline = self._now + (remaining * speed / old if old else 0.0)
        heapq.heapify(self._heap)

    # -- inside -----------------------------------------------------------------------

    def _require_started(self) -> None:
        if not self._started:
            raise SessionError("call start() first")

    def _queue(self, segment: int, *, since: float) -> None:
        """Arm the events of ``segment``, each at its recorded delay after ``since``."""
        for event in self._segments[segment]:
            self._seq += 1
            delay = max(0.0, event.t - since) * self._speed
            heapq.heappush(self._heap, Timer(self._now + delay, self._seq, _TRIGGER, {}))
            self._queued[self._seq] = event

    def _flush(self, out: Outcome) -> None:
        """Write now every event still due from before the client's line."""
        while self._heap and not self._done:
            self._fire(heapq.heappop(self._heap), out, at=self._now)

    def _fire(self, timer: Timer, out: Outcome, *, at: float | None = None) -> None:
        event = self._queued.pop(timer.seq)
        self._now = max(self._now, timer.deadline if at is None else at)
        out.append(event.data)
        out.states.append(event.state or self._shown_state)
        if event.vm is not None:
            self._last_vm, self._shown_state = event.vm, event.state or self._shown_state
            self._last_waiting_for = () if event.done else event.waiting_for
        if event.done:
            self._end()

    def _settle(self, out: Outcome) -> None:
        """Done when the recording's events are all written and none follows a client
        line still to come."""
        if not self._done and not self._heap:
            rest = self._segments[self._next_in + 1 :]
            if not any(rest):
                self._end()
        out.done = self._done

    def _end(self) -> None:
        self._done = True
        self._ended_as_recorded = True
        self._heap.clear()
        self._queued.clear()

    def _record(self, line: bytes, error: str) -> None:
        self.transcript.add(
            JournalEntry(
                self._now, line, self._shown_state, self._last_waiting_for, self._done, error
            )
        )


def _is_quit(line: bytes) -> bool:
    try:
        return decode_command(line).type == "quit"
    except RejectedLine:
        return False
