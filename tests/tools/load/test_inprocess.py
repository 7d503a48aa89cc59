"""Tests for simulator.tools.load.inprocess: many sessions on one asyncio loop, measured.

Every run here is real: sessions on an asyncio loop in real time (at a high speed
factor). What a load run counts is checked against the same sessions run in virtual
time with the same reference client. Timing figures are only checked for sanity,
never against a bound. Every run is one loop in this process (one worker): the runs
split over worker processes are test_workers.py's.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from simulator.scenario import load_scenario
from simulator.tools.load import Histogram, LoadConfig, main, run
from simulator.tools.load.inprocess import InProcess

from .helpers import assert_sane_lateness, virtual_transcript
from .helpers import load as load_any

pytestmark = pytest.mark.timeout(60)


def load(tmp_path: Path, command: str, *argv: str) -> tuple[int, dict[str, Any]]:
    """``load`` on one event loop in this process."""
    return load_any(tmp_path, command, "--workers", "1", *argv)


def test_in_process_sessions_complete_with_a_consistent_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = load(tmp_path, "generate", "--sessions", "50", "--speed", "0.05", "--", "-y")
    assert code == 0
    assert summary["sessions"] == summary["completed"] == 50
    assert summary["errors"] == 0 and summary["error_messages"] == []
    sessions = summary["per_session"]
    assert [s["seed"] for s in sessions] == list(range(50))
    assert summary["events"] == sum(s["events"] for s in sessions)
    assert summary["bytes"] == sum(s["bytes"] for s in sessions)
    assert summary["events_per_s"] > 0
    assert_sane_lateness(summary["lateness_ms"])
    assert summary["lateness_ms"]["timer_events"] < summary["events"]  # the first is no timer's
    assert summary["peak_rss_mb"] > 0 and summary["rss_per_session_kb"] >= 0
    assert summary["series"] and summary["series"][-1]["done_total"] == 50
    assert sum(point["events"] for point in summary["series"]) == summary["events"]
    table = capsys.readouterr().out
    assert "completed 50" in table and "errors 0" in table and "p99" in table


def test_each_session_writes_what_virtual_time_writes_for_its_seed(tmp_path: Path) -> None:
    # failing-pages opens the retry gate: the reference client answers it over the wire.
    code, summary = load(
        tmp_path,
        "generate",
        "--sessions",
        "6",
        "--concurrency",
        "3",
        "--seed",
        "40",
        "--speed",
        "0.02",
        "--scenario",
        "failing-pages",
        "--arg=-y",
    )
    assert code == 0 and summary["errors"] == 0
    for session in summary["per_session"]:
        expected = virtual_transcript("failing-pages", session["seed"], "-y")
        assert (session["events"], session["bytes"]) == expected


def test_a_gate_is_answered_by_the_reference_client(tmp_path: Path) -> None:
    # Without -y, every generate session waits at select_action until answered. The
    # argv may start with "load", as the simulator's command line passes it on.
    path = tmp_path / "summary.json"
    argv = ["load", "generate", "--sessions", "4", "--speed", "0.02", "--workers", "1"]
    argv += ["--json", str(path)]
    assert main(argv) == 0
    summary = json.loads(path.read_text())
    assert summary["completed"] == 4
    expected = virtual_transcript("default", 0)
    assert (summary["per_session"][0]["events"], summary["per_session"][0]["bytes"]) == expected


def test_duration_mode_stops_and_quits_what_runs(tmp_path: Path) -> None:
    # A default generate takes seconds at speed 1: none can finish in 0.3 s.
    code, summary = load(
        tmp_path, "generate", "--concurrency", "5", "--duration", "0.3", "--", "-y"
    )
    assert code == 0
    assert summary["sessions"] == summary["interrupted"] == 5
    assert summary["completed"] == summary["errors"] == 0
    assert all(s["outcome"] == "interrupted" for s in summary["per_session"])
    assert summary["events"] == sum(s["events"] for s in summary["per_session"])


def test_duration_with_a_cap_starts_no_more_than_the_cap(tmp_path: Path) -> None:
    code, summary = load(
        tmp_path,
        "version",
        "--sessions",
        "30",
        "--concurrency",
        "4",
        "--duration",
        "20",
        "--speed",
        "0",
    )
    assert code == 0
    assert summary["sessions"] == summary["completed"] == 30


def test_a_crash_is_an_error_with_its_exit_code(tmp_path: Path) -> None:
    code, summary = load(
        tmp_path, "generate", "--sessions", "25", "--scenario", "crash", "--speed", "0.02"
    )
    assert code == 1
    assert summary["errors"] == 25 and summary["completed"] == 0
    assert len(summary["error_messages"]) == 20  # bounded; the count has them all
    assert "exit code 3" in summary["error_messages"][0]


def test_a_hung_session_is_an_error_at_once(tmp_path: Path) -> None:
    code, summary = load(
        tmp_path,
        "generate",
        "--sessions",
        "2",
        "--scenario",
        "hang",
        "--speed",
        "0.01",
        "--arg=-y",
    )
    assert code == 1
    assert summary["errors"] == 2
    assert "hung (a hang fault)" in summary["error_messages"][0]
    assert [s["events"] for s in summary["per_session"]] == [3, 3]


def test_a_session_that_stalls_times_out(tmp_path: Path) -> None:
    # It stops reading after its first event, the select_action gate: the answer never
    # arrives and nothing else will happen.
    scenario = tmp_path / "deaf.toml"
    scenario.write_text('[[faults]]\nkind = "stop_reading"\nafter_event = 1\n')
    code, summary = load(
        tmp_path, "generate", "--sessions", "2", "--scenario", str(scenario), "--timeout", "0.3"
    )
    assert code == 1
    assert summary["errors"] == 2 and summary["completed"] == 0
    assert "no done:true within 0.3 s" in summary["error_messages"][0]
    assert [s["events"] for s in summary["per_session"]] == [1, 1]


def late_samples_from(summary: dict[str, Any], seconds: float) -> int:
    """How many lateness samples of ``summary`` are ``seconds`` late or more."""
    hist = Histogram.from_json(summary["lateness_histogram"])
    return sum(hist.counts[Histogram.bucket(seconds) :])


def test_a_session_that_starts_late_counts_its_delay() -> None:
    # The schedule began a second ago: every session starts at least a second late,
    # and that delay is its first lateness sample.
    config = LoadConfig(command="generate", args=["-y"], sessions=3, speed=0.05, workers=1)
    runner = InProcess(config, load_scenario("default"), None)
    summary = asyncio.run(runner.run(origin=time.monotonic() - 1.0))
    assert summary["completed"] == 3
    assert all(s["late_start_ms"] >= 1000 for s in summary["per_session"])
    assert all(s["scheduled"] == 0 for s in summary["per_session"])
    late = summary["lateness_ms"]
    assert late["starts"] == 3 and late["samples"] == late["starts"] + late["timer_events"]
    assert late["max"] >= 1000
    assert late_samples_from(summary, 1.0) >= 3


def test_sessions_are_created_when_due_on_the_ramp() -> None:
    config = LoadConfig(command="version", sessions=4, speed=0.0, ramp=0.8, workers=1)
    runner = InProcess(config, load_scenario("default"), None)
    seen: list[int] = []

    async def run() -> dict[str, Any]:
        task = asyncio.create_task(runner.run())
        for _ in range(5):
            await asyncio.sleep(0)
        seen.append(runner.stats.started)  # session 1 is due 0.2 s later
        return await task

    summary = asyncio.run(run())
    assert seen == [1]
    assert [s["scheduled"] for s in summary["per_session"]] == [0.0, 0.2, 0.4, 0.6]
    for session in summary["per_session"]:
        assert session["start"] >= session["scheduled"]
        lateness = max(0.0, session["start"] - session["scheduled"]) * 1e3
        assert session["late_start_ms"] == pytest.approx(lateness, abs=0.1)


def test_memory_is_per_session_live_at_the_rss_peak() -> None:
    summary = run(LoadConfig(command="generate", args=["-y"], sessions=30, speed=0.05, workers=1))
    assert summary["workers"] == 1
    assert 0 < summary["rss_peak_live"] <= summary["peak_live"] == 30
    assert summary["rss_per_session_kb"] == round(
        summary["rss_added_kb"] / summary["rss_peak_live"], 2
    )
    assert summary["peak_rss_mb"] >= summary["rss_before_mb"] > 0


def test_the_hub_reports_its_wake_ups() -> None:
    summary = run(LoadConfig(command="generate", args=["-y"], sessions=10, speed=0.1, workers=1))
    assert summary["hub_wakeups"] > 0


def test_the_hub_wakes_at_most_once_per_timer_event() -> None:
    summary = run(LoadConfig(command="generate", args=["-y"], sessions=20, speed=0.1, workers=1))
    assert summary["hub_wakeups"] <= summary["lateness_ms"]["timer_events"]


def test_a_ramp_spreads_the_first_starts(tmp_path: Path) -> None:
    code, summary = load(
        tmp_path,
        "generate",
        "--sessions",
        "6",
        "--concurrency",
        "3",
        "--ramp",
        "0.4",
        "--speed",
        "0.02",
        "--",
        "-y",
    )
    assert code == 0 and summary["completed"] == 6 and summary["ramp"] == 0.4
    starts = [s["start"] for s in summary["per_session"]]
    assert starts[0] < 0.1
    # Session i of the first three starts no earlier than i * 0.4 / 3 seconds.
    assert starts[1] >= 0.4 / 3 and starts[2] >= 2 * 0.4 / 3
    scheduled = [s["scheduled"] for s in summary["per_session"]]
    assert scheduled[:3] == [round(i * 0.4 / 3, 4) for i in range(3)]
    # The other three take a slot when it frees up: scheduled then, not on the ramp.
    assert all(s["start"] >= s["scheduled"] for s in summary["per_session"])


# -- what counts as a gate, and broken transports -----------------------------------------


def test_only_a_gate_or_a_lone_quit_asks_the_client() -> None:
    runner = InProcess(LoadConfig(command="generate"), load_scenario("default"), None)
    assert runner.needs_answer(("select_action", "quit"))
    assert runner.needs_answer(("retry",))
    assert runner.needs_answer(("quit",))  # browse's serving: the client ends it
    assert not runner.needs_answer(("quit", "cancel"))  # running: nothing to answer
    assert not runner.needs_answer(())


def test_a_session_is_plain_unless_its_scenario_has_transport_faults() -> None:
    plain = InProcess(LoadConfig(command="generate"), load_scenario("default"), None)
    noisy = InProcess(LoadConfig(command="generate"), load_scenario("noisy"), None)
    assert plain.plain and not noisy.plain


def test_split_writes_are_joined_into_the_lines_virtual_time_writes(tmp_path: Path) -> None:
    scenario = tmp_path / "split.toml"
    scenario.write_text('[[faults]]\nkind = "split"\npieces = 3\npause = 0.0\n')
    config = LoadConfig(
        command="generate", args=["-y"], sessions=3, speed=0.02, scenario=str(scenario), workers=1
    )
    summary = run(config)
    assert summary["completed"] == 3 and summary["errors"] == 0
    for session in summary["per_session"]:
        expected = virtual_transcript(str(scenario), session["seed"], "-y")
        assert (session["events"], session["bytes"]) == expected


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ('kind = "close_stdout"\nafter_event = 1', "stdout closed before done:true"),
        ('kind = "exit"\nafter_event = 1\ncode = 0', "ended without done:true"),
        ('kind = "truncate"\nafter_event = 1\nat_byte = 10', 'not a JSON line: b\'{"vm":{"st\''),
        (
            'kind = "diagnostic"\nafter_event = 1\ntext = "zread: hello"',
            "not a JSON line: b'zread: hello'",
        ),
    ],
    ids=["close_stdout", "exit-0", "truncate", "diagnostic"],
)
def test_a_broken_transport_is_an_error_naming_what_broke(
    tmp_path: Path, fault: str, says: str
) -> None:
    scenario = tmp_path / "broken.toml"
    scenario.write_text(f"[[faults]]\n{fault}\n")
    config = LoadConfig(
        command="generate", args=["-y"], sessions=2, speed=0.02, scenario=str(scenario), workers=1
    )
    summary = run(config)
    assert summary["errors"] == 2 and summary["completed"] == 0
    assert all(s["outcome"] == "error" for s in summary["per_session"])
    assert sorted(summary["error_messages"]) == [f"session {i}: {says}" for i in (0, 1)]
