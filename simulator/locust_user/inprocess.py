"""In-process load sessions on gevent: every session of the process on one hub.

Owns: :class:`GreenLoop` (what a :class:`~simulator.runners.aio.Hub` asks of its loop, a
clock and callbacks at a time, served by one greenlet), :class:`Fleet` (the in-process
sessions one Locust user runs side by side on the process's hub: each begun by
:meth:`Fleet.start` and handed back by :meth:`Fleet.next_ended` once its run is over, or
failed at its timeout), :func:`process_hub` (the hub of this process's sessions),
:func:`run_inprocess` (one session to its end) and :func:`warm_up` (a session whose
figures are dropped, before the measured ones).

One hub, not a greenlet a session: a parked greenlet costs ~6 KB and each of its timers a
gevent timer and two switches; on one hub the timers of every session share one heap,
those due within :data:`QUANTUM` fire in one turn, and the hub fires what is due for
:data:`~simulator.runners.aio.SLICE` at most before the users' greenlets get a turn. A
Locust user's greenlet only waits for its sessions' ends, so a user may run several at
once and Locust's cost of a user (~10 KB) is paid once for them.

A client answers an event once the call that wrote it is over (a callback of the loop),
as a client's line comes after the event it read. An answer that raises fails its
session, not the hub, and so does an error of the simulator's own in a session. A
session left waiting for an answer that will not come (no timer due, none queued) fails
as such.

Must not: import Locust, nor change a session's behaviour (timers, bytes and faults are
the session's).
"""

from __future__ import annotations

import heapq
import itertools
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import gevent
import gevent.event

from simulator.hosts.effects import EffectHost
from simulator.locust_user.drive import Plan, Prepared, Report, TimedSession
from simulator.runners.aio import Hub
from simulator.runners.hooks import Live, Observer
from simulator.runners.live import LiveSession
from simulator.runners.output import OutputStage

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

QUANTUM = 0.005
"""Seconds the hub rounds its wake-ups up to: timers due within one fire in one turn, up
to this late. A turn costs as much as a few events (the loop's wait, a switch, the
hub's walk), and thousands of sessions have a timer due every few microseconds: fewer
turns leave more of the CPU to the events."""
YIELD_EVERY = 64
"""Answers fed to one session in one turn of the loop; the rest in a later turn."""


class _Handle:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class GreenLoop:
    """A hub's loop on gevent: callbacks at a time on :func:`time.monotonic`, run in turn
    by one greenlet, which yields to the others after every turn."""

    def __init__(self) -> None:
        self.time: Callable[[], float] = time.monotonic
        self._heap: list[tuple[float, int, _Handle]] = []
        self._seq = itertools.count()
        self._wake = gevent.event.Event()
        self._until = float("inf")
        """When the greenlet wakes up by itself (-inf: it is running)."""
        self._greenlet: gevent.Greenlet[..., None] | None = None

    def call_at(self, when: float, callback: Callable[[], object], /) -> _Handle:
        handle = _Handle(callback)
        heapq.heappush(self._heap, (when, next(self._seq), handle))
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)
        elif when < self._until:
            self._wake.set()
        return handle

    def call_soon(self, callback: Callable[[], object], /) -> _Handle:
        return self.call_at(self.time(), callback)

    def _run(self) -> None:
        heap, wake = self._heap, self._wake
        while True:
            delay = heap[0][0] - self.time() if heap else None
            if delay is None or delay > 0:
                self._until = float("inf") if delay is None else heap[0][0]
                wake.clear()
                wake.wait(delay)
                continue
            self._until = float("-inf")
            self._turn()
            gevent.sleep(0)

    def _turn(self) -> None:
        """Run the callbacks due now; those they add wait for the next turn."""
        heap, now, last = self._heap, self.time(), next(self._seq)
        while heap and heap[0][0] <= now and heap[0][1] < last:
            handle = heapq.heappop(heap)[2]
            if handle.cancelled:
                continue
            try:
                handle.callback()
            except (gevent.GreenletExit, KeyboardInterrupt, SystemExit):
                raise
            except BaseException as error:  # said, and the rest go on (a gevent.Timeout too)
                sys.stderr.write(f"zread-sim load: internal error in a session: {error!r}\n")


_HUB: Hub | None = None


def process_hub() -> Hub:
    """The hub of this process's in-process sessions (made at the first)."""
    global _HUB
    if _HUB is None:
        _HUB = Hub(GreenLoop(), quantum=QUANTUM)
    return _HUB


def _own_error(error: Exception) -> str:
    """How an error of the simulator's own in a session is said in its report."""
    return f"the simulator's own error: {type(error).__name__}: {error}"


class _Live(LiveSession):
    """A live session whose ticks, from the hub, are guarded: an error of the simulator's
    own in one session fails that session (its report says so), not the hub's turn."""

    __slots__ = ("client",)
    client: _Client

    def tick(self) -> None:
        try:
            super().tick()
        except Exception as error:
            self.client.fail(_own_error(error))


class _Client(Observer):
    """The endpoint and observer of one in-process session: it reads what the session
    writes as a client would, and feeds its answers back in a later turn."""

    __slots__ = (
        "answers",
        "deadline",
        "fed_at_send",
        "feeding",
        "fleet",
        "live",
        "over",
        "pending",
        "plan",
        "report",
        "session",
    )

    def __init__(self, fleet: Fleet, plan: Plan, report: Report, session: TimedSession) -> None:
        self.fleet = fleet
        self.plan = plan
        self.report = report
        self.session = session
        self.deadline = report.started + plan.timeout
        self.live: _Live | None = None
        self.pending = b""
        self.answers: list[bytes] = []  # a few at most: a list is 56 bytes, a deque 632
        self.fed_at_send = 0
        self.feeding = False
        """A feed (of the answers, or a look for a session left waiting) is due."""
        self.over = False

    # -- the endpoint --------------------------------------------------------------------

    def write(self, data: bytes) -> bool:
        if data and not self.pending and data.find(b"\n") == len(data) - 1:
            lines = [data]  # one whole line, newline and all: the common write, not copied
        else:
            *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            # An event written before the session took the last command (a timer due
            # before it) does not answer it.
            answers = self.session.fed > self.fed_at_send
            event = self.report.event(line, time.monotonic(), answers=answers)
            if event is not None and not self.over:
                self._answer(event)
        return True

    def _answer(self, event: Mapping[str, Any]) -> None:
        try:
            answer = self.plan.answer(event)
        except (gevent.GreenletExit, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # the answer policy's fault, a gevent.Timeout too
            self.fail(f"the answer to an event raised {type(error).__name__}: {error}")
            return
        if answer is None:
            return
        if not isinstance(answer, bytes | bytearray):
            self.fail(f"the answer to an event is a {type(answer).__name__}, not bytes")
            return
        line = bytes(answer)
        self.answers.append(line if line.endswith(b"\n") else line + b"\n")
        self._feed_soon()

    def stderr(self, line: str) -> None:
        pass

    def close_stdout(self) -> None:
        self.report.problem = self.report.problem or "stdout closed before done:true"

    # -- the observer --------------------------------------------------------------------

    def fired(self, live: Live, due: float) -> None:
        self.report.late(self.session.last_trigger, time.monotonic() - due)

    def settled(self, live: Live) -> None:
        hub = self.fleet.hub
        hub.settled(live)
        if hub.wakeup(live) is None and self._stuck(live):
            self._feed_soon()  # looked at again once this call is over

    def ended(self, live: Live, code: int | None, how: str) -> None:
        self.fleet.hub.ended(live, code, how)
        self._end()

    # -- answers -------------------------------------------------------------------------

    def _feed_soon(self) -> None:
        if not self.feeding:
            self.feeding = True
            self.fleet.hub.loop.call_soon(self._feed)

    def _feed(self) -> None:
        self.feeding = False
        live, report, session = self.live, self.report, self.session
        if live is None or self.over:
            return
        for _ in range(YIELD_EVERY):
            if not self.answers or self.over or live.code is not None:
                break
            line = self.answers.pop(0)
            self.fed_at_send = session.fed
            try:
                report.sent(line[:-1], time.monotonic())
                live.received(line)
            except Exception as error:
                self.fail(_own_error(error))
                return
        else:
            if self.answers:
                self._feed_soon()  # the rest in a later turn
                return
        if self._stuck(live):
            waiting = ", ".join(session.waiting_for) or "nothing"
            self.fail(f"left waiting for {waiting}: no answer came")

    def _stuck(self, live: Live) -> bool:
        """Nothing will move the session: no answer queued, no timer due, not over."""
        running = not self.over and live.code is None and not live.hung
        return running and not self.answers and live.next_wakeup() is None

    def fail(self, problem: str) -> None:
        """The session failed: ``problem`` is said, and its user ends it."""
        self.report.problem = self.report.problem or problem
        self._end()

    def _end(self) -> None:
        """The session is over: its user hears it, once."""
        if not self.over:
            self.over = True
            self.fleet.ended(self)

    def verdict(self) -> str:
        """What went wrong with the session, or ''."""
        live, session = self.live, self.session
        if live is None:
            return "never started"
        if live.hung:
            return "hung (a hang fault): no done:true will come"
        if live.code:
            return f"exit code {live.code}"
        if session.violations:
            return f"client mistake: {session.violations[0]}"
        if not session.done:
            return "ended without done:true"
        return ""


class Fleet:
    """The in-process sessions one user runs at once, on the process's hub."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.hub = process_hub()
        self.running: set[_Client] = set()
        self._over: deque[_Client] = deque()
        self._wake = gevent.event.Event()

    def start(self, plan: Plan, seed: int, report: Report) -> None:
        """Begin one session: its first event is written now."""
        prepared = self.prepared
        session = TimedSession(
            prepared.chart, prepared.scenario, flags=prepared.flags, seed=seed, speed=plan.speed
        )
        stage = OutputStage.for_scenario(prepared.scenario, seed=seed, speed=session.speed)
        client = _Client(self, plan, report, session)
        host = EffectHost.for_scenario(prepared.scenario, seed=seed)
        # The client tells the hub what it must hear (a call over, the run's end) itself:
        # a Channel would tell both through an Observers, on each of the 58 events.
        live = _Live(session, stage, client, clock=self.hub.time, host=host, observer=client)
        live.client = client
        client.live = live
        self.running.add(client)
        try:
            live.start()
        except Exception as error:  # the session fails; its fleet goes on
            client.fail(_own_error(error))

    def ended(self, client: _Client) -> None:
        self._over.append(client)
        self._wake.set()

    def next_ended(self) -> Report:
        """Wait for a session to end (or to pass its timeout, which fails it); its report,
        with its problem if it has one."""
        while not self._over:
            deadline = min(client.deadline for client in self.running)
            self._wake.clear()
            if not self._wake.wait(max(0.0, deadline - time.monotonic())):
                now = time.monotonic()
                for client in list(self.running):
                    if now >= client.deadline:
                        client.fail(f"no done:true within {client.plan.timeout:g} s")
        client = self._over.popleft()
        self.running.discard(client)
        report = client.report
        report.problem = report.problem or client.verdict()
        self._close(client)
        return report

    def close(self) -> None:
        """End every session still running (cut short: none is reported)."""
        for client in list(self.running):
            self._close(client)
        self.running.clear()
        self._over.clear()

    @staticmethod
    def _close(client: _Client) -> None:
        """End ``client``'s session, and let go of it: the live session and its client
        hold each other, and a cycle left for the collector would be freed only by a
        full collection, whose pause, with thousands of sessions, makes every timer late."""
        client.over = True
        live, client.live = client.live, None
        if live is not None:
            live.close()


def run_inprocess(plan: Plan, prepared: Prepared, seed: int, report: Report) -> None:
    """One session on this process's hub, to its end (or its problem); this greenlet
    waits for it."""
    fleet = Fleet(prepared)
    try:
        fleet.start(plan, seed, report)
        fleet.next_ended()
    finally:
        fleet.close()


def warm_up(prepared: Prepared, command: str, args: tuple[str, ...], scenario: str) -> None:
    """One whole session of ``prepared`` at speed 0, its figures dropped: what a first
    session builds lazily (imports, the check's rules, caches) is built before the first
    measured one, whose timers it would make late, and is not counted as the sessions'
    memory."""
    from simulator.tools.client import ReferenceClient

    plan = Plan(command, args, scenario, 0.0, 60.0, ReferenceClient(command).answer)
    run_inprocess(plan, prepared, 0, Report(command, lambda *_: None))
