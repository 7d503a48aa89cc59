"""simulator.core.replay: a cassette played as a session, driven as a runner drives it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simulator.core.interface import SessionError
from simulator.core.replay import ReplaySession


def _event(value: str, waiting_for: list[str], *, done: bool = False, error: str = "") -> str:
    vm = {"fields": [{"json_key": "language", "value": value}], "dirty": value != "en"}
    return json.dumps(
        {"vm": vm, "waiting_for": waiting_for, "done": done, "error": error},
        separators=(",", ":"),
    )


WAIT = ["update_fields", "save", "quit"]
E1, E2, E3 = _event("en", WAIT), _event("zh", WAIT), _event("zh", [], done=True)
UPDATE = '{"type": "update_fields", "params": {"fields": {"language": "zh"}}}'
QUIT = '{"type": "quit"}'


def cassette(*lines: tuple[float, str, str], exit_code: int = 0) -> dict[str, Any]:
    counts = {"in": 0, "out": 0, "err": 0}
    entries = []
    for t, direction, line in lines:
        counts[direction] += 1
        entries.append({"t": t, "dir": direction, "n": counts[direction], "line": line})
    return {"format": "zread-sim-cassette", "version": 1, "exit_code": exit_code, "lines": entries}


RUN = cassette(
    (0.2, "out", E1), (0.5, "in", UPDATE), (0.6, "out", E2), (1.0, "in", QUIT), (1.1, "out", E3)
)


def test_events_come_at_their_recorded_times_times_the_speed() -> None:
    session = ReplaySession(RUN, speed=2.0)
    assert session.start() == []
    assert session.next_deadline() == pytest.approx(0.4)
    assert session.advance(0.3) == []
    out = session.advance(0.4)
    assert out == [E1.encode() + b"\n"]
    assert session.waiting_for == tuple(WAIT)
    assert session.next_deadline() is None


def test_a_matching_line_plays_what_followed_it_and_the_end_is_the_recorded_exit() -> None:
    session = ReplaySession(RUN, speed=1.0)
    session.start()
    session.advance(0.2)
    # The same command, other spacing and key order: it matches.
    fed = session.feed(b'{"params":{"fields":{"language":"zh"}},"type":"update_fields"}')
    assert fed == [] and not fed.done
    assert session.next_deadline() == pytest.approx(0.3)  # 0.1 s after the line
    timer = session.next_timer()
    assert timer is not None and timer.seq <= session.armed
    assert session.step() == [E2.encode() + b"\n"]
    assert session.exit_code is None
    quit_out = session.feed(QUIT.encode())
    assert not quit_out.done
    last = session.advance(10.0)
    assert last == [E3.encode() + b"\n"] and last.done
    assert session.done and session.exit_code == 0
    assert not session.violations and len(session.journal) == 2


def test_events_still_due_are_written_before_a_matching_line_is_answered() -> None:
    session = ReplaySession(RUN)
    session.start()
    out = session.feed(UPDATE.encode())  # before the first event was due
    assert out == [E1.encode() + b"\n"]
    assert session.advance(0.1) == [E2.encode() + b"\n"]


def test_a_diverging_line_is_answered_like_a_rejection_and_the_replay_stays() -> None:
    told: list[str] = []
    session = ReplaySession(RUN, speed=0, on_divergence=told.append)
    session.start()
    session.advance(0)
    out = session.feed(b'{"type":"save"}')
    event = json.loads(out[0])
    assert event["error"] == f"replay diverged: expected {UPDATE}"
    assert event["vm"] == json.loads(E1)["vm"] and event["waiting_for"] == WAIT
    assert event["done"] is False and not out.done
    assert told == [
        f"zread-sim: replay diverged at line 1: the cassette expected {UPDATE}, "
        'the client sent {"type":"save"}'
    ]
    assert session.violations[0].error == event["error"]
    assert session.feed(UPDATE.encode()) == []  # still where it was
    assert session.advance(0) == [E2.encode() + b"\n"]


def test_an_unexpected_quit_ends_it_with_the_last_vm() -> None:
    session = ReplaySession(RUN, speed=0)
    session.start()
    session.advance(0)
    out = session.feed(QUIT.encode())
    assert out.done and session.done
    event = json.loads(out[0])
    assert event == {"vm": json.loads(E1)["vm"], "waiting_for": [], "done": True, "error": ""}
    assert session.exit_code is None  # not the recording's end
    assert session.feed(b'{"type":"save"}') == []
    assert session.journal[-1].after_done


def test_quit_from_a_signal_and_the_api_a_runner_uses() -> None:
    session = ReplaySession(RUN, speed=0)
    with pytest.raises(SessionError):
        session.feed(QUIT.encode())
    session.start()
    with pytest.raises(SessionError):
        session.start()
    assert session.deliver("_x") == [] and session.resolve(object(), None) == []
    assert session.snapshot()["timers"][0]["trigger"] == "_replay"
    assert session.quit().done
    with pytest.raises(SessionError):
        session.quit()


def test_a_recording_that_ends_without_done_ends_after_its_last_event() -> None:
    run = cassette((0.1, "out", E1), (0.2, "err", "boom"), (0.3, "in", QUIT), exit_code=3)
    session = ReplaySession(run, speed=0)
    session.start()
    out = session.advance(0)
    assert out == [E1.encode() + b"\n"] and out.done
    assert session.exit_code == 3


def test_a_line_after_the_recorded_lines_diverges_and_speed_changes_keep_the_share() -> None:
    run = cassette((0.1, "out", E1), (0.2, "in", UPDATE), (0.3, "out", E2), (1.3, "out", E1))
    session = ReplaySession(run, speed=1.0)
    session.start()
    session.advance(0.1)
    session.feed(UPDATE.encode())
    session.advance(0.2)
    assert session.next_deadline() == pytest.approx(1.2)
    session.set_speed(0.5)
    assert session.next_deadline() == pytest.approx(0.7)
    out = session.feed(b'{"type":"save"}')
    assert "expected nothing more" in json.loads(out[0])["error"]
    with pytest.raises(SessionError):
        session.set_speed(-1)


def test_a_line_without_newline_and_one_in_base64() -> None:
    import base64

    run = cassette((0.1, "out", E1))
    run["lines"][0]["eol"] = False
    encoded = base64.b64encode(b"\xff").decode()
    run["lines"].append({"t": 0.2, "dir": "out", "n": 2, "line_b64": encoded})
    session = ReplaySession(run, speed=0)
    session.start()
    assert session.advance(0) == [E1.encode(), b"\xff\n"]


def test_what_a_replay_keeps_of_the_client_lines_is_bounded_as_a_session_does() -> None:
    from simulator.core.transcript import FIRST_VIOLATIONS, RECENT_LINES, RECENT_VIOLATIONS

    session = ReplaySession(RUN, speed=0, on_divergence=lambda _: None)
    session.start()
    session.advance(0)
    lines = [f'{{"type":"save","n":{n}}}'.encode() for n in range(RECENT_LINES + 200)]
    for line in lines:
        assert len(session.feed(line)) == 1  # each divergence answered
    assert session.transcript.total == session.transcript.total_violations == len(lines)
    assert [e.line for e in session.journal] == lines[-RECENT_LINES:]
    kept = [e.line for e in session.violations]
    assert kept == lines[:FIRST_VIOLATIONS] + lines[-RECENT_VIOLATIONS:]
    assert session.feed(UPDATE.encode()) == []  # still where it was
