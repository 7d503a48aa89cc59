"""Sessions on an asyncio loop, in real time: one timer heap for all of them.

Owns: :class:`Hub`, which keeps the wake-ups of every session it hosts in one heap and
arms a single loop timer for the earliest, and :class:`Channel`, a
:class:`~simulator.runners.live.LiveSession` on a hub: the loop's clock, a re-armed
wake-up after every call, and a future that resolves to the run's exit code. The same
channel serves the process with a control peer (:mod:`simulator.runners.controlled`)
and thousands of in-process sessions in a load test.

The hub is its channels' :class:`~simulator.runners.live.Observer` (it hears that a
call is over, and re-arms; that a run ended, and resolves its future), and it tells an
observer of its own what every channel does (a load test's statistics: each timer that
fires, with when it was due; each run's end).

Must not: block, or decide anything about a session's lifecycle: the live session does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol

from simulator.core.interface import SessionLike
from simulator.core.outcome import Outcome
from simulator.hosts.effects import EffectHost
from simulator.runners.hooks import Endpoint, Live, Observer, Observers, Peer
from simulator.runners.live import LiveSession
from simulator.runners.output import OutputStage

SLICE = 0.005
"""Seconds of due timers a hub fires in one turn of the loop; the rest wait behind what
else is ready (a reader's input, a load test starting its sessions), so an overloaded
hub makes everything late alike instead of starving the rest of the loop."""


class Handle(Protocol):
    def cancel(self) -> None: ...


class Loop(Protocol):
    """What a hub asks of its loop: asyncio's, or another that offers the same three
    (a load test's on gevent, :class:`simulator.locust_user.inprocess.GreenLoop`)."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], object], /) -> Handle: ...

    def call_soon(self, callback: Callable[[], object], /) -> Handle: ...


class Hub(Observer):
    """Real-time timers for many sessions on one loop."""

    def __init__(
        self,
        loop: Loop | None = None,
        *,
        observer: Observer | None = None,
        quantum: float = 0.0,
    ) -> None:
        self.loop: Loop = loop or asyncio.get_running_loop()
        self.time: Callable[[], float] = self.loop.time
        """The loop's clock, in seconds (its own method: read several times an event)."""
        self.observer = observer or Observer()
        """Told what every channel on the hub does (after the channel's own observer)."""
        self.quantum = quantum
        """Seconds the wake-ups are rounded up to (0: none). With thousands of sessions,
        timers due within one quantum fire in one turn of the loop, up to a quantum late,
        instead of one turn each: a turn costs as much as a few events."""
        self._heap: list[tuple[float, int, Live]] = []
        self._wakeups: dict[Live, float] = {}
        """The deadline the heap holds for each session (an entry that differs is stale)."""
        self._futures: dict[Live, asyncio.Future[int]] = {}
        self._seq = itertools.count()
        self._armed: Handle | None = None
        self._armed_at = float("inf")

    def schedule(self, live: Live) -> None:
        """(Re)arm ``live``'s next wake-up, if it has one."""
        deadline = live.next_wakeup()
        wakeups = self._wakeups
        if deadline == wakeups.get(live):
            return  # the heap already holds it
        if deadline is None:
            del wakeups[live]
            return
        wakeups[live] = deadline
        heapq.heappush(self._heap, (deadline, next(self._seq), live))
        self._arm(deadline)

    def wakeup(self, live: Live) -> float | None:
        """The deadline, on the clock, the hub holds for ``live``; None when none."""
        return self._wakeups.get(live)

    def done(self, live: Live) -> asyncio.Future[int]:
        """A future that resolves to ``live``'s exit code when its run is over; never in
        a hang. Made when first asked for: thousands of load-test channels need none,
        and a future costs ~0.8 KB."""
        future = self._futures.get(live)
        if future is None:
            if not isinstance(self.loop, asyncio.AbstractEventLoop):
                raise TypeError("a hub's futures are asyncio's: its loop is not")
            future = self.loop.create_future()
            if live.code is not None:
                future.set_result(live.code)
            elif not live.hung:
                self._futures[live] = future
        return future

    # -- what the channels tell it ----------------------------------------------------

    def produced(self, live: Live, outcome: Outcome) -> None:
        self.observer.produced(live, outcome)

    def fired(self, live: Live, due: float) -> None:
        self.observer.fired(live, due)

    def settled(self, live: Live) -> None:
        self.schedule(live)  # every call may have moved the next wake-up

    def ended(self, live: Live, code: int | None, how: str) -> None:
        self._wakeups.pop(live, None)
        self.observer.ended(live, code, how)
        future = self._futures.pop(live, None)
        if future is not None and code is not None and not future.done():
            future.set_result(code)

    # -- the loop's timer -------------------------------------------------------------

    def _arm(self, deadline: float) -> None:
        """Wake up for ``deadline`` (at the end of its quantum), unless armed as early."""
        quantum = self.quantum
        at = deadline - deadline % quantum + quantum if quantum else deadline
        if at < self._armed_at:
            if self._armed is not None:
                self._armed.cancel()
            self._armed_at = at
            self._armed = self.loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._armed, self._armed_at = None, float("inf")
        now = began = self.time()
        heap, wakeups = self._heap, self._wakeups
        while heap and heap[0][0] <= now:
            if self.time() - began > SLICE:  # the rest after the loop's other work
                # One wake-up pending at a time: the one a tick above armed goes, and
                # nothing re-arms meanwhile (-inf): the next turn fires what is due then.
                if self._armed is not None:
                    self._armed.cancel()
                self._armed_at = float("-inf")
                self._armed = self.loop.call_soon(self._fire)
                return
            deadline, _, live = heapq.heappop(heap)
            if wakeups.get(live) == deadline:  # else a stale entry: the session moved on
                del wakeups[live]
                live.tick()
        while heap and wakeups.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)  # stale: that session moved on; no wake-up for it
        if heap:
            self._arm(heap[0][0])  # (a tick above may have armed one already)


class Channel(LiveSession):
    """One session in real time on a hub, writing through an endpoint; ``observer``
    hears what it does before the hub does."""

    __slots__ = ("hub",)

    def __init__(
        self,
        hub: Hub,
        session: SessionLike,
        stage: OutputStage,
        endpoint: Endpoint,
        *,
        host: EffectHost | None = None,
        owner: int = 0,
        observer: Observer | None = None,
        peer: Peer | None = None,
        quit_at_eof: bool = False,
    ) -> None:
        told = hub if observer is None else Observers(observer, hub)
        super().__init__(
            session,
            stage,
            endpoint,
            clock=hub.time,
            host=host,
            owner=owner,
            observer=told,
            peer=peer,
            quit_at_eof=quit_at_eof,
        )
        self.hub = hub

    @property
    def done(self) -> asyncio.Future[int]:
        """Resolves to the exit code when the run is over; never in a hang."""
        return self.hub.done(self)
