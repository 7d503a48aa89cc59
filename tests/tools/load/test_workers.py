"""Tests for simulator.tools.load.workers: K event loops in K real processes.

Every run starts real worker processes (``python -m simulator.tools.load.workers``)
over real pipes; what the parent merges is checked against what each worker reported.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import pytest

from simulator.tools.load import Histogram, LoadConfig, run
from simulator.tools.load.workers import WorkerError, Workers

pytestmark = pytest.mark.timeout(60)


def test_two_workers_split_the_sessions_and_merge_exactly() -> None:
    config = LoadConfig(
        command="generate", args=["-y"], sessions=10, speed=0.05, ramp=0.3, workers=2
    )
    runner = Workers(config, 2, None)
    summary = asyncio.run(runner.run())
    assert summary["workers"] == 2 and summary["merged"] == "workers"
    assert summary["sessions"] == summary["completed"] == 10 and summary["errors"] == 0
    # Session i ran in worker i % 2, on the one schedule: i * ramp / N.
    sessions = summary["per_session"]
    assert [s["index"] for s in sessions] == list(range(10))
    assert [s["worker"] for s in sessions] == [i % 2 for i in range(10)]
    assert [s["scheduled"] for s in sessions] == [round(i * 0.3 / 10, 4) for i in range(10)]
    assert [s["seed"] for s in sessions] == list(range(10))
    # The merged histogram is the histogram of every sample of both workers.
    parts = runner.parts
    assert [p["sessions"] for p in parts] == [5, 5]
    assert [p["concurrency"] for p in parts] == [5, 5]
    expected = Histogram()
    for p in parts:
        expected.merge(Histogram.from_json(p["lateness_histogram"]))
    merged = Histogram.from_json(summary["lateness_histogram"])
    assert merged == expected
    late = summary["lateness_ms"]
    assert late["samples"] == merged.total == sum(p["lateness_ms"]["samples"] for p in parts)
    assert late["starts"] == 10
    assert late["p99"] == expected.percentile_ms(99)
    assert late["max"] == max(p["lateness_ms"]["max"] for p in parts)
    assert summary["events"] == sum(p["events"] for p in parts)
    assert summary["events"] == sum(s["events"] for s in sessions)
    assert summary["hub_wakeups"] == sum(p["hub_wakeups"] for p in parts)
    # One row per worker, with its own figures.
    rows = summary["parts"]
    assert [r["name"] for r in rows] == ["worker 0", "worker 1"]
    assert [r["lateness_ms"] for r in rows] == [p["lateness_ms"] for p in parts]
    assert [r["peak_live"] for r in rows] == [p["peak_live"] for p in parts]
    assert summary["peak_live"] >= max(r["peak_live"] for r in rows)
    assert summary["peak_live_sum"] == sum(r["peak_live"] for r in rows)


def test_run_uses_workers_unless_told_one() -> None:
    config = LoadConfig(command="version", sessions=3, speed=0.0, workers=2)
    summary = run(config)
    assert summary["workers"] == 2 and len(summary["parts"]) == 2
    assert summary["completed"] == 3
    single = run(LoadConfig(command="version", sessions=3, speed=0.0, workers=1))
    assert single["workers"] == 1 and "parts" not in single


@pytest.fixture(scope="module")
def timed_run() -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """A run of two workers for 1.2 s (no generate ends that soon at speed 1): its
    summary, and the progress drawn meanwhile."""
    seen: list[tuple[int, dict[str, Any]]] = []
    config = LoadConfig(command="generate", args=["-y"], concurrency=4, duration=1.2, workers=2)
    summary = asyncio.run(Workers(config, 2, lambda n, p: seen.append((n, p))).run())
    return summary, seen


def test_the_duration_stops_every_worker(
    timed_run: tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]],
) -> None:
    summary, _ = timed_run
    assert summary["sessions"] == summary["interrupted"] == 4
    assert summary["errors"] == summary["completed"] == 0


def test_progress_is_drawn_from_every_worker(
    timed_run: tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]],
) -> None:
    summary, seen = timed_run
    assert seen and all(set(point) == {"t", "live", "events_per_s", "p99_ms"} for _, point in seen)
    assert max(point["live"] for _, point in seen) <= 4
    assert summary["sessions"] == 4


def test_a_worker_that_fails_is_a_worker_error_with_its_last_words() -> None:
    config = LoadConfig(command="generate", sessions=2, scenario="no-such-scenario", workers=2)
    # Both fail alike; whichever is seen first is the one reported, with its exit code
    # (never 255 from a child watcher that lost the child: watch_children).
    with pytest.raises(WorkerError, match=r"worker [01] failed \(its output ended, exit code 1\)"):
        asyncio.run(Workers(config, 2, None).run())


# -- a worker by hand ---------------------------------------------------------------------


def worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "simulator.tools.load.workers"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_worker_speaks_json_lines_and_stops_when_told() -> None:
    proc = worker()
    assert proc.stdin is not None and proc.stdout is not None
    config = {"command": "generate", "args": ["-y"], "concurrency": 2, "duration": 60.0}
    proc.stdin.write(json.dumps({"config": config, "worker": 1, "workers": 2}).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline()) == {"ready": True}
    proc.stdin.write(json.dumps({"go": time.monotonic()}).encode() + b"\n")
    proc.stdin.flush()
    first = json.loads(proc.stdout.readline())
    assert set(first) == {"tick", "finished"} and first["tick"]["live"] == 1
    proc.stdin.write(b'{"stop": true}\n')
    proc.stdin.flush()
    lines = [json.loads(line) for line in proc.stdout]
    assert proc.wait(timeout=20) == 0
    summary = lines[-1]["summary"]
    assert summary["worker"] == 1 and summary["concurrency"] == 1
    assert summary["interrupted"] == 1 and [s["index"] for s in summary["per_session"]] == [1]


def test_a_worker_without_an_order_says_so_in_one_line() -> None:
    proc = worker()
    out, err = proc.communicate(b"hello\n", timeout=20)
    assert proc.returncode == 2 and out == b""
    assert err.startswith(b"zread-sim load worker: not an order on stdin") and err.count(b"\n") == 1
