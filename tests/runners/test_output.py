"""simulator.runners.output: from a session's event lines to the actions a runner carries out."""

from __future__ import annotations

import json
import urllib.request

import msgspec
import pytest

from simulator import clijson
from simulator.core.effects import AskApproval
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.launch import build_session
from simulator.runners.output import Wire
from simulator.scenario import faults, load_scenario
from simulator.scenario.faults import Fault

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


def run_all(wire: Wire) -> tuple[list[bytes], list[faults.Action]]:
    """Start and fire every timer one event at a time, as the runners do."""
    session = wire.session
    events = session.start()
    actions = wire.render(events)
    while (deadline := session.next_deadline()) is not None:
        batch = session.advance(deadline, limit=1)
        events += batch
        actions += wire.render(batch)
    return events, actions


def written(actions: list[faults.Action]) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, faults.Write))


def test_plain_render_is_one_write_per_event() -> None:
    wire = Wire(session_with("generate", "-y"))
    events, actions = run_all(wire)
    assert len(events) > 20 and json.loads(events[-1])["done"] is True
    assert actions == [faults.Write(event) for event in events]


def test_frame_makes_each_event_a_chunk_and_frames_the_last() -> None:
    wire = Wire(session_with("generate", "-y"), frame=True)
    events, actions = run_all(wire)
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
    wire = Wire(session, frame=True)
    wire.render(session.start())
    batch = session.advance(float("inf"))
    assert len(batch) > 20 and session.done
    out = written(wire.render(batch))
    lines = out.split(b"\n")
    assert sum(1 for line in lines if line.startswith(clijson.CHUNK_MARKER.encode())) == len(batch)
    assert out.count(clijson.BEGIN_MARKER.encode()) == 1
    assert clijson.unmarshal(out) == json.loads(batch[-1])


def test_frame_of_a_single_event_command() -> None:
    session = session_with("version")
    out = written(Wire(session, frame=True).render(session.start()))
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
    wire = Wire(session_with("generate", "-y", faults_=plan))
    events, actions = run_all(wire)
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
    wire = Wire(session, frame=True)
    events, actions = run_all(wire)
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
    wire = Wire(session)
    first = session.start()
    assert wire.render(first) == [faults.Write(first[0])]
    wire.faults.add(Fault(kind="diagnostic", text="third", after_event=3))
    second = session.feed(GENERATE)
    assert wire.render(second) == [faults.Write(second[0])]
    third = session.advance(session.next_deadline() or 0.0, limit=1)
    assert wire.render(third) == [faults.Write(third[0]), faults.Write(b"third\n")]


def test_a_fault_added_now_fires_at_the_next_event_only() -> None:
    session = session_with("generate", speed=0.0)
    wire = Wire(session)
    wire.render(session.start())
    wire.faults.add(Fault(kind="diagnostic", text="next"), now=True)
    assert wire.render(session.feed(GENERATE))[-1] == faults.Write(b"next\n")
    rest = wire.render(session.advance(session.next_deadline() or 0.0, limit=1))
    assert faults.Write(b"next\n") not in rest


def test_effects_are_carried_out_before_the_event_is_written() -> None:
    session = session_with("browse", speed=0.0)
    host = EffectHost()
    wire = Wire(session, effects=host)
    try:
        events, _ = run_all(wire)
        serving = json.loads(events[-1])
        assert serving["vm"]["state"] == "serving"
        with urllib.request.urlopen(serving["vm"]["url"], timeout=5) as response:
            assert response.status == 200
        assert len(host.servers) == 1
    finally:
        wire.close()
    assert host.servers == {}


def test_intercept_takes_an_effect_before_the_host() -> None:
    scenario = load_scenario("default")
    login = msgspec.structs.replace(scenario.world.login, approver="control")
    scenario = msgspec.structs.replace(
        scenario, world=msgspec.structs.replace(scenario.world, login=login)
    )
    session = build_session("login", (), scenario=scenario, speed=0.0)
    session.peer_attached = True
    wire = Wire(session)
    taken: list[object] = []
    wire.intercept = lambda effect: taken.append(effect) or isinstance(effect, AskApproval)
    wire.render(session.start())
    wire.render(session.feed(b'{"type":"select_region","params":{"region":"global"}}'))
    while session.state != "waiting":
        deadline = session.next_deadline()
        assert deadline is not None
        wire.render(session.advance(deadline, limit=1))
    waiting = session.snapshot()["vm"]
    (ask,) = [effect for effect in taken if isinstance(effect, AskApproval)]
    assert ask == AskApproval(waiting["authorize_url"], waiting["auth_timeout"])


@pytest.mark.parametrize("frame", [False, True])
def test_render_of_nothing_is_nothing(frame: bool) -> None:
    session = session_with("generate")
    wire = Wire(session, frame=frame)
    wire.render(session.start())
    assert wire.render([]) == []
