"""simulator.core.view: the state every session shows and keeps, a chart's and a
cassette's alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simulator.core.interface import SessionError
from simulator.core.replay import ReplaySession
from simulator.core.view import SessionView
from simulator.launch import build_session

KEYED_VM = {"fields": [{"json_key": "llm_api_key", "value": "sk-live"}], "dirty": False}
EVENT = json.dumps(
    {"vm": KEYED_VM, "waiting_for": ["save", "quit"], "done": False, "error": ""},
    separators=(",", ":"),
)


def replay(*lines: dict[str, Any]) -> ReplaySession:
    return ReplaySession({"lines": list(lines)}, speed=1.0)


def test_both_kinds_are_views() -> None:
    assert isinstance(build_session("config"), SessionView)
    assert isinstance(replay(), SessionView)


@pytest.mark.parametrize("make", [lambda: build_session("config"), replay])
def test_start_once_and_nothing_before_it(make: Any) -> None:
    session = make()
    with pytest.raises(SessionError, match="call start"):
        session.quit()
    session.start()
    with pytest.raises(SessionError, match="already called"):
        session.start()


def test_a_snapshot_shows_the_last_vm_redacted_and_the_timers_left() -> None:
    session = replay(
        {"t": 0.5, "dir": "out", "n": 1, "line": EVENT},
        {"t": 3.0, "dir": "out", "n": 2, "line": EVENT},
    )
    session.start()
    session.advance(1.0)
    snapshot = session.snapshot()
    assert snapshot == {
        "command": "replay",
        "state": "",
        "chart_state": "",
        "vm": {"fields": [{"json_key": "llm_api_key", "value": "***"}], "dirty": False},
        "waiting_for": ["save", "quit"],
        "done": False,
        "clock": 1.0,
        "speed": 1.0,
        "timers": [{"trigger": "_replay", "deadline": 3.0, "in": 2.0}],
    }
    assert session.now == 1.0 and session.waiting_for == ("save", "quit")


def test_a_refused_line_repeats_the_last_vm_byte_for_byte() -> None:
    session = replay(
        {"t": 0.0, "dir": "out", "n": 1, "line": EVENT},
        {"t": 0.1, "dir": "in", "n": 1, "line": '{"type":"quit"}'},
        {"t": 0.2, "dir": "out", "n": 2, "line": EVENT},
    )
    session.start()
    (shown,) = session.advance(0.0)
    (refused,) = session.feed(b'{"type":"save"}')  # the cassette expects a quit
    assert refused.startswith(shown[: shown.index(b',"waiting_for"')])
    assert json.loads(refused)["error"] == 'replay diverged: expected {"type":"quit"}'
    assert not session.done
    (mistake,) = session.violations
    assert mistake.line == b'{"type":"save"}' and session.journal == [mistake]


def test_the_done_event_forgets_every_timer_and_nothing_is_answered_after() -> None:
    session = build_session("update")
    session.start()
    assert session.pending()
    (done,) = session.quit()
    assert json.loads(done)["done"] is True and session.done
    assert session.pending() == [] and session.next_deadline() is None
    assert session.feed(b'{"type":"download"}') == []
    assert session.violations[-1].after_done
    with pytest.raises(SessionError, match="already done"):
        session.quit()
