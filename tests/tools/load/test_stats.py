"""Tests for simulator.tools.load.stats: the lateness histogram, the counters and time
series, the collector's pauses, and the summary.

Figures are checked on known data; clocks are plain functions a test moves by hand
(Stats takes its clock as an argument).
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

import pytest

from simulator.tools.load import MAX_MESSAGES, TICK, GcPauses, Histogram, LoadConfig, Stats
from simulator.tools.load.stats import build_summary, tick


class Clock:
    """A clock a test sets by hand."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def histogram(*seconds: float) -> Histogram:
    hist = Histogram()
    for value in seconds:
        hist.add_bucket(Histogram.bucket(value), value)
    return hist


# -- the histogram ----------------------------------------------------------------------


def test_histogram_percentiles_are_upper_edges_capped_by_the_max() -> None:
    hist = Histogram()
    for ms in range(1, 101):
        seconds = ms / 1000
        hist.add_bucket(Histogram.bucket(seconds), seconds)
    assert hist.total == 100
    for q, exact in ((50, 50.0), (95, 95.0), (99, 99.0)):
        assert exact <= hist.percentile_ms(q) <= exact * 1.021
    assert hist.percentile_ms(100) == 100.0 == hist.max * 1000
    assert Histogram().percentile_ms(99) == 0.0
    assert Histogram.bucket(0.0) == 0 and Histogram.bucket(1e9) == Histogram.SIZE - 1


def test_buckets_are_two_percent_wide_from_one_microsecond() -> None:
    assert Histogram.bucket(0.99e-6) == 0  # under a microsecond: punctual
    assert Histogram.bucket(1e-6) == 1
    previous = 0
    value = 1e-6
    while value < 100.0:  # buckets only grow with the value
        index = Histogram.bucket(value)
        assert index >= previous
        previous = index
        value *= 1.005
    # 2% wide: 1 ms and 1.05 ms are two or three buckets apart, never the same one.
    assert 2 <= Histogram.bucket(0.00105) - Histogram.bucket(0.001) <= 3


@pytest.mark.parametrize("seconds", [0.001, 0.0123, 0.25, 1.5, 42.0])
def test_a_percentile_is_within_two_percent_above_the_value(seconds: float) -> None:
    # The smaller sample holds the median; the larger one is the max, so no cap applies.
    hist = histogram(seconds, seconds * 10)
    reported = hist.percentile_ms(50)
    assert seconds * 1e3 <= reported + 5e-4  # rounded to the microsecond
    assert reported <= seconds * 1e3 * 1.02 + 5e-4


def test_percentile_ranks_round_up() -> None:
    # 90 samples at 1 ms, 10 at 100 ms: the 90th is the last of the fast ones, the 91st
    # the first slow one; the rank of q is ceil(total * q / 100).
    hist = histogram(*[0.001] * 90, *[0.1] * 10)
    fast = hist.percentile_ms(90)
    assert 1.0 <= fast <= 1.02
    assert hist.percentile_ms(50) == fast == hist.percentile_ms(1)
    assert hist.percentile_ms(90.01) == 100.0 == hist.percentile_ms(99)  # capped by the max
    assert hist.percentile_ms(100) == 100.0
    assert (hist.total, hist.max) == (100, 0.1)
    assert sum(hist.counts) == 100


def test_a_punctual_timer_is_zero_late() -> None:
    hist = histogram(0.0, 0.0, 0.0)
    assert hist.percentile_ms(99) == 0.0 and hist.max == 0.0


def test_merged_histograms_equal_the_histogram_of_all_samples() -> None:
    a = [0.0, 1e-6, 0.0004, 0.003, 0.003, 0.25]
    b = [0.00005, 0.003, 0.8, 12.0]
    merged = histogram(*a)
    merged.merge(histogram(*b))
    assert merged == histogram(*a, *b)
    assert merged.total == 10 and merged.max == 12.0


def test_a_histogram_goes_through_json_unchanged() -> None:
    hist = histogram(0.001, 0.001, 0.02, 3.0)
    data = json.loads(json.dumps(hist.to_json()))
    assert data["scheme"] == Histogram.SCHEME
    assert sum(count for _, count in data["buckets"]) == 4  # sparse: non-empty buckets
    assert Histogram.from_json(data) == hist
    assert Histogram.from_json(Histogram().to_json()) == Histogram()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([1, 2], "not a lateness histogram"),
        ({"scheme": "log1.02-us-1200", "buckets": [[1, 1]]}, "max_s"),
        ({"scheme": "hdr", "buckets": [], "max_s": 0.0}, "lateness buckets 'hdr'"),
        ({"scheme": "log1.02-us-1200", "buckets": [[5000, 1]], "max_s": 0}, "no such"),
        ({"scheme": "log1.02-us-1200", "buckets": [[3, -1]], "max_s": 0}, "no such"),
        ({"scheme": "log1.02-us-1200", "buckets": [["x", 1]], "max_s": 0}, "Expected `int`"),
        ({"scheme": "log1.02-us-1200", "buckets": [], "max_s": -1.0}, "not a lateness max"),
    ],
)
def test_a_bad_histogram_is_refused(data: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Histogram.from_json(data)


# -- counters and the time series ---------------------------------------------------------


def test_errors_are_all_counted_but_only_the_first_messages_kept() -> None:
    stats = Stats(Clock())
    for index in range(MAX_MESSAGES + 5):
        stats.error(index, f"broke {index}")
    assert stats.errors == MAX_MESSAGES + 5
    assert len(stats.messages) == MAX_MESSAGES
    assert stats.messages[0] == "session 0: broke 0"
    assert stats.messages[-1] == f"session {MAX_MESSAGES - 1}: broke {MAX_MESSAGES - 1}"


def test_finished_counts_every_outcome() -> None:
    stats = Stats(Clock())
    stats.completed, stats.interrupted = 3, 2
    stats.error(0, "x")
    assert stats.finished == 6


def test_a_sample_closes_one_point_of_the_series() -> None:
    clock = Clock(10.0)
    stats = Stats(clock)
    clock.now = 10.5
    stats.events, stats.completed = 50, 2
    for late in (0.001, 0.002, 0.004):
        stats.late(late)
    first = stats.sample(live=7)
    assert first["t"] == 0.5
    assert first["events"] == 50 and first["events_per_s"] == 100.0
    assert first["sessions_done"] == 2 == first["done_total"]
    assert first["live"] == 7
    assert 4.0 <= first["p99_ms"] <= 4.08  # this window's p99: the upper edge of 4 ms
    assert first["late_bins"] == [[Histogram.bucket(v), 1] for v in (0.001, 0.002, 0.004)]
    # The next point counts only what happened since, and has no lateness without timers.
    clock.now = 11.5
    stats.events += 30
    stats.error(1, "x")
    second = stats.sample(live=6)
    assert second["t"] == 1.5
    assert (second["events"], second["events_per_s"]) == (30, 30.0)
    assert (second["sessions_done"], second["done_total"]) == (1, 3)
    assert second["p99_ms"] is None and second["late_bins"] == []
    assert stats.series == [first, second]
    assert stats.lateness.total == 3  # the run's histogram keeps every window


def test_tick_samples_then_checks_then_reports_progress() -> None:
    calls: list[Any] = []

    async def run() -> Stats:
        stats = Stats(asyncio.get_running_loop().time)
        task = asyncio.create_task(
            tick(stats, lambda: 4, lambda: calls.append("check"), lambda s, p: calls.append(p))
        )
        await asyncio.sleep(TICK * 1.3)
        task.cancel()
        return stats

    began = time.perf_counter()
    stats = asyncio.run(run())
    assert time.perf_counter() - began < TICK * 2
    assert len(stats.series) == 1 and stats.series[0]["live"] == 4
    assert calls == ["check", stats.series[0]]
    assert stats.series[0]["t"] == pytest.approx(TICK, abs=0.1)


def test_tick_runs_without_check_or_progress() -> None:
    async def run() -> Stats:
        stats = Stats(asyncio.get_running_loop().time)
        task = asyncio.create_task(tick(stats, lambda: 0, None, None))
        await asyncio.sleep(TICK * 1.3)
        task.cancel()
        return stats

    assert len(asyncio.run(run()).series) == 1


def test_a_late_start_and_a_late_timer_share_the_histogram() -> None:
    stats = Stats(Clock(), origin=90.0)
    assert stats.started_at == 90.0  # the schedule's origin, not the clock's reading
    stats.started_late(1.5)
    stats.started_late(-0.001)  # early is punctual
    stats.late(0.002)
    assert (stats.starts, stats.timer_events, stats.lateness.total) == (2, 1, 3)
    assert stats.lateness.max == 1.5 and stats.lateness.counts[0] == 1


def test_tick_points_fall_on_a_grid_from_the_origin() -> None:
    async def run() -> Stats:
        loop = asyncio.get_running_loop()
        stats = Stats(loop.time, origin=loop.time() - 0.3 * TICK)
        task = asyncio.create_task(tick(stats, lambda: 0, None, None))
        while not stats.series:
            await asyncio.sleep(0.01)
        task.cancel()
        return stats

    stats = asyncio.run(run())
    assert stats.series[0]["t"] == pytest.approx(TICK, abs=0.1)


# -- the collector's pauses ---------------------------------------------------------------


def test_gc_pauses_are_counted_while_installed_only() -> None:
    pauses = GcPauses()
    with pauses.installed() as installed:
        assert installed is pauses and pauses in gc.callbacks
        gc.collect()
    assert pauses not in gc.callbacks
    assert pauses.collections[2] >= 1
    assert pauses.total >= pauses.max > 0
    counted = list(pauses.collections)
    gc.collect()
    assert pauses.collections == counted
    summary = pauses.summary()
    assert summary["collections"] == counted
    assert summary["max_pause_ms"] == round(pauses.max * 1e3, 3)
    assert summary["total_pause_ms"] >= summary["max_pause_ms"]


# -- the summary --------------------------------------------------------------------------


def test_the_summary_reports_the_config_and_the_counters() -> None:
    clock = Clock(5.0)
    stats = Stats(clock)
    config = LoadConfig(command="generate", args=["-y"], sessions=2, concurrency=1, seed=9)
    stats.started, stats.completed, stats.events, stats.bytes = 2, 1, 40, 4000
    stats.error(1, "exit code 3")
    stats.late(0.002)
    stats.per_session = {1: {"seed": 10}, 0: {"seed": 9}}
    clock.now = 7.0
    summary = build_summary(config, stats, lateness=True)
    assert (summary["command"], summary["args"], summary["seed"]) == ("generate", ["-y"], 9)
    assert (summary["mode"], summary["scenario"], summary["speed"]) == ("inprocess", "default", 1.0)
    assert (summary["sessions"], summary["completed"], summary["errors"]) == (2, 1, 1)
    assert summary["error_messages"] == ["session 1: exit code 3"]
    assert (summary["events"], summary["bytes"], summary["seconds"]) == (40, 4000, 2.0)
    assert summary["events_per_s"] == 20.0
    assert [s["seed"] for s in summary["per_session"]] == [9, 10]  # by session index
    late = summary["lateness_ms"]
    assert late["timer_events"] == 1 and late["max"] == 2.0 and late["starts"] == 0
    assert Histogram.from_json(summary["lateness_histogram"]) == stats.lateness
    assert summary["host"]
    assert late["p50"] == late["p95"] == late["p99"] == 2.0  # capped by the max
    without = build_summary(config, stats, lateness=False)
    assert without["lateness_ms"] is None and without["lateness_histogram"] is None


@pytest.mark.parametrize("seconds", [0.0, 0.5e-6, 1e-6, 3.3e-5, 0.0123, 0.05, 2.5, 1e9])
def test_a_timer_sample_lands_in_the_bucket_the_histogram_gives(seconds: float) -> None:
    """``Stats.late`` computes the bucket itself (it runs once an event): the same one."""
    stats = Stats(time.monotonic)
    stats.late(seconds)
    expected = Histogram()
    expected.add(seconds)
    assert stats.lateness == expected
    assert stats.bin == {Histogram.bucket(seconds): 1}
