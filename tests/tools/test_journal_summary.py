"""Tests for simulator.tools.journal_summary: ``zread-sim journal --summary`` over the
journals of real runs on two "machines", and its figures and outcomes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from simulator.hosts.journal import Event, Exit, HttpFaultMet, Line, Start, Timer
from simulator.tools.journal import Process, parse, read
from simulator.tools.journal_summary import Summary, outcome, percentiles
from tests.e2e.helpers import Proc
from tests.tools.test_journal import (
    CONTROLS,
    DEEP,
    START,
    journal_of,
    lines_of,
    quit_cleanly,
    write_journal,
)

# -- the summary --------------------------------------------------------------------------

BROKEN = """description = "generate: the repository cannot be opened"
[[failures]]
point = "repository"
"""


def test_the_summary_of_two_machines_journals_counts_sessions_outcomes_and_lateness(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    broken = tmp_path / "broken.toml"
    broken.write_text(BROKEN)
    for index in range(2):  # two that end by themselves, on the first machine
        with Proc("generate", "-y", "--journal", str(one), speed=0.05, seed=index) as proc:
            proc.read_until_done()
            proc.finish()
    with Proc("generate", "-y", "--journal", str(two), scenario=str(broken)) as proc:
        proc.read_until_done()  # ends in the error state
        proc.finish()
    with Proc("generate", "-y", "--journal", str(two), scenario="crash") as proc:
        assert proc.wait() == 3  # an exit fault: no done
    with Proc("config", "--journal", str(two)) as proc:
        proc.read_event()
        quit_cleanly(proc)
    with Proc("config", "--journal", str(two)) as proc:
        proc.read_event()
        proc.popen.kill()  # SIGKILL: no exit record
        proc.wait()
    late = [late for path in (one, two) for p in read(str(path)) for late in p.late]
    assert len(late) > 10 and min(late) >= 0

    report = tmp_path / "summary.json"
    result = journal_of(one, str(two), "--summary", "--json", str(report))
    assert result.returncode == 1, result.stderr  # the SIGKILL is the client's mistake
    assert result.stderr == ""
    out = result.stdout
    assert out.startswith("6 sessions in 2 journals\n")
    assert "  generate         4        2        2        0        0\n" in out
    assert "  config           2        0        0        1        1\n" in out
    assert "  all              6        2        2        1        1\n" in out
    assert "ended: done 3, " in out and "fault-exit 1" in out and "no exit record 1" in out
    assert "exit codes: 0 4, " in out and "3 1" in out and "none 1" in out
    assert f"(of {len(late)})\n" in out
    assert "client mistakes (1): no exit recorded 1 (zread-sim journal FILE lists them)" in out
    data = msgspec.json.decode(report.read_bytes())
    assert data["journals"] == [str(one), str(two)] and data["sessions"] == 6
    assert data["outcomes"] == {"done": 2, "failed": 2, "quit": 1, "killed": 1}
    lateness = data["lateness_ms"]
    assert lateness["count"] == len(late)
    assert lateness["max"] == pytest.approx(max(late) * 1000)
    assert lateness["p50"] <= lateness["p90"] <= lateness["p99"] <= lateness["max"]
    assert data["session_ms"]["count"] == 5  # the killed one never said when it ended
    assert data["exit_codes"] == {"0": 4, "3": 1, "none": 1}


def test_a_summary_of_clean_runs_exits_0_and_says_no_mistakes(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Proc("generate", "-y", "--journal", str(path), scenario="empty") as proc:
        proc.read_until_done()
        proc.finish()
    result = journal_of(path, "--summary")
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert result.stdout.startswith("1 session in 1 journal\n")
    assert result.stdout.endswith("client mistakes: none\n")


def test_a_summary_needs_files_it_can_read_and_options_that_go_together(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"")
    missing = journal_of(good, str(tmp_path / "nope.jsonl"), "--summary")
    assert (missing.returncode, missing.stdout) == (2, "")
    assert (
        missing.stderr
        == f"zread-sim: journal {tmp_path / 'nope.jsonl'}: No such file or directory\n"
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"timer","pid":1,"t":0,"late":"soon"}\n')
    result = journal_of(good, str(bad), "--summary")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"zread-sim: journal {bad}: line 1 is not a journal record")
    assert result.stderr.count("\n") == 1
    for words, said in [
        ((str(good),), "journal: more than one journal needs --summary"),
        (("--json", str(tmp_path / "s.json")), "journal: --json needs --summary"),
    ]:
        result = journal_of(good, *words)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr == f"zread-sim: {said}\n"
    unwritable = journal_of(good, "--summary", "--json", str(tmp_path / "no" / "s.json"))
    assert unwritable.returncode == 2
    assert (
        unwritable.stderr
        == f"zread-sim: journal: {tmp_path / 'no' / 's.json'}: No such file or directory\n"
    )


def test_percentiles_are_nearest_rank_in_milliseconds() -> None:
    assert percentiles([]) is None
    figures = percentiles([i / 1000 for i in range(100, 0, -1)])  # 1..100 ms
    assert figures == pytest.approx({"p50": 50, "p90": 90, "p99": 99, "max": 100, "count": 100})
    assert percentiles([0.002]) == pytest.approx(
        {"p50": 2, "p90": 2, "p99": 2, "max": 2, "count": 1}
    )


DONE_EVENT = '{"vm":{"state":"done"},"waiting_for":[],"done":true,"error":""}'


@pytest.mark.parametrize(
    ("end", "event", "expected"),
    [
        (Exit(5, 1.0, 0, "done"), Event(5, 1.0, DONE_EVENT, "done"), "done"),
        (Exit(5, 1.0, 0, "done"), Event(5, 1.0, DONE_EVENT, "error"), "failed"),
        (
            Exit(5, 1.0, 0, "done"),
            Event(5, 1.0, DONE_EVENT.replace('"error":""', '"error":"x"')),
            "failed",
        ),
        (Exit(5, 1.0, 3, "fault-exit"), None, "failed"),
        (Exit(5, 1.0, None, "aborted"), None, "failed"),
        (Exit(5, 1.0, 0, "quit"), None, "quit"),
        (Exit(5, 1.0, 0, "control-quit"), None, "quit"),
        (Exit(5, 1.0, 0, "signal"), None, "quit"),
        (Exit(5, 1.0, 0, "stdin-closed-left-waiting"), None, "quit"),
        (Exit(5, 1.0, 0, "reader-gone"), None, "quit"),
        (Exit(5, 1.0, None, "hang"), None, "killed"),
        (None, Event(5, 1.0, DONE_EVENT, "done"), "killed"),
    ],
)
def test_the_outcome_of_a_process(end: Exit | None, event: Event | None, expected: str) -> None:
    process = Process(5, START, [r for r in (event, end) if r is not None])
    assert outcome(process) == expected


def test_a_summary_keeps_processes_of_different_journals_apart() -> None:
    summary = Summary()
    for _ in range(2):  # the same pid on two machines
        (process,) = parse(lines_of(START, Timer(5, 0.1, 0.004), Exit(5, 0.2, 0, "quit")))
        summary.add_process(process)
    assert summary.sessions == {"config": 2}
    assert summary.lines()[0] == "2 sessions in 0 journals"
    assert summary.lateness == pytest.approx({"p50": 4, "p90": 4, "p99": 4, "max": 4, "count": 2})


def test_a_summary_folds_each_process_at_its_exit_record(tmp_path: Path) -> None:
    login = Start(6, [], "/q", "t", "login")
    path = write_journal(
        tmp_path / "j.jsonl",
        START,
        login,
        Line(5, 0.1, "{", "editing", ["save"], False, "invalid JSON: truncated"),
        Timer(5, 0.2, 0.004),
        Event(5, 0.3, DONE_EVENT, "done"),
        Exit(5, 0.4, 0, "done"),
        HttpFaultMet(5, 0.5, "GET", "/", "http-1", "status"),  # after its exit: not counted
        Timer(6, 0.6, 0.002),
        START,  # pid 5 again: a process of its own
        Exit(5, 0.1, 0, "quit"),
        Exit(5, 0.2, 0, "quit"),  # after pid 5's exit: one more, without a start
    )  # login never exits: folded at the end
    summary = Summary()
    summary.add(str(path))
    assert summary.sessions == {"config": 2, "login": 1, "(no start)": 1}
    assert summary.outcomes["config"] == {"done": 1, "quit": 1}
    assert summary.outcomes["login"] == {"killed": 1}
    assert summary.mistakes == {"bad JSON": 1, "no exit recorded": 1}
    assert summary.lateness == pytest.approx({"p50": 2, "p90": 4, "p99": 4, "max": 4, "count": 2})
    assert summary.session_time is not None and summary.session_time["count"] == 3


def test_a_summary_of_an_event_nested_too_deep_to_decode_is_no_crash(tmp_path: Path) -> None:
    path = write_journal(
        tmp_path / "deep.jsonl", START, Event(5, 0.1, DEEP, ""), Exit(5, 0.2, 0, "done")
    )
    report = tmp_path / "summary.json"
    result = journal_of(path, "--summary", "--json", str(report))
    assert (result.returncode, result.stderr) == (0, "")
    data = msgspec.json.decode(report.read_bytes())
    assert data["outcomes"] == {"done": 1, "failed": 0, "quit": 0, "killed": 0}


def test_a_summary_prints_names_from_a_journal_with_their_controls_escaped(
    tmp_path: Path,
) -> None:
    command, how = "gen\x1b]0;pwned\x07\r\nerate\x9b", "done\x1b[2K\rFAKE\x7f"
    path = write_journal(
        tmp_path / "evil.jsonl",
        Start(5, ["zread"], "/", "t", command),
        Exit(5, 0.2, 0, how),
    )
    report = tmp_path / "summary.json"
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "journal", str(path), "--summary", "--json", report],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, b"")
    out = result.stdout.decode()
    assert not CONTROLS.search(result.stdout), out
    shown = "gen\\x1b]0;pwned\\x07\\r\\nerate\\x9b"
    assert f"  command{' ' * (len(shown) - 7)}  sessions" in out  # the columns line up
    assert f"  {shown}         1        0        1        0        0\n" in out
    assert "ended: done\\x1b[2K\\rFAKE\\x7f 1\n" in out
    data = msgspec.json.decode(report.read_bytes())  # the data keeps the names as they are
    assert data["commands"][0]["command"] == command and data["ended"] == {how: 1}


def test_a_summary_refuses_a_time_that_is_not_finite_in_milliseconds(tmp_path: Path) -> None:
    path = write_journal(tmp_path / "j.jsonl", START, Exit(5, 1e308, 0, "done"))
    result = journal_of(path, "--summary")
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"zread-sim: journal {path}: line 2 is not a journal record: t: out of range\n"
    )


def test_a_summary_reads_a_journal_without_its_torn_last_line_and_says_so(
    tmp_path: Path,
) -> None:
    path = write_journal(tmp_path / "j.jsonl", START, Exit(5, 1.0, 0, "done"))
    with path.open("ab") as file:
        file.write(b'{"kind":"start","pid":6,"t":0.0,"ar')  # a full disk cut it short
    result = journal_of(path, "--summary")
    assert (result.returncode, result.stdout.splitlines()[0]) == (0, "1 session in 1 journal")
    assert result.stderr == (
        f"zread-sim: journal {path}: its last line is cut short (a full disk?); read without it\n"
    )


RSS = """import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "simulator", "journal", "--summary", sys.argv[1]],
               stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""
"""Runs a summary cold (not in a warm server's child) and prints its peak memory (KiB on
Linux, bytes on macOS)."""


def test_a_summary_costs_its_figures_not_its_records(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    sessions = 150_000  # 8 MiB: it cost ~100 MiB more when every record was kept
    path.write_bytes(
        b"".join(
            b'{"kind":"exit","pid":%d,"t":0.5,"code":0,"how":"done"}\n' % pid
            for pid in range(sessions)
        )
    )
    cold = {k: v for k, v in os.environ.items() if k != "ZREAD_SIM_SERVER"}  # measured here
    result = subprocess.run(
        [sys.executable, "-c", RSS, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=cold,
    )
    peak = int(result.stdout) * (1 if sys.platform == "darwin" else 1024)
    assert peak < 48 << 20, f"{peak >> 20} MiB"
