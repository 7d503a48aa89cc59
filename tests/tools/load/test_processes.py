"""Tests for simulator.tools.load.processes: real ``zread`` processes over real pipes.

Each run starts a few processes of the ``zread`` script the runner writes, answers their
gates with the reference client and checks every transcript; what each process wrote is
compared with the same session run in virtual time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from simulator.runners.stdio import LATENESS_FILE
from simulator.tools.load import LoadConfig
from simulator.tools.load.processes import Processes, _check_line, read_lateness

from .helpers import load, virtual_transcript

pytestmark = pytest.mark.timeout(60)

DONE = {"vm": {}, "waiting_for": [], "done": True, "error": ""}
NOT_DONE = {"vm": {}, "waiting_for": ["quit"], "done": False, "error": ""}


def line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


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
    # Every child writes how late its timers fired; the summary merges them.
    assert summary["lateness_reported_by"] == 5
    late = summary["lateness_ms"]
    assert late is not None and 0 <= late["p50"] <= late["p99"] <= late["max"]
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


# -- the runner, driven directly ----------------------------------------------------------


def test_no_more_than_the_concurrency_run_at_once() -> None:
    config = LoadConfig(command="version", sessions=4, concurrency=2, speed=0.0, seed=3)
    runner = Processes(config, "default", None)
    most = 0

    async def run() -> dict[str, Any]:
        nonlocal most
        task = asyncio.create_task(runner.run())
        while not task.done():
            most = max(most, len(runner.live))
            await asyncio.sleep(0.005)
        return await task

    summary = asyncio.run(run())
    assert most == 2
    assert summary["sessions"] == summary["completed"] == 4 and summary["errors"] == 0
    sessions = summary["per_session"]
    assert [s["seed"] for s in sessions] == [3, 4, 5, 6]
    assert all(s["outcome"] == "completed" and s["events"] == 1 for s in sessions)
    expected = virtual_transcript("default", 3, command="version")
    assert (sessions[0]["events"], sessions[0]["bytes"]) == expected
    assert summary["rss_per_session_kb"] > 0 and summary["peak_rss_mb"] > 0
    assert summary["load_tool_peak_rss_mb"] > 0


def test_a_scenario_file_reaches_every_process(tmp_path: Path) -> None:
    # A process that writes one event and exits 0 has not finished its command.
    scenario = tmp_path / "short.toml"
    scenario.write_text('[[faults]]\nkind = "exit"\nafter_event = 1\ncode = 0\n')
    config = LoadConfig(command="generate", sessions=2, speed=0.0, concurrency=2)
    summary = asyncio.run(Processes(config, str(scenario), None).run())
    assert summary["errors"] == 2 and summary["completed"] == 0
    assert [s["events"] for s in summary["per_session"]] == [1, 1]
    assert sorted(summary["error_messages"]) == [
        f"session {i}: the transcript ended without done:true" for i in (0, 1)
    ]


def test_an_exit_code_is_an_error(tmp_path: Path) -> None:
    scenario = tmp_path / "fails.toml"
    scenario.write_text('[[faults]]\nkind = "exit"\nafter_event = 1\ncode = 5\n')
    config = LoadConfig(command="version", sessions=1, speed=0.0, concurrency=1)
    summary = asyncio.run(Processes(config, str(scenario), None).run())
    assert summary["error_messages"] == ["session 0: exit code 5"]
    assert summary["per_session"][0]["outcome"] == "error"


def test_the_duration_ends_the_processes_and_counts_them_interrupted() -> None:
    # At speed 1 a generate takes seconds; quit at the duration: it ends with done:true.
    config = LoadConfig(command="generate", args=["-y"], concurrency=2, duration=0.5)
    summary = asyncio.run(Processes(config, "default", None).run())
    assert summary["sessions"] == summary["interrupted"] == 2
    assert summary["errors"] == summary["completed"] == 0
    assert summary["seconds"] < 5


# -- lateness from the children ----------------------------------------------------------


def test_a_childs_lateness_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "lateness-0.json"
    path.write_text(json.dumps({"lateness_s": [0.001, 0, 2.5]}))
    assert read_lateness(str(path)) == [0.001, 0.0, 2.5]
    assert LATENESS_FILE == "ZREAD_SIM_LATENESS_FILE"


@pytest.mark.parametrize("text", [None, "not json", "[1]", '{"lateness_s": 3}'])
def test_no_usable_lateness_file_is_none(tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "lateness-0.json"
    if text is not None:
        path.write_text(text)
    assert read_lateness(str(path)) is None


# -- checking one line --------------------------------------------------------------------


def test_a_valid_event_line_passes() -> None:
    event, problem = _check_line(line(NOT_DONE), None)
    assert (event, problem) == (NOT_DONE, "")
    assert _check_line(line(DONE), NOT_DONE) == (DONE, "")


@pytest.mark.parametrize(
    ("data", "last", "says"),
    [
        (line(NOT_DONE), DONE, "a line after done:true"),
        (line(DONE)[:-1], None, "incomplete last line"),
        (b"zread: warning\n", None, "not a JSON line"),
        (b"[1, 2]\n", None, "not an event (keys vm, waiting_for, done, error)"),
        (b'{"vm": {}, "done": true, "error": ""}\n', None, "not an event (keys vm"),
    ],
)
def test_a_bad_line_is_named(data: bytes, last: dict[str, Any] | None, says: str) -> None:
    event, problem = _check_line(data, last)
    assert event is None
    assert problem.startswith(says)
    assert repr(data[:80]) in problem
