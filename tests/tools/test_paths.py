"""Tests for simulator.tools.paths: the cases take every transition, replay, and run."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from simulator.tools.paths import Case, Step, main, paths, pytest_module, replay
from statecharts import COMMANDS, load_chart

pytest_plugins = ["pytester"]


@functools.cache
def cases_of(command: str) -> tuple[Case, ...]:
    cases, left = paths(command)
    assert left == [], f"{command}: no case takes {left}"
    return tuple(cases)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_cases_replayed_take_every_transition_of_the_chart(command: str) -> None:
    every = {t.key for t in load_chart(command).transitions}
    taken: set[str] = set()
    for case in cases_of(command):
        sim = replay(case)
        reached = sim.session.reached.transitions
        assert reached == case.transitions, case.name  # what it says it takes, exactly
        taken |= reached
    assert taken == every


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_cases_are_few_shortest_first_and_each_adds_something(command: str) -> None:
    cases = cases_of(command)
    assert [(c.events, len(c.steps)) for c in cases] == sorted(
        (c.events, len(c.steps)) for c in cases
    )
    assert [c.name for c in cases] == [f"{command}-{i}" for i in range(1, len(cases) + 1)]
    for index, case in enumerate(cases):
        others = set().union(*(c.transitions for j, c in enumerate(cases) if j != index))
        assert case.transitions - others, f"{case.name} takes nothing the others do not"


def test_the_cases_are_the_same_every_time() -> None:
    again, _ = paths("generate")
    assert [c.as_json() for c in again] == [c.as_json() for c in cases_of("generate")]


def test_a_case_survives_json() -> None:
    for case in cases_of("login"):
        assert Case.from_json(json.loads(json.dumps(case.as_json()))) == case


def test_login_s_peer_cases_answer_the_approval() -> None:
    peer_cases = [c for c in cases_of("login") if c.peer]
    answers = {s.approve for c in peer_cases for s in c.steps if s.approve is not None}
    assert answers == {True, False}
    taken = set().union(*(c.transitions for c in peer_cases))
    assert "_answered waiting->select_model [peer_approved]" in taken
    assert "_answered waiting->error" in taken


def test_a_step_whose_event_is_not_the_expected_one_fails_the_replay() -> None:
    case = next(c for c in cases_of("generate") if c.steps)
    first = case.steps[0]
    wrong = Step(first.after_event, {**first.expect, "waiting_for": ["nothing"]}, first.send)
    broken = Case.from_json({**case.as_json(), "steps": [wrong.as_json()]})
    with pytest.raises(AssertionError, match="event 1 is"):
        replay(broken)


def test_the_pytest_module_passes_against_the_simulator(pytester: pytest.Pytester) -> None:
    for command in COMMANDS:
        pytester.makepyfile(**{f"test_paths_{command}": pytest_module(command, cases_of(command))})
    result = pytester.runpytest("-p", "no:cacheprovider", "--zread-coverage")
    result.assert_outcomes(passed=sum(len(cases_of(c)) for c in COMMANDS))
    result.stdout.fnmatch_lines(["zread coverage: * transitions 100.0% of the commands run"])


def test_the_pytest_module_fails_when_the_path_is_not_taken(pytester: pytest.Pytester) -> None:
    case = next(c for c in cases_of("update") if c.steps)
    data = case.as_json()
    data["transitions"] = [*data["transitions"], "download has_update->nowhere"]
    pytester.makepyfile(test_broken=pytest_module("update", [Case.from_json(data)]))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)


def test_main_writes_json_lines_or_a_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["name"] for line in lines] == [c.name for c in cases_of("config")]
    out = tmp_path / "test_generate_paths.py"
    assert main(["generate", "--format", "pytest", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    compile(text, str(out), "exec")
    assert "def test_path(zread_sim" in text


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["nope"], "unknown command 'nope' (one of browse, generate"),
        (["config", "--format", "svg"], "argument --format: invalid choice"),
        (["config", "--out", "/no/such/dir/x.py"], "/no/such/dir/x.py: No such file"),
    ],
)
def test_main_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zread-sim paths: ") and reason in err
