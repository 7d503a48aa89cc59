"""The in-process runner: many sessions on one asyncio loop and one hub.

Owns: :class:`InProcess`, N sessions of one command and scenario, C at a time, on one
:class:`~simulator.runners.aio.Hub` (one timer heap); per session a
:class:`~simulator.runners.aio.Channel` whose endpoint (:class:`_Sink`) counts the bytes the
process would write and answers gates with a :class:`~simulator.tools.client.ReferenceClient`,
decoding a line only when ``waiting_for`` holds a gate (or a transport fault broke the
one-write-per-event rule). Lateness: how long after its deadline each timer event was
written (:class:`_MeasuredHub`); memory: the RSS the sessions added, per session at most
live at once. What exists before the clock starts (imports, ``--prebuild`` sessions) is
frozen out of the cyclic collector, as a long-running host would do; its pauses count.

Must not: change a session's behaviour (timers, bytes and faults are the hub's and the
session's), parse arguments or write to the terminal (progress goes to a callback).
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any

from simulator.runners.aio import Channel, Hub
from simulator.tools.client import ReferenceClient
from simulator.tools.load.common import EVENT_KEYS, LoadConfig, interrupt
from simulator.tools.load.stats import (
    GcPauses,
    Progress,
    Stats,
    build_summary,
    reset_peak_rss,
    status_kb,
    tick,
)

if TYPE_CHECKING:
    from simulator.core.session import Session
    from simulator.runners.live import LiveSession
    from simulator.scenario import Scenario

__all__ = ["InProcess"]

_NOT_GATES = frozenset({"quit", "cancel"})


class _MeasuredHub(Hub):
    """A hub whose lateness is taken when each timer fires, and whose wake-ups count.

    :class:`Hub` measures every timer of one wake-up against the time the wake-up
    began; under load, the last of thousands would look punctual. The time spent in
    the wake-up so far is added back here.
    """

    batch_start: float | None = None
    wakeups = 0

    def _fire(self) -> None:
        self.wakeups += 1
        self.batch_start = self.time()
        try:
            super()._fire()
        finally:
            self.batch_start = None


class _Sink:
    """The endpoint of one in-process session: counts, and answers gates."""

    __slots__ = (
        "answers",
        "bytes",
        "channel",
        "client",
        "closed",
        "deadline",
        "events",
        "finished",
        "index",
        "pending",
        "problem",
        "run",
        "started",
    )

    def __init__(self, run: InProcess, index: int, started: float, timeout: float) -> None:
        self.run = run
        self.index = index
        self.started = started
        self.deadline = started + timeout
        self.channel: Channel | None = None
        self.client: ReferenceClient | None = None
        self.events = 0
        self.bytes = 0
        self.answers = 0
        self.pending = b""
        self.problem = ""
        self.closed = False
        self.finished = False

    def write(self, data: bytes) -> bool:
        if self.closed:
            return True  # stdout points at /dev/null: written, and lost
        self.bytes += len(data)
        self.run.stats.bytes += len(data)
        if self.run.plain:  # one event, one write
            self.events += 1
            self.run.stats.events += 1
            assert self.channel is not None
            if self.run.needs_answer(self.channel.session.waiting_for):
                self._line(data)
            return True
        data = self.pending + data
        *complete, self.pending = data.split(b"\n")
        self.events += len(complete)
        self.run.stats.events += len(complete)
        for line in complete:
            self._line(line)
        return True

    def _line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            self.problem = self.problem or f"not a JSON line: {line[:80]!r}"
            return
        if not isinstance(event, dict) or any(key not in event for key in EVENT_KEYS):
            self.problem = self.problem or f"not an event: {line[:80]!r}"
            return
        if self.client is None:
            self.client = ReferenceClient()
        answer = self.client.answer(event)
        if answer is not None and self._reading():
            self.answers += 1
            self.run.hub.loop.call_soon(self._feed, answer[:-1])

    def _feed(self, line: bytes) -> None:
        if self.channel is not None and self._reading() and not self.finished:
            self.channel.feed(line)

    def _reading(self) -> bool:
        """The session still reads what the client sends (no stop_reading fault)."""
        return self.channel is not None and self.channel.reading

    def stderr(self, line: str) -> None:
        pass

    def close_output(self) -> None:
        self.closed = True
        self.problem = self.problem or "stdout closed before done:true"


class InProcess:
    """Sessions on one loop; see the module docstring."""

    def __init__(self, config: LoadConfig, scenario: Scenario, progress: Progress | None) -> None:
        from simulator.launch import parse_flags
        from statecharts import load_chart

        self.config = config
        self.scenario = scenario
        self.chart = load_chart(config.command)
        self.flags = parse_flags(config.command, config.args)
        self.progress = progress
        self.hub: _MeasuredHub
        self.stats: Stats
        self.live: dict[int, _Sink] = {}
        self.order: deque[_Sink] = deque()
        self.stopping = False
        self.filling = False
        self.peak_live = 0
        self._quitting: frozenset[int] = frozenset()
        self.all_done: asyncio.Event
        self._gates: dict[tuple[str, ...], bool] = {}
        self.plain = not scenario.faults
        """Without transport faults every write is exactly one event line."""
        self.prebuilt: deque[Session] = deque()

    def needs_answer(self, waiting_for: tuple[str, ...]) -> bool:
        """True when the reference client may answer an event with this waiting_for."""
        known = self._gates.get(waiting_for)
        if known is None:
            known = bool(set(waiting_for) - _NOT_GATES) or waiting_for == ("quit",)
            self._gates[waiting_for] = known
        return known

    def _on_fire(self, channel: LiveSession, lateness: float) -> None:
        start = self.hub.batch_start
        if start is not None:
            lateness += self.hub.time() - start
        self.stats.late(lateness)

    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.hub = _MeasuredHub(loop, on_fire=self._on_fire)
        self.all_done = asyncio.Event()
        self._warm_up()
        reset_peak_rss()
        rss_before = status_kb("self", "VmRSS") or 0
        created = self._prebuild()
        rss_created = status_kb("self", "VmRSS") or 0
        gc.freeze()  # what exists now (imports, prebuilt sessions) is never scanned again
        self.stats = Stats(loop.time)
        ticker = loop.create_task(tick(self.stats, self._live_count, self._check, self.progress))
        if self.config.duration is not None:
            loop.call_later(self.config.duration, self.stop)
        with interrupt(loop, self.stop), GcPauses().installed() as pauses:
            await self._fill(batch=64)
            await self.all_done.wait()
        ticker.cancel()
        gc.unfreeze()
        self.stats.sample(0)
        peak = status_kb("self", "VmHWM") or 0
        summary = build_summary(self.config, self.stats, lateness=True)
        summary["peak_rss_mb"] = round(peak / 1024, 1)
        summary["rss_before_mb"] = round(rss_before / 1024, 1)
        summary["peak_live"] = self.peak_live
        summary["gc"] = pauses.summary()
        summary["hub_wakeups"] = self.hub.wakeups
        summary["rss_per_session_kb"] = round((peak - rss_before) / max(self.peak_live, 1), 2)
        if created:
            summary["prebuilt"] = {
                "sessions": created[0],
                "seconds": round(created[1], 3),
                "rss_per_session_kb": round((rss_created - rss_before) / max(created[0], 1), 2),
            }
        return summary

    def _prebuild(self) -> tuple[int, float] | None:
        """With ``prebuild``: every session, created and not started; (count, seconds)."""
        from simulator.core.session import Session

        if not self.config.prebuild or self.config.sessions is None:
            return None
        begin = time.perf_counter()
        for index in range(self.config.sessions):
            self.prebuilt.append(
                Session(
                    self.chart,
                    self.scenario,
                    flags=self.flags,
                    seed=self.config.seed + index,
                    speed=self.config.speed,
                )
            )
        return self.config.sessions, time.perf_counter() - begin

    def _warm_up(self) -> None:
        """One session in virtual time first, so lazy imports and caches are not
        counted as the sessions' memory."""
        from simulator.core.session import Session
        from simulator.runners.output import OutputStage

        session = Session(self.chart, self.scenario, flags=self.flags, seed=self.config.seed)
        stage = OutputStage.for_session(session)
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

    def _wanted(self) -> bool:
        cap = self.config.sessions
        return not self.stopping and (cap is None or self.stats.started < cap)

    async def _fill(self, batch: int) -> None:
        """Start sessions up to the concurrency, yielding every ``batch`` to the timers;
        with ``ramp``, the first C are spread evenly over that many seconds."""
        concurrency = self.config.concurrency
        assert concurrency is not None
        ramp, begin = self.config.ramp, self.hub.time()
        self.filling = True  # _finished leaves the refilling to this loop meanwhile
        while self._wanted() and len(self.live) < concurrency:
            for _ in range(batch):
                if not self._wanted() or len(self.live) >= concurrency:
                    break
                if ramp and self.stats.started * ramp / concurrency > self.hub.time() - begin:
                    break
                self._start_one()
            due = begin + self.stats.started * ramp / concurrency - self.hub.time()
            await asyncio.sleep(max(0.0, due) if ramp else 0)
        self.filling = False
        self._maybe_all_done()

    def _start_one(self) -> None:
        from simulator.core.session import Session
        from simulator.runners.output import OutputStage

        index = self.stats.started
        self.stats.started += 1
        config = self.config
        if self.prebuilt:
            session = self.prebuilt.popleft()
        else:
            session = Session(
                self.chart,
                self.scenario,
                flags=self.flags,
                seed=config.seed + index,
                speed=config.speed,
            )
        sink = _Sink(self, index, self.hub.time(), config.timeout)
        channel = Channel(self.hub, session, OutputStage.for_session(session), sink, owner=index)
        sink.channel = channel
        self.live[index] = sink
        self.order.append(sink)
        self.peak_live = max(self.peak_live, len(self.live))
        channel.done.add_done_callback(lambda future: self._finished(sink, future.result()))
        channel.on_hang = partial(self._hung, sink)
        channel.start()

    def _hung(self, sink: _Sink) -> None:
        message = "hung (a hang fault): no done:true will come"
        self.hub.loop.call_soon(self._finished, sink, 0, message)

    def _finished(self, sink: _Sink, code: int, problem: str = "") -> None:
        if sink.finished:
            return
        sink.finished = True
        channel = sink.channel
        assert channel is not None
        self.live.pop(sink.index, None)
        session = channel.session
        problem = problem or sink.problem
        if not problem and code:
            problem = f"exit code {code}"
        if not problem and sink.pending:
            problem = f"incomplete last line: {sink.pending[:80]!r}"
        if not problem and session.violations:
            problem = f"client mistake: {session.violations[0]}"
        if not problem and not session.done:
            problem = "ended without done:true"
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
        stats.per_session[sink.index] = {
            "seed": self.config.seed + sink.index,
            "start": round(sink.started - stats.started_at, 4),
            "events": sink.events,
            "bytes": sink.bytes,
            "answers": sink.answers,
            "outcome": outcome,
        }
        channel.close()
        sink.channel = None
        if self._wanted() and not self.filling:
            self._start_one()
        self._maybe_all_done()

    def _maybe_all_done(self) -> None:
        if not self.live and not self._wanted():
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
        """Every tick: end the sessions past their timeout."""
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
