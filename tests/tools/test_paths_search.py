"""Tests for simulator.tools.paths_search: the cases take every transition, are few and
the same every time, survive JSON, and replay."""

from __future__ import annotations

import json

import pytest

from simulator.tools.paths_search import Case, Step, replay, search
from statecharts import COMMANDS, load_chart
from tests.tools.pathcases import cases_of


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
    again, _ = search("generate")
    assert [c.as_json() for c in again] == [c.as_json() for c in cases_of("generate")]


def test_a_case_survives_json() -> None:
    for case in cases_of("login"):
        assert Case.from_json(json.loads(json.dumps(case.as_json()))) == case


def test_a_step_is_written_with_what_it_does_only() -> None:
    expect = {"waiting_for": ["quit"]}
    assert Step(3, expect).as_json() == {"after_event": 3, "expect": expect}
    sent = Step(1, expect, {"type": "quit", "params": {}}).as_json()
    assert sent == {"after_event": 1, "expect": expect, "send": {"type": "quit", "params": {}}}
    assert Step(2, expect, approve=False).as_json()["approve"] is False


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


def test_a_case_whose_session_ends_early_fails_the_replay() -> None:
    case = next(c for c in cases_of("generate") if c.steps)
    late = Step(case.events + 5, case.steps[0].expect, case.steps[0].send)
    broken = Case.from_json({**case.as_json(), "steps": [late.as_json()]})
    with pytest.raises(AssertionError, match="the session ended before event"):
        replay(broken)
