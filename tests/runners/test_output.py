"""simulator.runners.output: from a session's event lines to the actions a runner carries out."""

from __future__ import annotations

import json

import msgspec
import pytest

from simulator import clijson
from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.launch import build_session
from simulator.runners.output import OutputStage
from simulator.scenario import faults, load_scenario
from simulator.scenario.faults import Fault
from tests.runners.helpers import stage_of

GENERATE = b'{"type":"select_action","params":{"action":"generate"}}'


def session_with(
    command: str,
    *args: str,
    faults_: list[Fault] | None = None,
    speed: float = 0.0,
    scenario: str = "default",
) -> Session:
    loaded = load_scenario(scenario)
    if faults_ is not None:
        loaded = msgspec.structs.replace(loaded, faults=faults_)
    return build_session(command, args, scenario=loaded, speed=speed)


def run_all(session: Session, stage: OutputStage) -> tuple[list[bytes], list[faults.Action]]:
    """Start and fire every timer one event at a time, as the runners do."""
    first = session.start()
    events, actions = list(first), stage.actions(first)
    while (deadline := session.next_deadline()) is not None:
        batch = session.advance(deadline, limit=1)
        events += batch
        actions += stage.actions(batch)
    return events, actions


def written(actions: list[faults.Action]) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, faults.Write))


def test_plain_render_is_one_write_per_event() -> None:
    session = session_with("generate", "-y")
    events, actions = run_all(session, stage_of(session))
    assert len(events) > 20 and json.loads(events[-1])["done"] is True
    assert actions == [faults.Write(event) for event in events]


def test_frame_makes_each_event_a_chunk_and_frames_the_last() -> None:
    session = session_with("generate", "-y")
    events, actions = run_all(session, stage_of(session, frame=True))
    assert all(isinstance(a, faults.Write) for a in actions)
    assert len(actions) == len(events)
    for action, event in zip(actions[:-1], events[:-1], strict=True):
        assert isinstance(action, faults.Write)
        assert action.data == clijson.CHUNK_MARKER.encode() + event
        assert clijson.chunk_payload(action.data) == event[:-1]
    last = actions[-1]
    assert isinstance(last, faults.Write)
    assert last.data == clijson.chunk_line(events[-1][:-1]) + clijson.framed(events[-1][:-1])
    out = written(actions)
    assert out.count(clijson.BEGIN_MARKER.encode()) == 1
    assert clijson.extract(out) == events[-1][:-1]
    assert clijson.unmarshal(out) == json.loads(events[-1])


def test_frame_of_a_batch_frames_only_its_last_event() -> None:
    """A batch from one session call (every timer at once) still has one framed document."""
    session = session_with("generate", "-y")
    stage = stage_of(session, frame=True)
    stage.actions(session.start())
    batch = session.advance(float("inf"))
    assert len(batch) > 20 and session.done
    out = written(stage.actions(batch))
    lines = out.split(b"\n")
    assert sum(1 for line in lines if line.startswith(clijson.CHUNK_MARKER.encode())) == len(batch)
    assert out.count(clijson.BEGIN_MARKER.encode()) == 1
    assert clijson.unmarshal(out) == json.loads(batch[-1])


def test_frame_of_a_single_event_command() -> None:
    session = session_with("version")
    out = written(stage_of(session, frame=True).actions(session.start()))
    event = clijson.unmarshal(out)
    assert event["done"] is True and event["vm"]["version"]
    (chunk,) = [line for line in out.split(b"\n") if clijson.chunk_payload(line) is not None]
    assert json.loads(clijson.chunk_payload(chunk) or b"") == event


def test_faults_act_on_each_event() -> None:
    plan = [
        Fault(kind="diagnostic", text="after two", after_event=2),
        Fault(kind="stderr", text="on done", on_state="done"),
        Fault(kind="duplicate", after_event=1),
    ]
    session = session_with("generate", "-y", faults_=plan)
    events, actions = run_all(session, stage_of(session))
    assert actions[:4] == [
        faults.Write(events[0]),
        faults.Write(events[0]),
        faults.Write(events[1]),
        faults.Write(b"after two\n"),
    ]
    assert actions[-1] == faults.Stderr("on done")
    assert actions[-2] == faults.Write(events[-1])


def test_faults_act_on_the_framed_bytes() -> None:
    plan = [
        Fault(kind="diagnostic", text="noise", after_event=1),
        Fault(kind="split", pieces=2, pause=0.5, on_state="done"),
    ]
    session = session_with("generate", "-y", faults_=plan, speed=0.0)
    events, actions = run_all(session, stage_of(session, frame=True))
    assert actions[0] == faults.Write(clijson.chunk_line(events[0][:-1]))
    assert actions[1] == faults.Write(b"noise\n")
    *_, first, pause, second = actions
    assert pause == faults.Pause(0.0)  # the split's pause, times the speed
    assert isinstance(first, faults.Write) and isinstance(second, faults.Write)
    assert first.data + second.data == clijson.chunk_line(events[-1][:-1]) + clijson.framed(
        events[-1][:-1]
    )
    assert clijson.unmarshal(written(actions)) == json.loads(events[-1])


def test_a_fault_added_later_counts_the_events_written_before() -> None:
    """after_event is the n-th event of the run (1 is the first), whenever it was added."""
    session = session_with("generate", speed=0.0)
    stage = stage_of(session)
    first = session.start()
    assert stage.actions(first) == [faults.Write(first[0])]
    stage.faults.add(Fault(kind="diagnostic", text="third", after_event=3))
    second = session.feed(GENERATE)
    assert stage.actions(second) == [faults.Write(second[0])]
    third = session.advance(session.next_deadline() or 0.0, limit=1)
    assert stage.actions(third) == [faults.Write(third[0]), faults.Write(b"third\n")]


def test_a_fault_added_now_fires_at_the_next_event_only() -> None:
    session = session_with("generate", speed=0.0)
    stage = stage_of(session)
    stage.actions(session.start())
    stage.faults.add(Fault(kind="diagnostic", text="next"), now=True)
    assert stage.actions(session.feed(GENERATE))[-1] == faults.Write(b"next\n")
    rest = stage.actions(session.advance(session.next_deadline() or 0.0, limit=1))
    assert faults.Write(b"next\n") not in rest


@pytest.mark.parametrize("frame", [False, True])
def test_render_of_nothing_is_nothing(frame: bool) -> None:
    session = session_with("generate")
    stage = stage_of(session, frame=frame)
    stage.actions(session.start())
    assert stage.actions(Outcome()) == []


def test_a_plain_stage_counts_the_events_a_runner_wrote_itself() -> None:
    session = session_with("generate", speed=0.0)
    stage = stage_of(session)
    assert stage.plain and not stage_of(session, frame=True).plain
    stage.count(session.start())  # written by the runner's fast path
    stage.count(session.feed(GENERATE))
    stage.faults.add(Fault(kind="diagnostic", text="third", after_event=3))
    assert not stage.plain
    third = session.advance(session.next_deadline() or 0.0, limit=1)
    assert stage.actions(third) == [faults.Write(third[0]), faults.Write(b"third\n")]


def test_a_plain_stage_passes_and_counts_what_the_runner_writes_as_it_is() -> None:
    session = session_with("generate", speed=0.0)
    stage = stage_of(session)
    assert stage.passes(session.start())  # select_action, counted as written
    assert stage.passes(session.feed(GENERATE))
    stage.faults.add(Fault(kind="diagnostic", text="third", after_event=3))
    third = session.advance(session.next_deadline() or 0.0, limit=1)
    assert not stage.passes(third)  # a fault: the actions say how, and count it
    assert stage.actions(third) == [faults.Write(third[0]), faults.Write(b"third\n")]


def test_a_framed_stage_never_passes_an_event_as_it_is() -> None:
    session = session_with("generate", speed=0.0)
    stage = stage_of(session, frame=True)
    first = session.start()
    assert not stage.passes(first)
    assert all(isinstance(a, faults.Write) and a.data != first[0] for a in stage.actions(first))


def test_a_counted_state_is_the_one_on_state_compares_with() -> None:
    session = session_with("generate", speed=0.0)
    stage = stage_of(session)
    stage.count(session.start())  # select_action
    stage.count(session.feed(GENERATE))  # running
    stage.faults.add(Fault(kind="diagnostic", text="entered", on_state="running"))
    more = session.advance(session.next_deadline() or 0.0, limit=1)
    assert faults.Write(b"entered\n") not in stage.actions(more)  # running was not entered anew
