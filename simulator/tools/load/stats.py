"""What a load run measures, and the summary it ends with.

Owns: the lateness histogram and its percentiles (:class:`Histogram`), the counters and
the time series sampled every :data:`TICK` (:class:`Stats`, :func:`tick`), the cyclic
collector's pauses (:class:`GcPauses`), reading RSS from /proc (:func:`status_kb`,
:func:`reset_peak_rss`, :class:`RssSampler`), and the summary dict that is printed and
written as JSON (:func:`build_summary`).

Must not: start, drive or stop sessions or processes (the runners), nor write to the
terminal: :func:`tick` hands each point to a ``progress`` callback the caller gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.tools.load.common import LoadConfig

TICK = 0.5
"""Seconds per point of the time series (and per redraw of the progress bar)."""
MAX_MESSAGES = 20
"""Error messages kept in the summary; the count covers them all."""
Progress = Callable[["Stats", dict[str, Any]], None]
"""Called with the stats and the newest point of the time series, every :data:`TICK`."""


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


def reset_peak_rss() -> None:
    """Start this process's VmHWM afresh (Linux: ``5`` into clear_refs); best effort."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


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


# -- the time series -------------------------------------------------------------------


async def tick(
    stats: Stats,
    live: Callable[[], int],
    check: Callable[[], None] | None,
    progress: Progress | None,
) -> None:
    """Every :data:`TICK`: a point of the time series, then ``check``, then ``progress``."""
    while True:
        await asyncio.sleep(TICK)
        point = stats.sample(live())
        if check is not None:
            check()
        if progress is not None:
            progress(stats, point)


# -- the summary -----------------------------------------------------------------------


def build_summary(config: LoadConfig, stats: Stats, *, lateness: bool) -> dict[str, Any]:
    """The summary both modes share; each runner adds its own memory figures."""
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
