"""A cassette played back as a session, sans-I/O: ``--scenario replay:CASSETTE``.

Owns: :class:`ReplaySession`, which a runner drives exactly as it drives a
:class:`~simulator.core.session.Session`: both play by the rules of
:class:`~simulator.core.session.BaseSession` (its timers, rejected lines, quit and
done), and runners take either as a :class:`~simulator.core.interface.SessionLike`.
It is given the decoded cassette (:func:`simulator.tools.cassette.read_cassette`), never a file.

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
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from simulator.core.coverage import Reached
from simulator.core.envelope import JSON_WHITESPACE, RejectedLine, decode_command
from simulator.core.interface import SessionError
from simulator.core.outcome import Outcome
from simulator.core.secrets import Secrets, redact_line
from simulator.core.session import BaseSession
from simulator.core.timers import Timer

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


def _is_quit(line: bytes) -> bool:
    try:
        return decode_command(line).type == "quit"
    except RejectedLine:
        return False


class ReplaySession(BaseSession):
    """A cassette's lines as a session; see the module docstring."""

    __slots__ = (
        "_ended_as_recorded",
        "_ins",
        "_next_in",
        "_program",
        "_segments",
        "_sent",
        "on_divergence",
        "peer_attached",
        "recorded_exit_code",
    )

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
        super().__init__(speed=speed, secrets=Secrets())
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
        self._ended_as_recorded = False
        self._sent = 0
        self.peer_attached = False

    # -- what a runner reads ----------------------------------------------------------

    @property
    def command(self) -> str:
        return "replay"

    @property
    def state(self) -> str:
        return self._shown_state

    @property
    def reached(self) -> Reached:
        """A recording has no chart: nothing of one is reached."""
        return Reached("replay")

    @property
    def coverage_marks(self) -> tuple[int, int, int, int]:
        return 0, 0, 0, 0

    @property
    def exit_code(self) -> int | None:
        """The recorded exit code once the recording was played to its end; None when
        the session is still running or ended otherwise (a ``quit`` it did not expect)."""
        return self.recorded_exit_code if self._ended_as_recorded else None

    # -- what moves it ----------------------------------------------------------------

    def start(self) -> Outcome:
        """Nothing is written yet: the first events are timers from time 0."""
        self._starting()
        self._queue(0, since=0.0)
        return self._close(Outcome())

    def deliver(self, trigger: str, **payload: Any) -> Outcome:
        """No internal triggers in a recording: nothing happens."""
        self._require_started()
        return self._close(Outcome())

    def resolve(self, effect: object, result: object) -> Outcome:
        """A replay asks for no effects: nothing happens."""
        return self._close(Outcome())

    def inject(self, failure: object) -> None:
        """A recording plays what was recorded: it takes no failure."""
        raise SessionError("a replay plays its recording: no failure can be injected")

    # -- the rules' cassette half -----------------------------------------------------

    def _answer(self, line: bytes, out: Outcome) -> Outcome:
        self._sent += 1
        expected = self._ins[self._next_in] if self._next_in < len(self._ins) else None
        if expected is not None and _key(redact_line(line)) == expected.key:
            self._record(line, "")
            self._flush(out)
            self._next_in += 1
            self._queue(self._next_in, since=expected.t)
            return self._close(out)
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
        return self._reject(out, error)

    def _fire_timer(self, timer: Timer, out: Outcome) -> None:
        """Write the recorded event ``timer`` holds."""
        event: _Out = timer.payload["event"]
        out.append(event.data)
        out.states.append(event.state or self._shown_state)
        if event.vm is not None:
            self._last_vm_pieces = (event.vm,)
            self._shown_state = event.state or self._shown_state
            self._last_waiting_for = () if event.done else event.waiting_for
        if event.done:
            self._end()

    def _on_quit(self) -> None:
        """A recording holds nothing to release."""

    def _close(self, out: Outcome) -> Outcome:
        """Done when the recording's events are all written and none follows a client
        line still to come."""
        if not self._done and self._timers.next() is None:
            rest = self._segments[self._next_in + 1 :]
            if not any(rest):
                self._end()
        out.done = self._done
        return out

    # -- inside -----------------------------------------------------------------------

    def _queue(self, segment: int, *, since: float) -> None:
        """Arm the events of ``segment``, each at its recorded delay after ``since``."""
        for event in self._segments[segment]:
            self._timers.arm(_TRIGGER, max(0.0, event.t - since), {"event": event})

    def _flush(self, out: Outcome) -> None:
        """Write now every event still due from before the client's line."""
        while not self._done and (timer := self._timers.take()) is not None:
            self._fire_timer(timer, out)

    def _end(self) -> None:
        self._done = True
        self._ended_as_recorded = True
        self._timers.clear()
