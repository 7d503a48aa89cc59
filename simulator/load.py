"""The load test: ``python -m simulator load COMMAND ...``, many sessions, measured.

Owns: the ``load`` command line, the two ways of running N sessions of one command
and scenario with C at a time (for a count, or for a duration), and the summary.

- **in-process**: one asyncio loop, one :class:`~simulator.aio.Hub` (one timer heap),
  a :class:`~simulator.aio.Channel` per session whose endpoint counts the bytes the
  process would write and answers gates with a :class:`~simulator.client.ReferenceClient`.
  A line is decoded only when the session's ``waiting_for`` holds a gate (or a
  transport fault broke the one-write-per-event rule). Lateness is how long after its
  deadline each timer event was written; memory is the RSS the sessions added, per
  session at most live at once. What exists before the clock starts (imports, and the
  sessions ``--prebuild`` creates) is frozen out of the cyclic collector, as a
  long-running host would do; the collector's pauses are reported.
- **process**: N real ``zread`` processes (an executable written to a temporary folder
  put first on PATH), the same client over real pipes; every transcript is checked
  (each line a JSON object with vm, waiting_for, done and error; the last done) and the
  peak RSS (``VmHWM``) of each process sampled. Lateness is not measured in this mode.

The summary is printed as a table and written as JSON (``--json``), with a time series
per half second that ``--plot`` draws (:mod:`simulator.plot`). Exit code: 0, 1 when a
session failed, 2 for a bad argument (one line on stderr).

Must not: change a session's behaviour. It drives sessions as a client would; timers,
bytes and faults are the runner's and the session's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from simulator.aio import Channel, Hub
from simulator.client import ReferenceClient

if TYPE_CHECKING:
    from simulator.scenario import Scenario
    from simulator.session import Session

__all__ = [
    "GcPauses",
    "Histogram",
    "LoadConfig",
    "LoadError",
    "RssSampler",
    "format_summary",
    "main",
    "parse_args",
    "run",
    "status_kb",
]

PROG = "zread-sim load"
TICK = 0.5
"""Seconds per point of the time series (and per redraw of the progress bar)."""
MAX_MESSAGES = 20
"""Error messages kept in the summary; the count covers them all."""
_KEYS = ("vm", "waiting_for", "done", "error")
_NOT_GATES = frozenset({"quit", "cancel"})


class LoadError(Exception):
    """A bad argument or an unusable scenario: one line on stderr, exit 2."""


@dataclass
class LoadConfig:
    """What to run; see ``python -m simulator load --help``."""

    command: str
    args: list[str] = field(default_factory=list)
    sessions: int | None = None
    concurrency: int | None = None
    duration: float | None = None
    scenario: str = "default"
    seed: int = 0
    speed: float = 1.0
    mode: str = "inprocess"
    timeout: float = 600.0
    progress: bool = False
    prebuild: bool = False
    """In-process, with --sessions: create every session before the clock starts."""
    ramp: float = 0.0
    """In-process: start the first ``concurrency`` sessions evenly over this many seconds."""


# -- statistics ------------------------------------------------------------------------


class Histogram:
    """Lateness counts in log buckets 2% wide: constant memory for any number of events."""

    _SCALE = 1.0 / math.log(1.02)
    SIZE = 1200  # 1.02**1200 microseconds is beyond any run

    def __init__(self) -> None:
        self.counts = [0] * self.SIZE
        self.total = 0
        self.max = 0.0

    @classmethod
    def bucket(cls, seconds: float) -> int:
        us = seconds * 1e6
        return 0 if us < 1.0 else min(cls.SIZE - 1, int(math.log(us) * cls._SCALE) + 1)

    def add_bucket(self, index: int, seconds: float) -> None:
        self.counts[index] += 1
        self.total += 1
        if seconds > self.max:
            self.max = seconds

    def percentile_ms(self, q: float) -> float:
        """The upper edge of the bucket holding the q-th percentile, capped by the max."""
        return _percentile_ms(enumerate(self.counts), self.total, q, self.max)


def _percentile_ms(
    items: Any, total: int, q: float, top: float = math.inf
) -> float:  # items: (bucket, count) in bucket order
    if total == 0:
        return 0.0
    rank = max(1, math.ceil(total * q / 100))
    seen = 0
    for index, count in items:
        seen += count
        if seen >= rank:
            edge = 0.0 if index == 0 else math.exp(index / Histogram._SCALE) * 1e-6
            return round(min(edge, top) * 1e3, 3)
    return round(top * 1e3, 3)


class Stats:
    """Counters shared by both modes, and the time series sampled every :data:`TICK`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started_at = clock()
        self.events = 0
        self.bytes = 0
        self.started = 0
        self.completed = 0
        self.interrupted = 0
        self.errors = 0
        self.messages: list[str] = []
        self.lateness = Histogram()
        self.bin: dict[int, int] = {}
        self.series: list[dict[str, Any]] = []
        self.per_session: dict[int, dict[str, Any]] = {}
        self._last = (self.started_at, 0, 0)

    @property
    def finished(self) -> int:
        return self.completed + self.interrupted + self.errors

    def error(self, index: int, message: str) -> None:
        self.errors += 1
        if len(self.messages) < MAX_MESSAGES:
            self.messages.append(f"session {index}: {message}")

    def late(self, seconds: float) -> None:
        index = Histogram.bucket(seconds)
        self.lateness.add_bucket(index, seconds)
        self.bin[index] = self.bin.get(index, 0) + 1

    def sample(self, live: int) -> dict[str, Any]:
        """Close the current point of the time series; it."""
        now = self.clock()
        then, events, finished = self._last
        span = max(now - then, 1e-9)
        window, self.bin = self.bin, {}
        total = sum(window.values())
        point = {
            "t": round(now - self.started_at, 3),
            "events": self.events - events,
            "events_per_s": round((self.events - events) / span, 1),
            "sessions_done": self.finished - finished,
            "done_total": self.finished,
            "live": live,
            "p99_ms": _percentile_ms(sorted(window.items()), total, 99) if total else None,
        }
        self.series.append(point)
        self._last = (now, self.events, self.finished)
        return point


class GcPauses:
    """The cyclic garbage collector's pauses while installed: a lateness nobody schedules."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.total = 0.0
        self.max = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        pause = time.perf_counter() - self._began
        self.collections[info["generation"]] += 1
        self.total += pause
        self.max = max(self.max, pause)

    @contextlib.contextmanager
    def installed(self) -> Iterator[GcPauses]:
        gc.callbacks.append(self)
        try:
            yield self
        finally:
            gc.callbacks.remove(self)

    def summary(self) -> dict[str, Any]:
        return {
            "collections": self.collections,
            "max_pause_ms": round(self.max * 1e3, 3),
            "total_pause_ms": round(self.total * 1e3, 3),
        }


# -- memory ----------------------------------------------------------------------------


def status_kb(pid: int | str, key: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or None if unreadable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key.encode() + b":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_peak_rss() -> None:
    """Start this process's VmHWM afresh (Linux: ``5`` into clear_refs); best effort."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


# -- in-process ------------------------------------------------------------------------


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
        "reading",
        "run",
        "started",
    )

    def __init__(self, run: _InProcess, index: int, started: float, timeout: float) -> None:
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
        self.reading = True
        self.finished = False

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self.bytes += len(data)
        self.run.stats.bytes += len(data)
        if self.run.plain:  # one event, one write
            self.events += 1
            self.run.stats.events += 1
            assert self.channel is not None
            if self.run.needs_answer(self.channel.session.waiting_for):
                self._line(data)
            return
        data = self.pending + data
        *complete, self.pending = data.split(b"\n")
        self.events += len(complete)
        self.run.stats.events += len(complete)
        for line in complete:
            self._line(line)

    def _line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            self.problem = self.problem or f"not a JSON line: {line[:80]!r}"
            return
        if not isinstance(event, dict) or any(key not in event for key in _KEYS):
            self.problem = self.problem or f"not an event: {line[:80]!r}"
            return
        if self.client is None:
            self.client = ReferenceClient()
        answer = self.client.answer(event)
        if answer is not None and self.reading:
            self.answers += 1
            self.run.hub.loop.call_soon(self._feed, answer[:-1])

    def _feed(self, line: bytes) -> None:
        if self.channel is not None and self.reading and not self.finished:
            self.channel.feed(line)

    def stderr(self, line: str) -> None:
        pass

    def exit(self, code: int) -> None:
        pass  # the channel's done future carries the code

    def close_output(self) -> None:
        self.closed = True
        self.problem = self.problem or "stdout closed before done:true"

    def stop_reading(self) -> None:
        self.reading = False


class _InProcess:
    """Sessions on one loop; see the module docstring."""

    def __init__(self, config: LoadConfig, scenario: Scenario, out: IO[str] | None) -> None:
        from simulator.cli import parse_flags
        from statecharts import load_chart

        self.config = config
        self.scenario = scenario
        self.chart = load_chart(config.command)
        self.flags = parse_flags(config.command, config.args)
        self.out = out
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

    def _on_fire(self, channel: Channel, lateness: float) -> None:
        start = self.hub.batch_start
        if start is not None:
            lateness += self.hub.time() - start
        self.stats.late(lateness)

    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.hub = _MeasuredHub(loop, on_fire=self._on_fire)
        self.all_done = asyncio.Event()
        self._warm_up()
        _reset_peak_rss()
        rss_before = status_kb("self", "VmRSS") or 0
        created = self._prebuild()
        rss_created = status_kb("self", "VmRSS") or 0
        gc.freeze()  # what exists now (imports, prebuilt sessions) is never scanned again
        self.stats = Stats(loop.time)
        ticker = loop.create_task(_tick(self.stats, self._live_count, self._check, self.out))
        if self.config.duration is not None:
            loop.call_later(self.config.duration, self.stop)
        with _interrupt(loop, self.stop), GcPauses().installed() as pauses:
            await self._fill(batch=64)
            await self.all_done.wait()
        ticker.cancel()
        gc.unfreeze()
        self.stats.sample(0)
        peak = status_kb("self", "VmHWM") or 0
        summary = _summary(self.config, self.stats, lateness=True)
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
        from simulator.session import Session

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
        from simulator.session import Session
        from simulator.wire import Wire

        session = Session(self.chart, self.scenario, flags=self.flags, seed=self.config.seed)
        wire = Wire(session)
        wire.render(session.start())
        for _ in range(1000):
            deadline = session.next_deadline()
            if deadline is None:
                break
            wire.render(session.advance(deadline, limit=1))
        if not session.done:
            wire.render([session.quit()])
        wire.close()

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
        from simulator.session import Session
        from simulator.wire import Wire

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
        channel = Channel(self.hub, session, Wire(session, owner=index), sink)
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


async def _tick(
    stats: Stats, live: Callable[[], int], check: Callable[[], None] | None, out: IO[str] | None
) -> None:
    while True:
        await asyncio.sleep(TICK)
        point = stats.sample(live())
        if check is not None:
            check()
        if out is not None:
            p99 = point["p99_ms"]
            late = f"  p99 {p99:.1f} ms" if p99 is not None else ""
            out.write(
                f"\r{stats.finished}/{stats.started} sessions done, {point['live']} live, "
                f"{point['events_per_s']:,.0f} events/s{late}   "
            )
            out.flush()


@contextlib.contextmanager
def _interrupt(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> Any:
    """Ctrl-C ends the run as the duration does: what runs quits, the summary follows."""
    try:
        loop.add_signal_handler(signal.SIGINT, stop)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


# -- processes -------------------------------------------------------------------------


class RssSampler:
    """Reads VmHWM of the processes it watches every :attr:`period` seconds, on a thread.

    A thread, because the loop can be busy (spawning is synchronous) while a short
    process writes its last event and exits. VmHWM only grows within one program, so
    the latest sample is kept (one taken before ``exec`` would be the parent's).
    """

    period = 0.05

    def __init__(self) -> None:
        self._latest: dict[int, int | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def watch(self, pid: int) -> None:
        with self._lock:
            self._latest[pid] = None  # now it is the zread script's shell; python comes next

    def forget(self, pid: int) -> int | None:
        """The last peak RSS (kB) read of ``pid``; it is no longer watched."""
        with self._lock:
            return self._latest.pop(pid, None)

    def _sample(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                pids = list(self._latest)
            for pid in pids:
                value = status_kb(pid, "VmHWM")
                if value is not None:
                    with self._lock:
                        if pid in self._latest:
                            self._latest[pid] = value

    @contextlib.contextmanager
    def running(self) -> Iterator[RssSampler]:
        thread = threading.Thread(target=self._sample, name="rss sampler", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()


class _Processes:
    """N ``zread`` processes, C at a time; see the module docstring."""

    def __init__(self, config: LoadConfig, scenario_arg: str, out: IO[str] | None) -> None:
        self.config = config
        self.scenario_arg = scenario_arg
        self.out = out
        self.stats: Stats
        self.live: dict[int, asyncio.subprocess.Process] = {}
        self.rss_kb: list[int] = []
        self.stopping = False
        self.quitting: set[int] = set()
        self.sampler = RssSampler()

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        for index, proc in self.live.items():
            self.quitting.add(index)
            if proc.stdin is not None:
                proc.stdin.close()

    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.stats = Stats(loop.time)
        assert self.config.concurrency is not None
        slots = asyncio.Semaphore(self.config.concurrency)
        with tempfile.TemporaryDirectory(prefix="zread-load-") as folder:
            _write_zread(Path(folder))
            env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
            ticker = loop.create_task(_tick(self.stats, lambda: len(self.live), None, self.out))
            if self.config.duration is not None:
                loop.call_later(self.config.duration, self.stop)
            tasks: list[asyncio.Task[None]] = []
            with _interrupt(loop, self.stop), self.sampler.running():
                while not self.stopping and (
                    self.config.sessions is None or self.stats.started < self.config.sessions
                ):
                    await slots.acquire()
                    if self.stopping:
                        break
                    index = self.stats.started
                    self.stats.started += 1
                    task = loop.create_task(self._one(index, env))
                    task.add_done_callback(lambda _: slots.release())
                    tasks.append(task)
                    tasks = [t for t in tasks if not t.done()] if len(tasks) > 1024 else tasks
                await asyncio.gather(*tasks)
            ticker.cancel()
        self.stats.sample(0)
        summary = _summary(self.config, self.stats, lateness=False)
        rss = sorted(self.rss_kb)
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        summary["rss_per_process_mb"] = (
            {
                "min": round(rss[0] / 1024, 1),
                "median": round(rss[len(rss) // 2] / 1024, 1),
                "max": round(rss[-1] / 1024, 1),
                "sampled": len(rss),
            }
            if rss
            else None
        )
        summary["rss_per_session_kb"] = rss[len(rss) // 2] if rss else None
        if rss:
            summary["peak_rss_mb"] = round(rss[-1] / 1024, 1)
        else:  # no /proc: the largest reaped child, which counts its forked copy of this
            summary["peak_rss_mb"] = round(children / 1024, 1)  # process before exec
            summary["peak_rss_note"] = "getrusage(RUSAGE_CHILDREN): includes the fork"

        summary["load_tool_peak_rss_mb"] = round((status_kb("self", "VmHWM") or 0) / 1024, 1)
        return summary

    async def _one(self, index: int, env: dict[str, str]) -> None:
        config = self.config
        argv = [config.command, "--stdio", *config.args, "--scenario", self.scenario_arg]
        argv += ["--seed", str(config.seed + index), "--speed", repr(config.speed)]
        events = size = 0
        problem = ""
        started = self.stats.clock()
        try:
            proc = await asyncio.create_subprocess_exec(
                "zread",
                *argv,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                limit=64 << 20,
            )
        except OSError as error:
            self.stats.error(index, f"cannot start zread: {error}")
            return
        self.live[index] = proc
        self.sampler.watch(proc.pid)
        assert proc.stdout is not None
        assert proc.stdin is not None
        client = ReferenceClient()
        last: dict[str, Any] | None = None
        try:
            async with asyncio.timeout(config.timeout):
                while line := await proc.stdout.readline():
                    events += 1
                    size += len(line)
                    self.stats.events += 1
                    self.stats.bytes += len(line)
                    event, why = _check_line(line, last)
                    problem = problem or why
                    if event is None:
                        continue
                    last = event
                    answer = client.answer(event)
                    if answer is not None and not proc.stdin.is_closing():
                        with contextlib.suppress(ConnectionError):
                            proc.stdin.write(answer)
                            await proc.stdin.drain()
                proc.stdin.close()
                code = await proc.wait()
        except TimeoutError:
            problem = problem or f"no done:true within {config.timeout:g} s"
            proc.kill()
            code = await proc.wait()
        self.live.pop(index, None)
        hwm = self.sampler.forget(proc.pid)
        if hwm is not None:
            self.rss_kb.append(hwm)
        if not problem and code:
            problem = f"exit code {code}"
        if not problem and (last is None or not last["done"]):
            problem = "the transcript ended without done:true"
        if problem:
            self.stats.error(index, problem)
            outcome = "error"
        elif index in self.quitting:
            self.stats.interrupted += 1
            outcome = "interrupted"
        else:
            self.stats.completed += 1
            outcome = "completed"
        self.stats.per_session[index] = {
            "seed": config.seed + index,
            "start": round(started - self.stats.started_at, 4),
            "events": events,
            "bytes": size,
            "outcome": outcome,
            "rss_kb": hwm,
        }


def _write_zread(folder: Path) -> None:
    """The ``zread`` executable of the pytest plugin (the same script without pytest)."""
    try:
        from simulator.pytest_plugin import write_zread_executable
    except ImportError:  # pytest is a test extra; the script is two lines
        root = Path(__file__).resolve().parent.parent
        script = folder / "zread"
        script.write_text(
            f'#!/bin/sh\nPYTHONPATH="{root}${{PYTHONPATH:+:$PYTHONPATH}}" '
            f'exec "{sys.executable}" -m simulator "$@"\n'
        )
        script.chmod(0o755)
    else:
        write_zread_executable(folder)


def _check_line(line: bytes, last: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """The event on ``line`` and '' , or None and what is wrong with the line."""
    if last is not None and last.get("done"):
        return None, f"a line after done:true: {line[:80]!r}"
    if not line.endswith(b"\n"):
        return None, f"incomplete last line: {line[:80]!r}"
    try:
        event = json.loads(line)
    except ValueError:
        return None, f"not a JSON line: {line[:80]!r}"
    if not isinstance(event, dict) or any(key not in event for key in _KEYS):
        return None, f"not an event (keys {', '.join(_KEYS)}): {line[:80]!r}"
    return event, ""


# -- the summary -----------------------------------------------------------------------


def _summary(config: LoadConfig, stats: Stats, *, lateness: bool) -> dict[str, Any]:
    seconds = max(stats.clock() - stats.started_at, 1e-9)
    hist = stats.lateness
    return {
        "command": config.command,
        "args": config.args,
        "mode": config.mode,
        "scenario": config.scenario,
        "seed": config.seed,
        "speed": config.speed,
        "concurrency": config.concurrency,
        "duration": config.duration,
        "ramp": config.ramp,
        "sessions": stats.started,
        "completed": stats.completed,
        "interrupted": stats.interrupted,
        "errors": stats.errors,
        "error_messages": stats.messages,
        "events": stats.events,
        "bytes": stats.bytes,
        "seconds": round(seconds, 3),
        "events_per_s": round(stats.events / seconds, 1),
        "lateness_ms": {
            "p50": hist.percentile_ms(50),
            "p95": hist.percentile_ms(95),
            "p99": hist.percentile_ms(99),
            "max": round(hist.max * 1e3, 3),
            "timer_events": hist.total,
        }
        if lateness
        else None,
        "series": stats.series,
        "per_session": [stats.per_session[i] for i in sorted(stats.per_session)],
    }


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a readable table."""
    args = " ".join([summary["command"], *summary["args"]])
    mode = "in-process" if summary["mode"] == "inprocess" else "processes"
    rows = [
        ("run", f"{args}, scenario {summary['scenario']}, speed {summary['speed']:g}, {mode}"),
        (
            "sessions",
            f"{summary['sessions']} (completed {summary['completed']}, interrupted "
            f"{summary['interrupted']}, errors {summary['errors']}), "
            f"concurrency {summary['concurrency']}",
        ),
        (
            "events",
            f"{summary['events']:,} in {summary['seconds']:.2f} s = "
            f"{summary['events_per_s']:,.0f} events/s ({summary['bytes'] / 1e6:,.1f} MB)",
        ),
    ]
    late = summary["lateness_ms"]
    if late is None:
        rows.append(("lateness", "not measured in process mode"))
    else:
        rows.append(
            (
                "lateness",
                f"p50 {late['p50']:.2f} ms  p95 {late['p95']:.2f} ms  p99 {late['p99']:.2f} ms  "
                f"max {late['max']:.2f} ms ({late['timer_events']:,} timer events)",
            )
        )
    if summary["mode"] == "inprocess":
        rows.append(
            (
                "memory",
                f"peak RSS {summary['peak_rss_mb']:.1f} MB, "
                f"{summary['rss_per_session_kb']:.1f} KB per session "
                f"({summary['peak_live']} live at most)",
            )
        )
    else:
        rss = summary["rss_per_process_mb"]
        text = (
            "no sample"
            if rss is None
            else (
                f"RSS per process median {rss['median']:.1f} MB, max {rss['max']:.1f} MB "
                f"({rss['sampled']} sampled)"
            )
        )
        rows.append(("memory", text))
    for message in summary["error_messages"]:
        rows.append(("error", message))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name:<{width}}  {text}\n" for name, text in rows)


# -- the command line ------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise LoadError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _number(minimum: float, strict: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            sign = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"expected a number {sign} {minimum:g}, got {text!r}")
        return value

    return parse


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Run many simulated zread sessions and measure them. zread's own flags "
        "go after -- (or one by one with --arg=FLAG).",
    )
    parser.add_argument("command", help="the zread command (generate, login, ...)")
    parser.add_argument("--arg", action="append", default=[], metavar="FLAG", help="a zread flag")
    parser.add_argument("--sessions", type=_positive_int, help="how many sessions in all")
    parser.add_argument(
        "--concurrency", type=_positive_int, help="sessions at once (default: --sessions)"
    )
    parser.add_argument(
        "--duration",
        type=_number(0, True),
        metavar="SECONDS",
        help="stop after this long: start no more, quit what runs",
    )
    parser.add_argument("--scenario", default="default", metavar="NAME|PATH")
    parser.add_argument("--seed", type=int, default=0, help="session i gets seed + i")
    parser.add_argument("--speed", type=_number(0, False), default=1.0)
    parser.add_argument("--mode", choices=("inprocess", "process"), default="inprocess")
    parser.add_argument(
        "--timeout",
        type=_number(0, True),
        default=600.0,
        metavar="SECONDS",
        help="a session without done:true by then is an error (default: 600)",
    )
    parser.add_argument(
        "--prebuild",
        action="store_true",
        help="in-process with --sessions: create every session before the clock starts",
    )
    parser.add_argument(
        "--ramp",
        type=_number(0, False),
        default=0.0,
        metavar="SECONDS",
        help="in-process: start the first C sessions evenly over SECONDS (default: at once)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the summary as JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw throughput and lateness (.svg, .png)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="always show it")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[LoadConfig, str | None, str | None]:
    """(the config, the JSON path, the plot path); LoadError says what is wrong."""
    from simulator.cli import parse_flags
    from simulator.plot import PlotError, check_plot_path

    argv = list(argv)
    zread_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, zread_args = argv[:cut], argv[cut + 1 :]
    args = _parser().parse_args(argv)
    zread_args = [*args.arg, *zread_args]
    try:
        parse_flags(args.command, zread_args)
    except ValueError as error:
        raise LoadError(f"{args.command}: {error}") from None
    if args.sessions is None and args.duration is None:
        raise LoadError("give --sessions N, --duration SECONDS, or both")
    if args.sessions is None and args.concurrency is None:
        raise LoadError("--duration without --sessions needs --concurrency")
    for path in (args.json, args.plot):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise LoadError(f"{path}: no such directory")
    if args.plot is not None:
        try:
            check_plot_path(args.plot)
        except PlotError as error:
            raise LoadError(str(error)) from None
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    config = LoadConfig(
        command=args.command,
        args=zread_args,
        sessions=args.sessions,
        concurrency=args.concurrency or args.sessions,
        duration=args.duration,
        scenario=args.scenario,
        seed=args.seed,
        speed=args.speed,
        mode=args.mode,
        timeout=args.timeout,
        progress=progress,
        prebuild=args.prebuild,
        ramp=args.ramp,
    )
    return config, args.json, args.plot


def run(config: LoadConfig, progress: IO[str] | None = None) -> dict[str, Any]:
    """Run the load test ``config`` describes; the summary (LoadError if unusable)."""
    from simulator.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(config.scenario)
    except ScenarioError as error:
        raise LoadError(str(error)) from None
    if config.concurrency is None:
        config.concurrency = config.sessions
    if config.mode == "process":
        path = os.path.abspath(config.scenario)
        scenario_arg = path if os.path.isfile(path) else config.scenario
        return asyncio.run(_Processes(config, scenario_arg, progress).run())
    return asyncio.run(_InProcess(config, scenario, progress).run())


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulator load ...``; returns the exit code (2: a bad argument)."""
    from simulator.plot import PlotError, write_plot

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["load"]:
        argv = argv[1:]
    try:
        config, json_path, plot_path = parse_args(argv)
        summary = run(config, sys.stderr if config.progress else None)
    except LoadError as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    except SystemExit as exit:  # --help
        return int(exit.code or 0)
    if config.progress:
        sys.stderr.write("\n")
    sys.stdout.write(format_summary(summary))
    try:
        if json_path is not None:
            with open(json_path, "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
                f.write("\n")
        if plot_path is not None:
            write_plot(summary, plot_path)
    except (OSError, PlotError) as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
