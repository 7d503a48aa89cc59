"""Tests for simulator.tools.load.cli: the load test's arguments, exit codes, progress
line, summary table and the files it writes.

``main`` runs in this process with pytest capturing its streams; every run it starts is
a real one (in-process sessions at a high speed factor, or version sessions at speed 0).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from simulator.tools.load import PROG, LoadConfig, LoadError, format_summary, main, parse_args, run

pytestmark = pytest.mark.timeout(60)

BAD = [
    ([], "command"),
    (["nope", "--sessions", "1"], "unknown command"),
    (["generate"], "--sessions"),
    (["generate", "--sessions", "0"], "integer from 1 to"),
    (["generate", "--sessions", "x"], "integer from 1 to"),
    (["generate", "--sessions", "2", "--speed", "-1"], "number >= 0"),
    (["generate", "--sessions", "2", "--duration", "0"], "number > 0"),
    (["generate", "--duration", "1"], "--concurrency"),
    (["generate", "--sessions", "1", "--scenario", "no-such-scenario"], "no-such-scenario"),
    (["generate", "--sessions", "1", "--plot", "out.png"], "a plot is .svg"),
    (["generate", "--sessions", "1", "--workers", "0"], "integer from 1 to"),
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


def test_progress_is_one_redrawn_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--concurrency", "3", "--duration", "0.7", "--workers", "1", "--progress"]
    code = main([*argv, "--", "-y"])
    assert code == 0
    err = capsys.readouterr().err
    assert err.startswith("\r") and err.endswith("\n") and err.count("\n") == 1
    assert "sessions done" in err and "events/s" in err and "live" in err


def test_progress_counts_sessions_against_their_total(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--sessions", "4", "--workers", "2", "--speed", "0.3", "--progress"]
    assert main([*argv, "--", "-y"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/4 [" in err and "100%" in err


def test_without_a_terminal_there_is_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    # Under pytest stderr is no terminal: nothing but the table is written.
    code = main(["generate", "--concurrency", "2", "--duration", "0.7", "--workers", "1"])
    assert code == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("run ")


# -- arguments ----------------------------------------------------------------------------


def test_zread_flags_come_from_arg_from_among_the_options_and_after_the_dashes() -> None:
    argv = ["generate", "--sessions", "3", "-y", "--arg=--skip-failed", "--", "--draft-action"]
    config, json_path, plot_path = parse_args([*argv, "resume"])
    assert config.args == ["--skip-failed", "-y", "--draft-action", "resume"]
    assert (config.command, config.sessions, config.concurrency) == ("generate", 3, 3)
    assert (json_path, plot_path) == (None, None)
    assert not config.progress  # stderr is no terminal here
    assert config.workers is None  # one per core, when it runs


def test_every_option_reaches_the_config(tmp_path: Path) -> None:
    json_path, plot_path = str(tmp_path / "s.json"), str(tmp_path / "p.svg")
    config, *paths = parse_args(
        [
            "login",
            "--sessions=8",
            "--concurrency=2",
            "--duration=1.5",
            "--scenario=login-timeout",
            "--seed=11",
            "--speed=0.25",
            "--mode=process",
            "--timeout=9",
            "--ramp=0.5",
            "--workers=3",
            "--progress",
            f"--json={json_path}",
            f"--plot={plot_path}",
            "--",
            "--custom",
        ]
    )
    assert config == LoadConfig(
        command="login",
        args=["--custom"],
        sessions=8,
        concurrency=2,
        duration=1.5,
        scenario="login-timeout",
        seed=11,
        speed=0.25,
        mode="process",
        timeout=9.0,
        progress=True,
        ramp=0.5,
        workers=3,
    )
    assert paths == [json_path, plot_path]


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5"])
def test_a_number_must_be_finite(value: str) -> None:
    with pytest.raises(LoadError, match="expected a number >= 0"):
        parse_args(["version", "--sessions", "1", "--speed", value])


def test_a_directory_is_no_file_to_write(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="is a directory, not a file"):
        parse_args(["version", "--sessions", "1", "--json", str(tmp_path)])


def test_an_unusable_scenario_is_a_load_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[[faults]]\nkind = 'nope'\n")
    with pytest.raises(LoadError, match="nope"):
        run(LoadConfig(command="generate", sessions=1, scenario=str(broken)))


# -- what a run writes --------------------------------------------------------------------


def test_a_run_writes_its_summary_as_json_and_a_plot_as_svg(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path, plot_path = tmp_path / "summary.json", tmp_path / "plot.svg"
    argv = ["version", "--sessions", "5", "--speed", "0", "--json", str(json_path)]
    assert main([*argv, "--plot", str(plot_path), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    summary = json.loads(json_path.read_text())
    assert summary["command"] == "version" and summary["completed"] == 5
    assert captured.out == format_summary(summary)
    root = ET.fromstring(plot_path.read_text())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "version" in plot_path.read_text()


def test_a_failed_session_exits_1_with_its_error_in_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["generate", "--sessions", "2", "--scenario", "crash", "--speed", "0.02"]
    assert main([*argv, "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "errors 2" in out
    errors = [line for line in out.splitlines() if line.startswith("error ")]
    assert len(errors) == 2 and all(line.endswith("exit code 3") for line in errors)


# -- the table ----------------------------------------------------------------------------


def summary_of(**changes: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "command": "generate",
        "args": ["-y"],
        "mode": "inprocess",
        "scenario": "default",
        "speed": 0.5,
        "sessions": 10,
        "completed": 8,
        "interrupted": 1,
        "errors": 1,
        "concurrency": 4,
        "events": 12345,
        "seconds": 2.5,
        "events_per_s": 4938.0,
        "bytes": 3_500_000,
        "lateness_ms": {
            "p50": 0.5,
            "p95": 1.25,
            "p99": 2.0,
            "max": 3.5,
            "timer_events": 9876,
            "starts": 10,
        },
        "peak_rss_mb": 40.0,
        "rss_per_session_kb": 12.5,
        "rss_peak_live": 3,
        "peak_live": 4,
        "error_messages": ["session 3: exit code 3"],
    }
    summary.update(changes)
    return summary


def test_the_table_of_an_in_process_run() -> None:
    assert format_summary(summary_of()).splitlines() == [
        "run       generate -y, scenario default, speed 0.5, in-process",
        "sessions  10 (completed 8, interrupted 1, errors 1), concurrency 4",
        "events    12,345 in 2.50 s = 4,938 events/s (3.5 MB)",
        "lateness  p50 0.50 ms  p95 1.25 ms  p99 2.00 ms  max 3.50 ms (9,876 timer events, "
        "10 starts against their schedule)",
        "memory    peak RSS 40.0 MB, 12.5 KB per live session (3 live at the RSS peak); "
        "4 live at once at most",
        "error     session 3: exit code 3",
    ]


def test_the_table_says_what_was_not_measured() -> None:
    table = format_summary(summary_of(peak_rss_mb=None, rss_per_session_kb=None))
    assert "peak RSS not measured, memory per session not measured; 4 live" in table


def test_the_table_of_workers_has_a_row_for_each() -> None:
    late = {"p50": 0.5, "p95": 1.0, "p99": 2.0, "max": 3.0}
    rows = [
        {
            "name": f"worker {w}",
            "sessions": 5,
            "errors": 0,
            "events_per_s": 100.0,
            "lateness_ms": late,
            "peak_live": 2,
            "rss_per_session_kb": 10.0,
        }
        for w in (0, 1)
    ]
    lines = format_summary(summary_of(workers=2, parts=rows, peak_live_sum=4)).splitlines()
    assert lines[0].endswith("in-process, 2 workers")
    assert lines[-3] == (
        "worker 0  5 sessions (errors 0), 100 events/s, lateness p50 0.50 ms  p95 1.00 ms  "
        "p99 2.00 ms  max 3.00 ms, 2 live at most, 10.0 KB per live session"
    )


def test_the_table_of_a_process_run() -> None:
    rss = {"min": 20.0, "median": 22.5, "max": 31.0, "sampled": 10}
    table = format_summary(
        summary_of(mode="process", lateness_ms=None, rss_per_process_mb=rss, error_messages=[])
    )
    lines = table.splitlines()
    assert lines[0].endswith("speed 0.5, processes")
    assert lines[3:] == [
        "lateness  not measured in process mode",
        "memory    RSS per process median 22.5 MB, max 31.0 MB (10 sampled)",
    ]
    unsampled = summary_of(mode="process", lateness_ms=None, rss_per_process_mb=None)
    assert "memory    no sample\n" in format_summary(unsampled)


def test_prog_names_the_command() -> None:
    assert PROG == "zread-sim load"
