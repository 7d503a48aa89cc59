"""What a load run measures, and the summary it ends with.

Owns: the lateness histogram, its percentiles and its exact merge (:class:`Histogram`),
the counters and the time series sampled every :data:`TICK` (:class:`Stats`,
:func:`tick`), the cyclic collector's pauses (:class:`GcPauses`), and the summary dict
that is printed and written as JSON (:func:`build_summary`). Memory (RSS) is
:mod:`simulator.tools.load.memory`'s.

The histogram is this module's own, not HdrHistogram's (``hdrhistogram`` on PyPI): its
buckets are fixed (2% wide from one microsecond, :data:`Histogram.SCHEME`), so the
histograms of several workers or hosts merge exactly by adding counts, and its JSON
form (sparse ``[bucket, count]`` pairs, validated with msgspec, already a dependency)
is a few hundred bytes. HdrHistogram would add a dependency for the same exactness.

Must not: read memory (:mod:`simulator.tools.load.memory`); start, drive or stop
sessions or processes (the runners); nor write to the terminal: :func:`tick` hands each
point to a ``progress`` callback the caller gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from simulator.tools.load.common import LoadConfig

TICK = 0.5
"""Seconds per point of the time series (and per redraw of the progress bar)."""
MAX_MESSAGES = 20
"""Error messages kept in the summary; the count covers them all."""
Progress = Callable[["Stats", dict[str, Any]], None]
"""Called with the stats and the newest point of the time series, every :data:`TICK`."""


# -- statistics ------------------------------------------------------------------------


class HistogramData(msgspec.Struct, forbid_unknown_fields=True):
    """A :class:`Histogram` as JSON: its scheme, its non-empty buckets, its max."""

    scheme: str
    buckets: list[tuple[int, int]]
    """(bucket, count) of each non-empty bucket, in bucket order."""
    max_s: float


class Histogram:
    """Lateness counts in log buckets 2% wide: constant memory for any number of events."""

    _SCALE = 1.0 / math.log(1.02)
    SIZE = 1200  # 1.02**1200 microseconds is beyond any run
    SCHEME = "log1.02-us-1200"
    """The bucket layout; histograms merge only with the same one."""

    def __init__(self) -> None:
        self.counts = [0] * self.SIZE
        self.total = 0
        self.max = 0.0

    @classmethod
    def bucket(cls, seconds: float) -> int:
        us = seconds * 1e6
        return 0 if us < 1.0 else min(cls.SIZE - 1, int(math.log(us) * cls._SCALE) + 1)

    def add(self, seconds: float) -> None:
        self.add_bucket(self.bucket(seconds), seconds)

    def add_bucket(self, index: int, seconds: float) -> None:
        self.counts[index] += 1
        self.total += 1
        if seconds > self.max:
            self.max = seconds

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s counts to these: exact, as the buckets are the same."""
        for index, count in enumerate(other.counts):
            if count:
                self.counts[index] += count
        self.total += other.total
        self.max = max(self.max, other.max)

    def percentile_ms(self, q: float) -> float:
        """The upper edge of the bucket holding the q-th percentile, capped by the max."""
        return bins_percentile_ms(enumerate(self.counts), self.total, q, self.max)

    def figures(self) -> dict[str, float]:
        """p50, p95, p99 and max, in milliseconds."""
        return {
            "p50": self.percentile_ms(50),
            "p95": self.percentile_ms(95),
            "p99": self.percentile_ms(99),
            "max": round(self.max * 1e3, 3),
        }

    def to_json(self) -> dict[str, Any]:
        buckets = [[index, count] for index, count in enumerate(self.counts) if count]
        return {"scheme": self.SCHEME, "buckets": buckets, "max_s": self.max}

    @classmethod
    def from_json(cls, data: object) -> Histogram:
        """The histogram :meth:`to_json` wrote; ValueError says what is wrong with it."""
        try:
            wire = msgspec.convert(data, HistogramData)
        except msgspec.ValidationError as error:
            raise ValueError(f"not a lateness histogram: {error}") from None
        if wire.scheme != cls.SCHEME:
            raise ValueError(f"lateness buckets {wire.scheme!r}, not {cls.SCHEME!r}")
        hist = cls()
        for index, count in wire.buckets:
            if not 0 <= index < cls.SIZE or count < 0:
                raise ValueError(f"no such lateness bucket: [{index}, {count}]")
            hist.counts[index] += count
            hist.total += count
        if not math.isfinite(wire.max_s) or wire.max_s < 0:
            raise ValueError(f"not a lateness maximum: {wire.max_s!r}")
        hist.max = wire.max_s
        return hist

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return (self.counts, self.total, self.max) == (other.counts, other.total, other.max)

    __hash__ = None  # type: ignore[assignment]


def bins_percentile_ms(
    items: Iterable[tuple[int, int]], total: int, q: float, top: float = math.inf
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
    """Counters shared by both modes, and the time series sampled every :data:`TICK`.

    Lateness has two kinds of sample: how late a session started against its scheduled
    start (:meth:`started_late`, the lateness of its first event) and how late each
    timer fired against its deadline (:meth:`late`); both go to one histogram.
    """

    def __init__(self, clock: Callable[[], float], origin: float | None = None) -> None:
        self.clock = clock
        self.started_at = clock() if origin is None else origin
        self.events = 0
        self.bytes = 0
        self.started = 0
        self.completed = 0
        self.interrupted = 0
        self.errors = 0
        self.timer_events = 0
        self.starts = 0
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
        """A timer fired ``seconds`` after its deadline."""
        self.timer_events += 1
        self._sample(seconds)

    def started_late(self, seconds: float) -> None:
        """A session started (wrote its first event) ``seconds`` after its schedule."""
        self.starts += 1
        self._sample(max(0.0, seconds))

    def _sample(self, seconds: float) -> None:
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
        bins = sorted(window.items())
        point = {
            "t": round(now - self.started_at, 3),
            "events": self.events - events,
            "events_per_s": round((self.events - events) / span, 1),
            "sessions_done": self.finished - finished,
            "done_total": self.finished,
            "live": live,
            "p99_ms": bins_percentile_ms(bins, total, 99) if total else None,
            "late_bins": [list(item) for item in bins],
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


# -- the time series -------------------------------------------------------------------


async def tick(
    stats: Stats,
    live: Callable[[], int],
    check: Callable[[], None] | None,
    progress: Progress | None,
) -> None:
    """Every :data:`TICK`: a point of the time series, then ``check``, then ``progress``.

    The points fall on a grid from ``stats.started_at`` (not one sleep after the other,
    which drifts), so the series of workers that share an origin line up point by point.
    """
    count = 0
    while True:
        count += 1
        await asyncio.sleep(max(0.0, stats.started_at + count * TICK - stats.clock()))
        # A loop too busy to wake in time skips the grid points it missed: one point a
        # slot, t in [count * TICK, (count + 1) * TICK).
        count = max(count, int((stats.clock() - stats.started_at) / TICK))
        point = stats.sample(live())
        if check is not None:
            check()
        if progress is not None:
            progress(stats, point)


# -- the summary -----------------------------------------------------------------------


def build_summary(config: LoadConfig, stats: Stats, *, lateness: bool) -> dict[str, Any]:
    """The summary both modes share; each runner adds its own memory figures."""
    import socket

    seconds = max(stats.clock() - stats.started_at, 1e-9)
    hist = stats.lateness
    return {
        "host": socket.gethostname(),
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
        "lateness_ms": lateness_figures(hist, stats.timer_events, stats.starts)
        if lateness
        else None,
        "lateness_histogram": hist.to_json() if lateness else None,
        "series": stats.series,
        "per_session": [stats.per_session[i] for i in sorted(stats.per_session)],
    }


def lateness_figures(hist: Histogram, timer_events: int, starts: int) -> dict[str, Any]:
    """The ``lateness_ms`` of a summary: percentiles, the max, and what was counted."""
    return {**hist.figures(), "samples": hist.total, "timer_events": timer_events, "starts": starts}
