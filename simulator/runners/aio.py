"""Sessions on an asyncio loop, in real time: one timer heap for all of them.

Owns: :class:`Hub`, which keeps the wake-ups of every session it hosts in one heap and
arms a single loop timer for the earliest, and :class:`Channel`, a
:class:`~simulator.runners.live.LiveSession` on a hub: the loop's clock, a re-armed
wake-up after every input, and a future that resolves to the run's exit code (or the
``on_finish`` callback, for a caller that needs no future). The same
channel serves the process with a control peer (:mod:`simulator.runners.controlled`)
and thousands of in-process sessions in a load test.

Each timer that fires is reported to the hub's ``on_fire`` hook with when it was due,
for load-test statistics (how late it fired).

Must not: block, or decide anything about a session's lifecycle: the live session does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.runners.live import Endpoint, LiveSession
from simulator.runners.output import OutputStage

__all__ = ["Channel", "Hub"]


SLICE = 0.005
"""Seconds of due timers a hub fires in one turn of the loop; the rest wait behind what
else is ready (a reader's input, a load test starting its sessions), so an overloaded
hub makes everything late alike instead of starving the rest of the loop."""


class Hub:
    """Real-time timers for many sessions on one loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        on_fire: Callable[[LiveSession, float], None] | None = None,
        quantum: float = 0.0,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.time: Callable[[], float] = self.loop.time
        """The loop's clock, in seconds (its own method: read several times an event)."""
        self.on_fire = on_fire
        self.quantum = quantum
        """Seconds the wake-ups are rounded up to (0: none). With thousands of sessions,
        timers due within one quantum fire in one turn of the loop, up to a quantum late,
        instead of one turn each: a turn costs as much as a few events."""
        self._heap: list[tuple[float, int, Channel]] = []
        self._seq = itertools.count()
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = float("inf")

    def schedule(self, channel: Channel) -> None:
        """(Re)arm ``channel``'s next wake-up, if it has one."""
        deadline = channel.next_wakeup()
        if deadline == channel.wakeup:
            return  # the heap already holds it
        channel.wakeup = deadline
        if deadline is None:
            return
        heapq.heappush(self._heap, (deadline, next(self._seq), channel))
        self._arm(deadline)

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
        while self._heap and self._heap[0][0] <= now:
            if self.time() - began > SLICE:  # the rest after the loop's other work
                # One wake-up pending at a time: the one a tick above armed goes, and
                # nothing re-arms meanwhile (-inf): the next turn fires what is due then.
                if self._armed is not None:
                    self._armed.cancel()
                self._armed_at = float("-inf")
                self._armed = self.loop.call_soon(self._fire)  # type: ignore[assignment]
                return
            deadline, _, channel = heapq.heappop(self._heap)
            if channel.wakeup == deadline:  # else a stale entry: the channel moved on
                channel.wakeup = None
                channel.tick()
        while self._heap and self._heap[0][2].wakeup != self._heap[0][0]:
            heapq.heappop(self._heap)  # stale: that channel moved on; no wake-up for it
        if self._heap:
            self._arm(self._heap[0][0])  # (a tick above may have armed one already)


class Channel(LiveSession):
    """One session in real time on a hub, writing through an endpoint."""

    __slots__ = ("_done_future", "hub", "wakeup")

    def __init__(
        self,
        hub: Hub,
        session: Session,
        stage: OutputStage,
        endpoint: Endpoint,
        *,
        host: EffectHost | None = None,
        owner: int = 0,
    ) -> None:
        super().__init__(session, stage, endpoint, clock=hub.time, host=host, owner=owner)
        self.hub = hub
        self.wakeup: float | None = None
        """The deadline the hub holds for this channel (stale entries differ from it)."""
        self._done_future: asyncio.Future[int] | None = None
        self.on_fire = hub.on_fire

    @property
    def done(self) -> asyncio.Future[int]:
        """Resolves to the exit code when the run is over; never in a hang. Made when
        first asked for: thousands of load-test channels use ``on_finish`` instead,
        and a future costs ~0.8 KB."""
        if self._done_future is None:
            self._done_future = self.hub.loop.create_future()
            if self.code is not None:
                self._done_future.set_result(self.code)
        return self._done_future

    def _settle(self) -> None:
        super()._settle()
        self.hub.schedule(self)  # every input may have moved the next wake-up

    def _finish(self, code: int) -> None:
        super()._finish(code)
        future = self._done_future
        if future is not None and not future.done():
            future.set_result(code)
