"""Transport faults: what goes wrong between an encoded event and the client.

Owns: :class:`Fault`, one ``[[faults]]`` entry of a scenario, and :class:`FaultPlan`,
which turns each event line into the actions a runner carries out: write these
bytes, pause, write a line on stderr, exit, hang, close stdout, stop reading stdin.
Without a fault an event is one write of the whole line.

A fault fires at a point: ``after_event = n`` (the n-th event), ``on_state = "s"`` (the
first event that shows vm state ``s`` after one that did not), and/or ``probability``
(drawn per event from the seed); with none of them, at every event. ``times`` caps how
often it fires (0: no cap). A fault that changes an event (``split``, ``truncate``,
``duplicate``, ``exit`` mid-line) acts on the event at its point; one that adds
something (``diagnostic``, ``stderr``, ``invalid_utf8``, ``exit``, ``hang``,
``close_stdout``, ``stop_reading``) acts right after that event is written.

Each fault of a plan has an id (``fault-1``, ``fault-2``, ... in the order they were
added, the scenario's first); the admin API lists them with how often each fired, and
removes one or all of them.

Must not: do I/O, sleep or read the clock; the runner does what the actions say.
"""

# No `from __future__ import annotations` here: msgspec resolves these Structs'
# annotations when a scenario is first loaded, and each one left a string costs a
# compile and an eval at start-up.
import itertools
import random
from typing import Any, Literal

import msgspec

Kind = Literal[
    "diagnostic",
    "stderr",
    "split",
    "truncate",
    "invalid_utf8",
    "duplicate",
    "exit",
    "hang",
    "close_stdout",
    "stop_reading",
]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]

_DIAGNOSTICS = (
    "warning: statedb schema divergence detected; continuing with cached schema",
    "\x1b[33mzread\x1b[0m: using cached catalog for this repository",
    "debug: llm request retried after 429 (rate limited)",
    "notice: a newer zread is available: run zread update",
)
_INVALID_UTF8 = b"zread: \xff\xfe\xc3\x28 unreadable diagnostic\n"


class Fault(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """One transport fault of a scenario."""

    kind: Kind
    after_event: int = 0
    on_state: str = ""
    probability: float = 1.0
    times: int = 0
    text: str = ""
    pieces: int = 3
    pause: float = 0.05
    at_byte: int = 0
    code: int = 1
    mid_line: bool = False

    def __post_init__(self) -> None:
        if self.after_event < 0 or self.times < 0 or self.at_byte < 0:
            raise ValueError("after_event, times and at_byte must be >= 0")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.pieces < 2:
            raise ValueError("pieces must be >= 2")
        if not 0 <= self.pause < float("inf"):
            raise ValueError("pause must be a finite number >= 0")
        if not 0 <= self.code <= 255:
            raise ValueError("code must be 0-255")


class Write(msgspec.Struct, frozen=True):
    data: bytes


class Pause(msgspec.Struct, frozen=True):
    seconds: float


class Stderr(msgspec.Struct, frozen=True):
    line: str


class Exit(msgspec.Struct, frozen=True):
    code: int


class Hang(msgspec.Struct, frozen=True):
    pass


class CloseStdout(msgspec.Struct, frozen=True):
    pass


class StopReading(msgspec.Struct, frozen=True):
    pass


Action = Write | Pause | Stderr | Exit | Hang | CloseStdout | StopReading


class FaultPlan:
    """Decides, event by event, which faults fire; deterministic for a seed."""

    def __init__(
        self, faults: list[Fault], rng: random.Random | str, *, speed: float = 1.0
    ) -> None:
        """``rng`` is a Random, or the seed of one made when a fault first draws (most
        sessions have no faults: no Mersenne Twister state, 2.5 KB, for them)."""
        self._faults = faults  # never changed in place: it may be the scenario's list
        self._fired = [0] * len(faults)
        self._ids = list(range(1, len(faults) + 1))
        self._scenario = self._added = len(faults)
        self._gone: frozenset[str] = frozenset()  # kinds of removed faults that fired
        self._random = rng
        self._speed = speed
        self._events = 0
        self._last_state: str | None = None

    def __bool__(self) -> bool:
        return bool(self._faults)

    @property
    def fired(self) -> frozenset[str]:
        """The kinds of the faults that fired so far (removed ones included)."""
        fired = frozenset(f.kind for f, n in zip(self._faults, self._fired, strict=True) if n)
        return fired | self._gone

    def set_speed(self, speed: float) -> None:
        """The factor ``split`` pauses are multiplied by from now on."""
        self._speed = speed

    @property
    def _rng(self) -> random.Random:
        if isinstance(self._random, str):
            self._random = random.Random(self._random)
        return self._random

    def add(self, fault: Fault, *, now: bool = False) -> str:
        """Add a fault; with ``now``, its point is the next event. Its id."""
        if now:
            fault = msgspec.structs.replace(fault, after_event=self._events + 1, on_state="")
        self._faults = [*self._faults, fault]
        self._fired.append(0)
        self._added += 1
        self._ids.append(self._added)
        return f"fault-{self._added}"

    def entries(self) -> list[dict[str, Any]]:
        """Every fault still in the plan, in the order of their ids, as plain data: ``id``,
        ``kind``, ``source``, ``where`` (what it matches: ``after_event``, ``on_state``,
        ``probability``; nothing: every event), ``left`` (events until its
        ``after_event``, fires left under ``times``) and ``fired``."""
        return [
            self._entry(number, fault, fired)
            for number, fault, fired in zip(self._ids, self._faults, self._fired, strict=True)
        ]

    def remove(self, entry_id: str) -> bool:
        """Remove the fault whose id is ``entry_id``; whether there was one."""
        ids = [f"fault-{number}" for number in self._ids]
        if entry_id not in ids:
            return False
        index = ids.index(entry_id)
        if self._fired[index]:
            self._gone |= {self._faults[index].kind}
        self._faults = self._faults[:index] + self._faults[index + 1 :]
        del self._fired[index], self._ids[index]
        return True

    def clear(self) -> None:
        """Remove every fault, the scenario's included: from now on no event has one."""
        self._gone = self.fired
        self._faults, self._fired, self._ids = [], [], []

    def _entry(self, number: int, fault: Fault, fired: int) -> dict[str, Any]:
        where: dict[str, Any] = {}
        left: dict[str, int] = {}
        if fault.after_event:
            where["after_event"] = fault.after_event
            left["after_event"] = max(0, fault.after_event - self._events)
        if fault.on_state:
            where["on_state"] = fault.on_state
        if fault.probability < 1.0:
            where["probability"] = fault.probability
        if fault.times:
            left["times"] = max(0, fault.times - fired)
        return {
            "id": f"fault-{number}",
            "kind": fault.kind,
            "source": "scenario" if number <= self._scenario else "injected",
            "where": where,
            "left": left,
            "fired": fired,
        }

    def passed(self, count: int, vm_state: str) -> None:
        """``count`` events went out without a fault (the runner's fast path, taken only
        when there is no fault at all): counted as :meth:`actions` counts them, so a
        fault added later finds its event."""
        self._events += count
        self._last_state = vm_state

    def passed_if_none(self, count: int, vm_state: str) -> bool:
        """With no fault at all, :meth:`passed` (True); with any, False and nothing
        counted. One call a session call on the runner's fast path."""
        if self._faults:
            return False
        self._events += count
        self._last_state = vm_state
        return True

    def actions(self, line: bytes, vm_state: str) -> list[Action]:
        """What to do for the next event ``line`` (newline included) showing ``vm_state``.

        Faults firing at one event compose in a fixed order, whatever their order in
        the scenario: the event is truncated, then duplicated, then split; then come
        the additions (diagnostic, stderr, invalid_utf8) in scenario order; last the
        ending ones (close_stdout, stop_reading, then exit or hang). An ``exit`` mid-line
        ends the event's bytes at its cut, and nothing follows it.
        """
        firing = self._firing(vm_state)
        if not firing:
            return [Write(line)]
        kinds = {f.kind: f for f in reversed(firing)}  # the first of each kind wins
        crash = kinds.get("exit")
        if crash is not None and crash.mid_line:
            return [Write(line[: self._cut(crash, line)]), Exit(crash.code)]
        out = self._event(line, kinds)
        for fault in firing:
            out.extend(self._add(fault))
        return out + _endings(kinds)

    def _firing(self, vm_state: str) -> list[Fault]:
        """The faults that fire at the next event, which shows ``vm_state``."""
        self._events += 1
        entered = vm_state != self._last_state
        self._last_state = vm_state
        return [f for i, f in enumerate(self._faults) if self._fires(i, f, vm_state, entered)]

    def _event(self, line: bytes, kinds: dict[Kind, Fault]) -> list[Action]:
        """The writes of the event itself: truncated, then duplicated, then split."""
        body = [line]
        if "truncate" in kinds:
            body = [line[: self._cut(kinds["truncate"], line)] + b"\n"]
        if "duplicate" in kinds:
            body = body * 2
        if "split" not in kinds:
            return [Write(data) for data in body]
        return [action for data in body for action in self._split(kinds["split"], data)]

    def _fires(self, index: int, fault: Fault, vm_state: str, entered: bool) -> bool:
        if fault.times and self._fired[index] >= fault.times:
            return False
        if fault.after_event and fault.after_event != self._events:
            return False
        if fault.on_state and not (entered and fault.on_state == vm_state):
            return False
        if fault.probability < 1.0 and self._rng.random() >= fault.probability:
            return False
        self._fired[index] += 1
        return True

    def _cut(self, fault: Fault, line: bytes) -> int:
        body = len(line) - 1
        return min(fault.at_byte, body) if fault.at_byte else body // 2

    def _split(self, fault: Fault, data: bytes) -> list[Action]:
        pieces = min(fault.pieces, len(data))
        bounds = [round(i * len(data) / pieces) for i in range(pieces + 1)]
        out: list[Action] = []
        for start, end in itertools.pairwise(bounds):
            if out:
                out.append(Pause(fault.pause * self._speed))
            out.append(Write(data[start:end]))
        return out

    def _add(self, fault: Fault) -> list[Action]:
        if fault.kind == "diagnostic":
            text = fault.text or self._rng.choice(_DIAGNOSTICS)
            return [Write(text.encode("utf-8") + b"\n")]
        if fault.kind == "stderr":
            return [Stderr(fault.text or self._rng.choice(_DIAGNOSTICS))]
        if fault.kind == "invalid_utf8":
            return [Write(_INVALID_UTF8)]
        return []


_CLOSINGS: tuple[tuple[Kind, Action], ...] = (
    ("close_stdout", CloseStdout()),
    ("stop_reading", StopReading()),
)


def _endings(kinds: dict[Kind, Fault]) -> list[Action]:
    """The actions that end an event's faults, in their fixed order: close_stdout,
    stop_reading, then exit or hang (an exit leaves no hang to carry out)."""
    out = [action for kind, action in _CLOSINGS if kind in kinds]
    crash = kinds.get("exit")
    if crash is not None:
        out.append(Exit(crash.code))
    elif "hang" in kinds:
        out.append(Hang())
    return out
