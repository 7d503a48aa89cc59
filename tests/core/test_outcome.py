"""simulator.core.outcome: what one session call gives back, from every kind of session."""

from __future__ import annotations

from simulator.core.outcome import Outcome
from simulator.core.replay import ReplaySession
from simulator.launch import build_session

QUIT = b'{"type":"quit"}'


def test_a_new_outcome_is_an_empty_list_with_nothing_beside() -> None:
    out = Outcome()
    assert out == [] and isinstance(out, list)
    assert out.states == [] and out.effects == [] and not out.done and not out.quit


def test_outcomes_without_effects_share_one_list_that_stays_empty() -> None:
    first, second = Outcome(), Outcome()
    assert first.effects is second.effects
    session = build_session("config")
    assert session.start().effects == []
    saved = session.feed(b'{"type":"save"}')
    assert len(saved.effects) == 1 and saved.effects is not first.effects  # a list of its own
    assert Outcome().effects == []


def test_each_event_has_the_vm_state_it_shows() -> None:
    session = build_session("generate", speed=0)
    out = session.start()
    assert len(out) == len(out.states) == 1 and out.states == ["select_action"]
    out = session.feed(b'{"type":"select_action","params":{"action":"generate"}}')
    assert out.states == ["running"] and not out.done


def test_quit_says_so_the_end_of_a_run_does_not() -> None:
    by_line = build_session("config")
    by_line.start()
    quit_line = by_line.feed(QUIT)
    assert quit_line.done and quit_line.quit
    by_runner = build_session("config")
    by_runner.start()
    assert by_runner.quit().quit
    ended = build_session("version")
    first = ended.start()
    assert first.done and not first.quit  # version ends by itself
    refused = build_session("config")
    refused.start()
    bad = refused.feed(b'{"type":"quit","params":[1]}')  # params must be an object
    assert bad[0] and not bad.done and not bad.quit


def test_a_replay_quit_says_so_too() -> None:
    replay = ReplaySession({"lines": [{"t": 0.0, "dir": "out", "n": 1, "line": "{}"}]})
    replay.start()
    out = replay.feed(QUIT)
    assert out.done and out.quit
