"""Sessions on an asyncio loop, in real time: one timer heap for all of them.

Owns: :class:`Hub`, which keeps the timers of every session it hosts in one heap and
arms a single loop timer for the earliest, and :class:`Channel`, one session with its
output (a :class:`~simulator.wire.Wire`) and an :class:`Endpoint` that carries the
actions out. The same channel serves the process runner with a control peer
(:func:`serve_process`) and thousands of in-process sessions in a load test.

A channel can be paused (its timers freeze; on resume they keep the time they had
left) and re-timed (``set_speed``), which is what the control channel's admin API does.
Lateness, how long after its deadline a timer actually fired, is reported to the hub's
``on_fire`` hook, for load-test statistics.

Must not: block. Pauses of a ``split`` fault are awaited in a task of the channel's own.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Protocol

from simulator.core.session import Session
from simulator.runners.output import Wire
from simulator.scenario import faults

__all__ = ["Channel", "Endpoint", "Hub"]


class Endpoint(Protocol):
    """Where a channel's actions go: a process's pipes, a socket, a counter."""

    def write(self, data: bytes) -> None: ...

    def stderr(self, line: str) -> None: ...

    def exit(self, code: int) -> None: ...

    def close_output(self) -> None: ...

    def stop_reading(self) -> None: ...


class Hub:
    """Real-time timers for many sessions on one loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        on_fire: Callable[[Channel, float], None] | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.on_fire = on_fire
        self._heap: list[tuple[float, int, Channel]] = []
        self._seq = itertools.count()
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = float("inf")

    def time(self) -> float:
        """The loop's clock, in seconds."""
        return self.loop.time()

    def schedule(self, channel: Channel) -> None:
        """(Re)arm ``channel``'s next timer, if it has one."""
        deadline = channel.next_wakeup()
        channel.wakeup = deadline
        if deadline is None:
            return
        heapq.heappush(self._heap, (deadline, next(self._seq), channel))
        if deadline < self._armed_at:
            if self._armed is not None:
                self._armed.cancel()
            self._armed_at = deadline
            self._armed = self.loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self._armed, self._armed_at = None, float("inf")
        now = self.time()
        while self._heap and self._heap[0][0] <= now:
            deadline, _, channel = heapq.heappop(self._heap)
            if channel.wakeup == deadline:  # else a stale entry: the channel moved on
                channel.wakeup = None
                channel.tick(now)
        while self._heap and self._heap[0][2].wakeup != self._heap[0][0]:
            heapq.heappop(self._heap)  # stale: that channel moved on; no wake-up for it
        if self._heap and self._heap[0][0] < self._armed_at:
            if self._armed is not None:  # a tick above re-armed through schedule()
                self._armed.cancel()
            self._armed_at = self._heap[0][0]
            self._armed = self.loop.call_at(self._armed_at, self._fire)


class Channel:
    """One session in real time on a hub, writing through an endpoint."""

    __slots__ = (
        "_backlog",
        "_draining",
        "_hung",
        "_paused_at",
        "_stopped",
        "done",
        "endpoint",
        "hub",
        "on_hang",
        "origin",
        "session",
        "wakeup",
        "wire",
    )

    def __init__(self, hub: Hub, session: Session, wire: Wire, endpoint: Endpoint) -> None:
        self.hub = hub
        self.session = session
        self.wire = wire
        self.endpoint = endpoint
        self.wakeup: float | None = None
        self.origin = hub.time()
        self.done = hub.loop.create_future()
        self.on_hang: Callable[[], None] | None = None  # a ``hang`` fault stopped it
        self._hung = False
        self._paused_at: float | None = None
        self._stopped = False
        self._backlog: deque[faults.Action] = deque()
        self._draining: asyncio.Task[None] | None = None

    # -- the session's clock -------------------------------------------------------

    def now(self) -> float:
        """Session time: seconds since start, less the time spent paused."""
        if self._paused_at is not None:
            return self._paused_at - self.origin
        return self.hub.time() - self.origin

    def next_wakeup(self) -> float | None:
        if self._stopped or self._paused_at is not None or self.session.done:
            return None
        deadline = self.session.next_deadline()
        return None if deadline is None else self.origin + deadline

    # -- what drives it ------------------------------------------------------------

    def start(self) -> None:
        self._out(self.session.start())

    def feed(self, line: bytes) -> None:
        if self.session.done:
            self.session.feed(line)  # recorded in the journal as after done
            return
        if self._stopped:  # a hang or an exit: nothing is read any more
            return
        self._catch_up()
        self._out(self.session.feed(line))

    def quit(self) -> None:
        if not self._stopped and not self.session.done:
            self._catch_up()
            self._out([self.session.quit()])

    def deliver(self, trigger: str, **payload: object) -> None:
        """Fire an internal trigger now: a runner's answer to an effect."""
        if not self._stopped and not self.session.done:
            self._catch_up()
            self._out(self.session.deliver(trigger, **payload))

    def tick(self, now: float) -> None:
        t = now - self.origin
        while not self._stopped:
            deadline = self.session.next_deadline()
            if deadline is None or deadline > t:
                break
            batch = self.session.advance(t, limit=1)
            if self.hub.on_fire is not None:
                self.hub.on_fire(self, t - deadline)
            self._out(batch, reschedule=False)
        if not self._stopped and not self.session.done:
            self.session.advance(t)  # nothing is due: only the clock moves
        self._after()

    def sync(self) -> None:
        """Bring the session to now: fire timers already due, move its clock."""
        if self._paused_at is None:
            self.tick(self.hub.time())

    _catch_up = sync  # a line arrives after the timers due before it, as in the process

    # -- admin -----------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def pause(self) -> None:
        if self._paused_at is None:
            self._catch_up()
            self._paused_at = self.hub.time()
            self.wakeup = None

    def resume(self) -> None:
        if self._paused_at is not None:
            self.origin += self.hub.time() - self._paused_at
            self._paused_at = None
            self.hub.schedule(self)

    def set_speed(self, speed: float) -> None:
        self._catch_up()
        self.session.set_speed(speed)
        self.wire.faults.set_speed(self.session.speed)
        self._after()

    # -- output ------------------------------------------------------------------------

    def send(self, line: bytes) -> None:
        """Write a whole line of the runner's own (a control frame), between events:
        after whatever a split event still has to write."""
        if self._backlog:
            self._backlog.append(faults.Write(line))
        elif not self._stopped:
            self.endpoint.write(line)

    def _out(self, events: list[bytes], *, reschedule: bool = True) -> None:
        actions = self.wire.render(events)
        if self._backlog or any(isinstance(a, faults.Pause | faults.Hang) for a in actions):
            self._backlog.extend(actions)
            if self._draining is None:
                self._draining = self.hub.loop.create_task(self._drain())
        else:
            for action in actions:
                self._act(action)
        if reschedule:
            self._after()

    def _after(self) -> None:
        if self._hung:
            return
        if self.session.done and not self.done.done() and not self._backlog:
            self.done.set_result(0)
        if not self._stopped:
            self.hub.schedule(self)

    async def _drain(self) -> None:
        while self._backlog:
            action = self._backlog.popleft()
            if isinstance(action, faults.Pause):
                await asyncio.sleep(action.seconds)
            else:
                self._act(action)
        self._draining = None
        self._after()

    def _act(self, action: faults.Action) -> None:
        if self._stopped:
            return
        if isinstance(action, faults.Write):
            self.endpoint.write(action.data)
        elif isinstance(action, faults.Stderr):
            self.endpoint.stderr(action.line)
        elif isinstance(action, faults.Exit):
            self._stop()
            self.endpoint.exit(action.code)
            if not self.done.done():
                self.done.set_result(action.code)
        elif isinstance(action, faults.Hang):
            self._stop()
            self._hung = True
            self._backlog.clear()
            if self.on_hang is not None:
                self.on_hang()
        elif isinstance(action, faults.CloseStdout):
            self.endpoint.close_output()
        elif isinstance(action, faults.StopReading):
            self.endpoint.stop_reading()

    def _stop(self) -> None:
        self._stopped = True
        self.wakeup = None

    def close(self) -> None:
        """Release the channel's effects (servers); the session is left as it is."""
        self._stop()
        if self._draining is not None:
            self._draining.cancel()
        self.wire.close()
