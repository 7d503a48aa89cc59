"""A session's clock and the timers pending on it, sans-I/O.

Owns: :class:`Timer`, one pending internal trigger, and :class:`Timers`, every session's
one implementation of time (the chart's :class:`~simulator.core.session.Session` and a
cassette's :class:`~simulator.core.replay.ReplaySession` alike): the clock only its
caller moves, the speed every delay is multiplied by, a heap of deadlines ordered by
(deadline, arming order), and cancellation.

A cancelled timer leaves its heap entry behind (removing it would cost a heap scan); it
is dropped when it comes first. A timer armed later than another with the same
deadline fires after it.

Must not: read the wall clock, sleep, or know what a trigger does.
"""

from __future__ import annotations

import heapq
import sys
from typing import Any

import msgspec

_LATEST = sys.float_info.max
"""The latest deadline: a delay (at most ``timing.MAX_SECONDS``) times a speed far past
any use could overflow to infinity, which a snapshot could not show as JSON."""


class Timer(msgspec.Struct, order=True):
    """A pending internal trigger."""

    deadline: float
    seq: int
    trigger: str
    payload: dict[str, Any]
    state: str = ""
    """The chart state the timer belongs to ("" for none): it is dropped when the
    session leaves that state."""
    repeat_after: str = ""
    """The delay it is armed again after, each time it fires in its state ("" once)."""


class Timers:
    """The clock and the pending timers of one session; see the module docstring."""

    __slots__ = ("_heap", "_live", "armed", "now", "speed")

    def __init__(self, *, now: float = 0.0, speed: float = 1.0) -> None:
        self.now = now
        """Seconds: the latest time the session was moved to."""
        self.speed = speed
        """The factor every delay is multiplied by (0: every timer is due at once)."""
        self._heap: list[tuple[float, int, Timer]] = []  # (deadline, seq, timer): C compares
        self._live: dict[int, Timer] = {}
        self.armed = 0
        """How many timers were ever armed: a timer whose ``seq`` is above a reading of
        this was armed after it (the ``seq`` of the last one armed)."""

    def arm(
        self,
        trigger: str,
        seconds: float,
        payload: dict[str, Any],
        *,
        state: str = "",
        repeat_after: str = "",
    ) -> int:
        """Fire ``trigger`` ``seconds`` (times the speed) from now; the timer's ``seq``."""
        self.armed = seq = self.armed + 1
        deadline = min(self.now + seconds * self.speed, _LATEST)
        timer = Timer(deadline, seq, trigger, payload, state, repeat_after)
        heapq.heappush(self._heap, (deadline, seq, timer))
        self._live[seq] = timer
        return seq

    def cancel(self, seq: int) -> None:
        """Forget the timer ``seq`` if it has not fired."""
        self._live.pop(seq, None)

    def keep_state(self, state: str) -> None:
        """Forget the timers that belong to another state than ``state``."""
        for seq, timer in list(self._live.items()):
            if timer.state and timer.state != state:
                del self._live[seq]

    def clear(self) -> None:
        """Forget every timer."""
        self._live.clear()
        self._heap.clear()

    def due(self, now: float) -> bool:
        """True when the first heap entry (cancelled or not) is due by ``now``."""
        heap = self._heap
        return bool(heap) and heap[0][0] <= now

    def pop(self) -> Timer | None:
        """Take the first heap entry off: its timer, or None when it was cancelled."""
        timer = heapq.heappop(self._heap)[2]
        return self._live.pop(timer.seq, None)

    def next(self) -> Timer | None:
        """The timer that fires next (left pending), or None when none is pending."""
        heap, live = self._heap, self._live
        while heap and heap[0][1] not in live:
            heapq.heappop(heap)
        return heap[0][2] if heap else None

    def take(self) -> Timer | None:
        """The timer that fires next, no longer pending; None when none is."""
        heap, live = self._heap, self._live
        while heap:
            timer = live.pop(heapq.heappop(heap)[1], None)
            if timer is not None:  # else cancelled
                return timer
        return None

    def pending(self) -> list[Timer]:
        """The timers still to fire, soonest first."""
        return sorted(self._live.values())

    def rescale(self, speed: float) -> None:
        """Make ``speed`` the factor from now on; each pending timer keeps the share of
        its wait already done (at speed 0, every one is due now)."""
        old, self.speed = self.speed, speed
        now = self.now
        for timer in self._live.values():
            remaining = timer.deadline - now
            timer.deadline = min(now + (remaining * speed / old if old else 0.0), _LATEST)
        self._heap = [(timer.deadline, timer.seq, timer) for timer in self._live.values()]
        heapq.heapify(self._heap)

    def as_json(self) -> list[dict[str, Any]]:
        """The pending timers as a control peer's snapshot shows them, soonest first:
        ``trigger``, ``deadline`` and ``in`` (seconds left)."""
        now = self.now
        return [
            {"trigger": t.trigger, "deadline": t.deadline, "in": max(0.0, t.deadline - now)}
            for t in self.pending()
        ]
