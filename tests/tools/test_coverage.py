"""Tests for simulator.tools.coverage: the figures, the table, journals, the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.core.coverage import Reached
from simulator.runners.virtual import SimSession, start
from simulator.tools.coverage import Coverage, CoverageError, below, main

# generate on the default scenario: the gate, "generate", the run to done.
GENERATE_STATES = {"starting", "select_action", "catalog", "pages", "done"}
GENERATE_TRANSITIONS = {
    "_start starting->select_action",
    "select_action select_action->catalog [chose_fresh]",
    "_catalog_step catalog->catalog",
    "_catalog_step catalog->pages [catalog_ready]",
    "_page_done pages->pages [!all_done]",
    "_page_done pages->done",
}


def generate_through_the_gate() -> SimSession:
    session = start("generate")
    session.wait_for(lambda e: "select_action" in e["waiting_for"])
    session.send("select_action", action="generate")
    session.wait_done()
    return session


def test_a_chosen_path_reaches_exactly_its_states_transitions_and_gates() -> None:
    reached = generate_through_the_gate().session.reached
    assert reached.command == "generate"
    assert reached.states == GENERATE_STATES
    assert reached.transitions == GENERATE_TRANSITIONS
    assert reached.gates == {"select_action:select_action"}
    assert reached.failures == frozenset() and reached.faults == frozenset()


def test_a_refused_command_and_a_quit_count_what_they_are() -> None:
    session = start("generate")
    session.send("retry")  # not waited for: refused, no gate answered
    session.send("quit")
    reached = session.session.reached
    assert reached.gates == {"select_action:quit"}
    assert reached.transitions == {"_start starting->select_action"}


def test_failures_met_are_counted_by_point() -> None:
    session = start("generate", "-y", "--skip-failed", scenario="failing-pages")
    session.wait_done()
    assert session.session.reached.failures == {"page"}


def test_the_figures_and_the_never_reached_list() -> None:
    coverage = Coverage()
    coverage.add(generate_through_the_gate().session.reached)
    (row,) = coverage.commands()
    assert (row.command, row.sessions) == ("generate", 1)
    assert row.states == (5, 8)
    assert row.transitions == (6, 27)
    assert row.gates == (1, 12)
    assert row.failures == (0, 3)
    assert "`retry_catalog` never sent in `catalog_error` (running)" in row.never
    assert "state `retry_gate` never entered" in row.never
    assert "transition `cancel pages->done` never taken" in row.never
    assert "failure `page` never met" in row.never
    assert not any("select_action:select_action" in n for n in row.never)
    assert coverage.percent() == pytest.approx(100 * 6 / 27)
    table = coverage.table()
    assert table[0] == "zread coverage: 1 session; transitions 22.2% of the commands run"
    assert "generate          1  5/8 62%      6/27 22%     1/12 8%      0/3 0%       -" in table
    assert "login             -  not run" in table
    assert "generate: never reached:" in table


def test_percent_counts_only_the_commands_run_and_sessions_merge() -> None:
    coverage = Coverage()
    assert coverage.percent() == 0.0
    coverage.add(start("version").session.reached)
    assert coverage.percent() == 100.0
    coverage.add(generate_through_the_gate().session.reached)
    coverage.add(generate_through_the_gate().session.reached)  # the same again: no more
    assert coverage.percent() == pytest.approx(100 * 7 / 28)
    assert [r.sessions for r in coverage.commands()] == [2, 1]
    assert below(coverage, 50) == ("zread coverage: transitions 25.0% is below the required 50%")
    assert below(coverage, 20) == "" and below(coverage, None) == ""


def test_json_round_trip_and_merge() -> None:
    coverage = Coverage()
    coverage.add(generate_through_the_gate().session.reached)
    data = json.loads(json.dumps(coverage.as_json()))
    assert data["percent"] == 22.22
    assert data["commands"][0]["transitions"] == {"reached": 6, "total": 27}
    again = Coverage.from_json(data)
    assert again.as_json() == coverage.as_json()
    again.merge(coverage)
    assert again.commands()[0].sessions == 2
    with pytest.raises(CoverageError, match="not a coverage report"):
        Coverage.from_json({"reached": [{"states": []}]})


def test_a_command_that_is_not_zread_s_is_refused() -> None:
    with pytest.raises(CoverageError, match="'nope' is not a zread command"):
        Coverage().add(Reached("nope"))


def run_journaled(journal: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "simulator", *args, "--stdio", "--speed", "0", "--no-files"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={"ZREAD_SIM_JOURNAL": str(journal), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=60,
    )


def test_a_journaled_process_reaches_what_the_same_run_in_process_does(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    run_journaled(journal, "generate", "-y", "--skip-failed", "--scenario", "failing-pages")
    from_process = Coverage()
    assert from_process.add_journal(str(journal)) == 1
    in_process = start("generate", "-y", "--skip-failed", scenario="failing-pages")
    in_process.wait_done()
    expected = Coverage()
    expected.add(in_process.session.reached)
    assert from_process.as_json() == expected.as_json()


def test_main_prints_the_table_and_holds_the_run_to_fail_under(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "journal.jsonl"
    run_journaled(journal, "version")
    run_journaled(journal, "generate", "-y")
    report = tmp_path / "report.json"
    assert main([str(journal), "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("zread coverage: 2 sessions;")
    assert "version           1  2/2 100%" in out
    assert json.loads(report.read_text())["commands"][0]["command"] == "generate"
    assert main([str(journal), "--fail-under", "99"]) == 1
    assert "is below the required 99%" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "journal {path}: No such file or directory"),
        (b"not json\n", "line 1 is not a journal record"),
        (b'{"kind":"exit","pid":1,"t":0.0,"code":0,"how":"done"}\n', "no cover records"),
    ],
)
def test_main_says_in_one_line_why_it_cannot_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, reason: str
) -> None:
    path = tmp_path / "journal.jsonl"
    if content is not None:
        path.write_bytes(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zread-sim coverage: ")
    assert reason.format(path=path) in err


def test_main_names_the_json_report_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "journal.jsonl"
    run_journaled(journal, "version")
    report = tmp_path / "no-such-folder" / "report.json"
    assert main([str(journal), "--json", str(report)]) == 2
    err = capsys.readouterr().err
    assert err == f"zread-sim coverage: --json {report}: cannot write: No such file or directory\n"


def test_main_refuses_bad_arguments_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("zread-sim coverage: the following arguments")
    assert main(["j", "--fail-under", "lots"]) == 2
    assert main(["--help"]) == 0
    assert "--fail-under" in capsys.readouterr().out
