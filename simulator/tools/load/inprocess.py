"""The in-process runner: many sessions on one asyncio loop and one hub.

Owns: :class:`InProcess`, N sessions of one command and scenario, C at a time, on one
:class:`~simulator.runners.aio.Hub` (one timer heap); per session a
:class:`~simulator.runners.aio.Channel` whose endpoint (:class:`~simulator.tools.load.sink.Sink`)
counts the bytes the process would write and answers gates. The run is the hub's
observer: it hears each timer fire and each session end.

Lateness is counted from each session's schedule. Session i (of the first C) is
scheduled at ``origin + i * ramp / C`` (all at the origin without a ramp); a later one
when the slot it takes frees up. A session is created only when it is due, and how late
it starts (writes its first event) is its first sample; after that, how long after its
deadline each timer fired, read from the clock as it fires. The hub wakes at the end of
each :data:`QUANTUM` at most, so a timer may fire up to that late, and it counts. As one
of K workers (:mod:`simulator.tools.load.workers`) it runs sessions ``worker, worker +
K, ...`` on the global schedule, from an origin the workers share.

Memory: RSS is sampled together with the live count every tick and once the ramp is
over; the figure per session is (RSS at the highest sample - RSS before any session) /
the sessions live at that sample. What exists before the clock starts (imports, the
warm-up session) is frozen out of the cyclic collector, as a long-running host would
do; its pauses count.

Must not: change a session's behaviour (timers, bytes and faults are the hub's and the
session's), parse arguments or write to the terminal (progress goes to a callback).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from simulator.runners.aio import Channel, Hub
from simulator.runners.hooks import Live, Observer
from simulator.runners.output import OutputStage
from simulator.tools.load.common import LoadConfig, interrupt
from simulator.tools.load.memory import peak_rss_kb, reset_peak_rss, rss_kb
from simulator.tools.load.sink import Sink
from simulator.tools.load.stats import GcPauses, Progress, Stats, build_summary, tick

if TYPE_CHECKING:
    from simulator.core.interface import SessionLike
    from simulator.scenario import Scenario


_NOT_GATES = frozenset({"quit", "cancel"})
QUANTUM = 0.002
"""Seconds the hub rounds its wake-ups up to (:attr:`Hub.quantum`): a timer fires up to
2 ms late, counted in its lateness, and the timers of many sessions fire in one turn
of the loop. With 3,000 sessions on a loop that keeps up it takes ~17 % off the CPU an
event costs; a saturated loop, whose turns hold many events anyway, gains little."""
_TURN = 0.005
"""Seconds of starting sessions between two turns of the loop (at least one session):
the timers of the sessions already running wait no longer than that for the starts."""


class _MeasuredHub(Hub):
    """A hub whose wake-ups count."""

    wakeups = 0

    def _fire(self) -> None:
        self.wakeups += 1
        super()._fire()


class InProcess(Observer):
    """Sessions on one loop; see the module docstring."""

    def __init__(
        self,
        config: LoadConfig,
        scenario: Scenario,
        progress: Progress | None,
        *,
        worker: int = 0,
        workers: int = 1,
    ) -> None:
        from simulator.launch import parse_flags
        from statecharts import load_chart

        self.config = config
        self.scenario = scenario
        self.chart = load_chart(config.command)
        self.flags = parse_flags(config.command, config.args)
        self.progress = progress
        self.worker, self.workers = worker, workers
        concurrency = config.concurrency or config.sessions or 1
        self.concurrency = concurrency
        """C: the sessions at once in all, the ramp's denominator."""
        self.slots = len(range(worker, concurrency, workers))
        """This worker's share of C."""
        self.next_index = worker
        """The global index of this worker's next session."""
        self.origin = 0.0
        self.hub: _MeasuredHub
        self.stats: Stats
        self.live: dict[int, Sink] = {}
        self.order: deque[Sink] = deque()
        self.stopping = False
        self.filling = False
        self.peak_live = 0
        self.rss_before: int | None = None
        self._thresholds: tuple[int, int, int] = gc.get_threshold()
        self.rss_peak: tuple[int, int] | None = None
        """(RSS in kB, sessions live) at the highest RSS sample."""
        self._quitting: frozenset[int] = frozenset()
        self.all_done: asyncio.Event
        self.gates: dict[tuple[str, ...], bool] = {}
        """:meth:`needs_answer` of each waiting_for met (read first: once an event)."""
        self.plain = not scenario.faults
        """Without transport faults every write is exactly one event line."""

    def needs_answer(self, waiting_for: tuple[str, ...]) -> bool:
        """True when the reference client may answer an event with this waiting_for."""
        known = self.gates.get(waiting_for)
        if known is None:
            known = bool(set(waiting_for) - _NOT_GATES) or waiting_for == ("quit",)
            self.gates[waiting_for] = known
        return known

    def fired(self, live: Live, due: float) -> None:
        self.stats.late(self.hub.time() - due)

    def ended(self, live: Live, code: int | None, how: str) -> None:
        """A session's run is over: told later, as a future's callback would be (with
        no future per channel)."""
        sink = self.live.get(live.owner)
        if sink is None:  # closed by _finished itself
            return
        if how == "hang":
            message = "hung (a hang fault): no done:true will come"
            self.hub.loop.call_soon(self._finished, sink, 0, message)
        elif code is not None:
            self.hub.loop.call_soon(self._finished, sink, code)

    def prepare(self) -> None:
        """Before the clock starts: warm up, then take the RSS before any session."""
        self._warm_up()
        gc.collect()
        reset_peak_rss()
        self.rss_before = rss_kb()
        gc.freeze()  # what exists now (imports, caches) is never scanned again
        # A session makes no reference cycle (its driver holds it weakly), so what a run
        # frees goes by reference counting; the collector, at its default threshold
        # (700 allocations), would scan the young objects of thousands of live sessions
        # a few hundred times a second for nothing. 3,000 sessions: p50 lateness 99 ->
        # 31 ms, collector pauses 436 -> 67 ms in all.
        self._thresholds = gc.get_threshold()
        gc.set_threshold(100_000, 50, 1000)

    async def run(self, origin: float | None = None) -> dict[str, Any]:
        """Run the sessions; ``origin`` (on the loop's clock, which is monotonic and
        shared by the processes of this machine) is when the schedule starts: now
        without one. One already past makes every session start late by as much."""
        loop = asyncio.get_running_loop()
        if self.rss_before is None:
            self.prepare()
        self.hub = _MeasuredHub(loop, observer=self, quantum=QUANTUM)
        self.all_done = asyncio.Event()
        self.origin = loop.time() if origin is None else origin
        self.stats = Stats(loop.time, origin=self.origin)
        await asyncio.sleep(max(0.0, self.origin - loop.time()))
        ticker = loop.create_task(tick(self.stats, self._live_count, self._check, self.progress))
        if self.config.duration is not None:
            loop.call_at(self.origin + self.config.duration, self.stop)
        cpu = time.process_time()
        with interrupt(loop, self.stop), GcPauses().installed() as pauses:
            await self._fill()
            await self.all_done.wait()
        ticker.cancel()
        gc.unfreeze()
        gc.set_threshold(*self._thresholds)
        self.stats.sample(0)
        summary = self._summary(pauses)
        summary["cpu_s"] = round(time.process_time() - cpu, 3)
        return summary

    def _summary(self, pauses: GcPauses) -> dict[str, Any]:
        summary = build_summary(self.config, self.stats, lateness=True)
        peak = peak_rss_kb()
        if peak is None and self.rss_peak is not None:
            peak = self.rss_peak[0]
        before = self.rss_before
        summary["peak_rss_mb"] = None if peak is None else round(peak / 1024, 1)
        summary["rss_before_mb"] = None if before is None else round(before / 1024, 1)
        summary["peak_live"] = self.peak_live
        summary["gc"] = pauses.summary()
        summary["hub_wakeups"] = self.hub.wakeups
        if before is not None and self.rss_peak is not None and self.rss_peak[1]:
            added, live = self.rss_peak[0] - before, self.rss_peak[1]
            summary["rss_added_kb"] = added
            summary["rss_peak_live"] = live
            summary["rss_per_session_kb"] = round(added / live, 2)
        else:
            summary["rss_added_kb"] = summary["rss_peak_live"] = None
            summary["rss_per_session_kb"] = None
        if self.workers > 1:
            summary["worker"] = self.worker
        return summary

    def _warm_up(self) -> None:
        """One session in virtual time first, so lazy imports and caches are not
        counted as the sessions' memory."""
        session = self._session(self.config.seed, 1.0)
        stage = self._stage(session, self.config.seed)
        stage.actions(session.start())
        for _ in range(1000):
            deadline = session.next_deadline()
            if deadline is None:
                break
            stage.actions(session.advance(deadline, limit=1))
        if not session.done:
            stage.actions(session.quit())

    def _live_count(self) -> int:
        return len(self.live)

    def _sample_memory(self) -> None:
        """RSS and the live count, read together; the highest RSS is kept."""
        rss = rss_kb()
        if rss is not None and (self.rss_peak is None or rss > self.rss_peak[0]):
            self.rss_peak = (rss, len(self.live))

    def _wanted(self) -> bool:
        cap = self.config.sessions
        return not self.stopping and (cap is None or self.next_index < cap)

    def _scheduled(self, index: int) -> float | None:
        """When session ``index`` is due on the ramp; None: when a slot frees up."""
        if index >= self.concurrency:
            return None
        return self.origin + index * self.config.ramp / self.concurrency

    async def _fill(self) -> None:
        """Start the first C sessions on their schedule, for :data:`_TURN` at most
        between two turns of the loop; then fill what finished meanwhile."""
        loop = self.hub.loop
        self.filling = True  # _finished leaves the refilling to this loop meanwhile
        while self._wanted() and self.next_index < self.concurrency:
            now = loop.time()
            while loop.time() - now < _TURN:
                due = self._scheduled(self.next_index)
                if not self._wanted() or due is None or due > loop.time():
                    break
                self._start_one(due)
            due = self._scheduled(self.next_index) if self._wanted() else None
            await asyncio.sleep(0 if due is None else max(0.0, due - loop.time()))
        while self._wanted() and len(self.live) < self.slots:
            self._start_one(None)
        self.filling = False
        self._sample_memory()
        self._maybe_all_done()

    def _session(self, seed: int, speed: float) -> SessionLike:
        from simulator.core.session import Session

        return Session(self.chart, self.scenario, flags=self.flags, seed=seed, speed=speed)

    def _stage(self, session: SessionLike, seed: int) -> OutputStage:
        """The output stage of a session: the scenario's faults, drawn from ``seed``."""
        return OutputStage.for_scenario(self.scenario, seed=seed, speed=session.speed)

    def _start_one(self, scheduled: float | None) -> None:
        index = self.next_index
        self.next_index += self.workers
        self.stats.started += 1
        config = self.config
        session = self._session(config.seed + index, config.speed)
        now = self.hub.time()
        if scheduled is None:
            scheduled = now
        sink = Sink(self, index, now, config.timeout)
        stage = self._stage(session, config.seed + index)
        channel = Channel(self.hub, session, stage, sink, owner=index)
        sink.channel = channel
        sink.scheduled = scheduled
        self.live[index] = sink
        self.order.append(sink)
        self.peak_live = max(self.peak_live, len(self.live))
        self.stats.started_late(self.hub.time() - scheduled)
        channel.start()

    def _finished(self, sink: Sink, code: int, problem: str = "") -> None:
        if sink.finished:
            return
        sink.finished = True
        channel = sink.channel
        assert channel is not None
        self.live.pop(sink.index, None)
        problem = problem or _problem(sink, code, channel.session)
        self.stats.per_session[sink.index] = self._counted(sink, problem)
        channel.close()
        sink.channel = None
        if self._wanted() and not self.filling:
            self._start_one(None)
        self._maybe_all_done()

    def _counted(self, sink: Sink, problem: str) -> dict[str, Any]:
        """Count how ``sink``'s session ended; its per-session record."""
        stats = self.stats
        if problem:
            stats.error(sink.index, problem)
            outcome = "error"
        elif sink.index in self._quitting:
            stats.interrupted += 1
            outcome = "interrupted"
        else:
            stats.completed += 1
            outcome = "completed"
        return {
            "index": sink.index,
            "seed": self.config.seed + sink.index,
            "scheduled": round(sink.scheduled - stats.started_at, 4),
            "start": round(sink.started - stats.started_at, 4),
            "late_start_ms": round(max(0.0, sink.started - sink.scheduled) * 1e3, 3),
            "events": sink.events,
            "bytes": sink.bytes,
            "answers": sink.answers,
            "outcome": outcome,
        }

    def _maybe_all_done(self) -> None:
        if not self.live and not self._wanted() and not self.filling:
            self.all_done.set()

    def stop(self) -> None:
        """End of the duration (or Ctrl-C): start nothing more, quit what runs."""
        if self.stopping:
            return
        self.stopping = True
        self._quitting = frozenset(self.live)
        grace = self.hub.time() + 5.0
        for sink in list(self.live.values()):
            sink.deadline = min(sink.deadline, grace)
            if sink.channel is not None:
                sink.channel.quit()
        self._maybe_all_done()

    def _check(self) -> None:
        """Every tick: sample the memory, end the sessions past their timeout."""
        self._sample_memory()
        now = self.hub.time()
        if self.stopping:
            overdue = [s for s in self.live.values() if s.deadline <= now]
        else:
            overdue = []
            while self.order and (self.order[0].finished or self.order[0].deadline <= now):
                sink = self.order.popleft()
                if not sink.finished:
                    overdue.append(sink)
        for sink in overdue:
            seconds = self.config.timeout if not self.stopping else 5.0
            self._finished(sink, 0, f"no done:true within {seconds:g} s")


def _problem(sink: Sink, code: int, session: SessionLike) -> str:
    """What went wrong with a session that ended with ``code`` ("" when nothing did)."""
    if sink.problem:
        return sink.problem
    if code:
        return f"exit code {code}"
    if sink.pending:
        return f"incomplete last line: {sink.pending[:80]!r}"
    if session.violations:
        return f"client mistake: {session.violations[0]}"
    if not session.done:
        return "ended without done:true"
    return ""
