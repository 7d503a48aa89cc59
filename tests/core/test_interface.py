"""simulator.core.interface: one interface for a chart's session and a cassette's."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.core.interface import SessionError, SessionLike
from simulator.core.replay import ReplaySession
from simulator.core.session import Session
from simulator.errors import MisuseError
from simulator.launch import build_session

MEMBERS = sorted(
    {name for name in vars(SessionLike) if not name.startswith("_")}
    | set(SessionLike.__annotations__)
)


def play(session: SessionLike, answers: dict[str, bytes]) -> list[bytes]:
    """Drive ``session`` as a runner does, through the interface only: start, answer each
    gate named in ``answers`` once, fire every timer, one event at a time; then quit."""
    left = dict(answers)
    events = list(session.start())
    while not session.done:
        gate = next((g for g in session.waiting_for if g in left), None)
        if gate is not None:
            events += session.feed(left.pop(gate))
            continue
        deadline = session.next_deadline()
        if deadline is None:
            events += session.quit()
            break
        events += session.advance(deadline, limit=1)
    return events


def cassette_of(events: list[bytes], sent: list[bytes]) -> dict[str, Any]:
    """A cassette of a run whose client sent ``sent`` after the first event."""
    lines: list[dict[str, Any]] = [
        {"t": 0.0, "dir": "out", "n": 1, "line": events[0][:-1].decode()}
    ]
    lines += [{"t": 0.1, "dir": "in", "n": n, "line": s.decode()} for n, s in enumerate(sent, 1)]
    lines += [
        {"t": 0.2, "dir": "out", "n": n, "line": e[:-1].decode()}
        for n, e in enumerate(events[1:], 2)
    ]
    return {"format": "zread-sim-cassette", "version": 1, "exit_code": 0, "lines": lines}


def test_sessionerror_is_a_callers_mistake() -> None:
    assert issubclass(SessionError, MisuseError)
    with pytest.raises(SessionError, match="call start"):
        build_session("config").feed(b"{}")


@pytest.mark.parametrize("member", MEMBERS)
def test_both_sessions_have_every_member(member: str) -> None:
    chart = build_session("config")
    replay = ReplaySession({"lines": []})
    assert hasattr(chart, member) and hasattr(replay, member)


def test_a_cassette_of_a_run_plays_the_same_bytes_through_the_interface() -> None:
    answers = {"select_action": b'{"type":"select_action","params":{"action":"generate"}}'}
    chart: Session = build_session("generate", speed=0)
    events = play(chart, answers)
    assert len(events) > 10 and b'"done":true' in events[-1] and not chart.journal[-1].error
    replay = ReplaySession(cassette_of(events, list(answers.values())), speed=0)
    assert play(replay, answers) == events
    assert replay.done and replay.exit_code == 0
    for session in (chart, replay):
        snapshot = session.snapshot()
        assert snapshot["done"] is True and snapshot["timers"] == []
        assert snapshot["command"] in ("generate", "replay")
