"""Tests for simulator.tools.load: many sessions in one loop or as real processes, measured.

Every run here is real: sessions on an asyncio loop in real time (at a high speed
factor), or real ``zread`` processes over pipes. What a load run counts is checked
against the same sessions run in virtual time with the same reference client.
Timing figures are only checked for sanity, never against a bound.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simulator.runners.virtual import start
from simulator.tools.client import ReferenceClient
from simulator.tools.load import Histogram, LoadConfig, main, run

pytestmark = pytest.mark.timeout(60)


def load(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "summary.json"
    code = main(["--json", str(path), "--no-progress", *argv])
    return code, json.loads(path.read_text())


def virtual_transcript(scenario: str, seed: int, *args: str) -> tuple[int, int]:
    """(events, bytes) of one session run in virtual time with the reference client."""
    sim = start("generate", *args, scenario=scenario, seed=seed)
    client = ReferenceClient()
    seen = 0
    while True:
        while seen < len(sim.events):
            answer = client.answer(sim.events[seen])
            seen += 1
            if answer is not None:
                sim.send_line(answer[:-1])
        if sim.done:
            break
        sim.wait_for(lambda _: True)
    out = [line.data for line in sim.transcript if line.direction == "out"]
    sim.close()
    return len(out), sum(map(len, out))


def assert_sane_lateness(lateness: dict[str, float]) -> None:
    assert lateness["max"] >= lateness["p99"] >= lateness["p95"] >= lateness["p50"] >= 0
    assert lateness["timer_events"] > 0


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
    argv = ["load", "generate", "--sessions", "4", "--speed", "0.02", "--json", str(path)]
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
        tmp_path, "generate", "--sessions", "2", "--scenario", str(scenario), "--timeout", "0.6"
    )
    assert code == 1
    assert summary["errors"] == 2 and summary["completed"] == 0
    assert "no done:true within 0.6 s" in summary["error_messages"][0]
    assert [s["events"] for s in summary["per_session"]] == [1, 1]


def test_progress_is_one_redrawn_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["generate", "--concurrency", "3", "--duration", "0.7", "--progress", "--", "-y"])
    assert code == 0
    err = capsys.readouterr().err
    assert err.startswith("\r") and err.endswith("\n") and err.count("\n") == 1
    assert "sessions done" in err and "events/s" in err


def test_prebuilt_sessions_are_measured_before_the_clock_starts() -> None:
    config = LoadConfig(command="generate", args=["-y"], sessions=20, speed=0.02, prebuild=True)
    summary = run(config)
    assert summary["completed"] == 20
    assert summary["prebuilt"]["sessions"] == 20
    assert summary["prebuilt"]["rss_per_session_kb"] >= 0
    assert [s["seed"] for s in summary["per_session"]] == list(range(20))


def test_processes_write_valid_transcripts_and_report_their_rss(tmp_path: Path) -> None:
    code, summary = load(
        tmp_path,
        "generate",
        "--sessions",
        "5",
        "--mode",
        "process",
        "--speed",
        "0.05",
        "--seed",
        "7",
        "--",
        "-y",
    )
    assert code == 0
    assert summary["completed"] == 5 and summary["errors"] == 0
    assert summary["lateness_ms"] is None
    rss = summary["rss_per_process_mb"]
    assert rss["sampled"] == 5 and rss["max"] >= rss["median"] >= rss["min"] > 0
    for session in summary["per_session"]:
        assert session["rss_kb"] > 0
        expected = virtual_transcript("default", session["seed"], "-y")
        assert (session["events"], session["bytes"]) == expected


def test_a_crashing_process_is_reported(tmp_path: Path) -> None:
    code, summary = load(
        tmp_path, "generate", "--sessions", "2", "--mode", "process", "--scenario", "crash"
    )
    assert code == 1 and summary["errors"] == 2
    assert "incomplete last line" in summary["error_messages"][0]


BAD = [
    ([], "command"),
    (["nope", "--sessions", "1"], "unknown command"),
    (["generate"], "--sessions"),
    (["generate", "--sessions", "0"], "integer >= 1"),
    (["generate", "--sessions", "x"], "integer >= 1"),
    (["generate", "--sessions", "2", "--speed", "-1"], "number >= 0"),
    (["generate", "--sessions", "2", "--duration", "0"], "number > 0"),
    (["generate", "--duration", "1"], "--concurrency"),
    (["generate", "--sessions", "1", "--scenario", "no-such-scenario"], "no-such-scenario"),
    (["generate", "--sessions", "1", "--plot", "out.gif"], ".svg or .png"),
    (["generate", "--sessions", "1", "--json", "/no/such/dir/x.json"], "no such directory"),
    (["generate", "--sessions", "1", "--mode", "thread"], "thread"),
    (["generate", "--sessions", "1", "--", "--bogus"], "--bogus"),
    (["generate", "--sessions", "1", "--progress", "--no-progress"], "not allowed"),
]


@pytest.mark.parametrize(("argv", "says"), BAD)
def test_a_bad_argument_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("zread-sim load: ") and captured.err.count("\n") == 1
    assert says in captured.err
    assert "Traceback" not in captured.err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--concurrency" in capsys.readouterr().out


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


def test_the_hub_reports_its_wake_ups() -> None:
    summary = run(LoadConfig(command="generate", args=["-y"], sessions=10, speed=0.1))
    assert summary["hub_wakeups"] > 0


def test_the_hub_wakes_at_most_once_per_timer_event() -> None:
    summary = run(LoadConfig(command="generate", args=["-y"], sessions=20, speed=0.2))
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
    assert starts == sorted(starts)
