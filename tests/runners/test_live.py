"""simulator.runners.live: one session in real time on a clock the test moves by hand,
writing to an endpoint that keeps everything. Each lifecycle rule, and the way effects
and split pauses are carried out, without a loop, a thread or a pipe."""

from __future__ import annotations

import json
import urllib.request

import msgspec
import pytest

from simulator.core.effects import AskApproval
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.launch import build_session
from simulator.runners.hooks import Live
from simulator.runners.live import NOBODY_ANSWERS, LiveSession
from simulator.scenario import load_scenario
from simulator.scenario.faults import Fault
from tests.runners.helpers import Clock, Keeper, Told, live, run_out, stage_of

GENERATE = b'{"type":"select_action","params":{"action":"generate"}}'


# -- the lifecycle ---------------------------------------------------------------------


def test_the_first_event_comes_before_anything_is_read() -> None:
    runner, keeper, _ = live("generate")
    assert keeper.writes == []
    runner.start()
    assert [e["vm"]["state"] for e in keeper.events] == ["select_action"]
    assert runner.reading and not runner.finished


def test_with_quit_at_eof_the_end_of_input_is_a_quit_once_an_answer_is_awaited() -> None:
    told = Told()
    runner, keeper, clock = live("generate", observer=told)
    runner.quit_at_eof = True
    runner.start()
    runner.received(GENERATE + b"\n")
    runner.received(b"")  # the answer came first: the run goes on, its timers fire
    assert not runner.finished and keeper.stderr_lines == []
    run_out(runner, clock)
    assert keeper.events[-1]["done"] is True and keeper.events[-1]["vm"]["state"] == "done"
    assert told.ends == [(0, "done")]

    told = Told()
    runner, keeper, _ = live("generate", observer=told)
    runner.quit_at_eof = True
    runner.start()
    runner.received(b"")  # at a gate nobody can answer: quit, not a stderr line
    assert runner.finished and keeper.events[-1]["done"] is True
    assert keeper.stderr_lines == [] and told.ends == [(0, "eof-quit")]


def test_a_paused_run_is_not_waiting_for_an_answer_until_resumed() -> None:
    told = Told()
    runner, keeper, _ = live("generate", observer=told)
    runner.quit_at_eof = True
    runner.start()
    runner.pause()  # a control peer holds it: it may resume it
    runner.received(b"")
    assert not runner.finished and keeper.stderr_lines == []
    runner.resume()
    assert runner.finished and told.ends == [(0, "eof-quit")]


def test_done_ends_the_run_with_code_0_and_stops_reading() -> None:
    runner, keeper, clock = live("generate", "-y")
    runner.start()
    run_out(runner, clock)
    assert keeper.events[-1]["done"] is True
    assert runner.finished and runner.code == 0 and not runner.reading
    assert runner.next_wakeup() is None


def test_end_of_input_is_not_quit_a_gate_says_nobody_can_answer_once() -> None:
    told = Told()
    runner, keeper, _ = live("generate", observer=told)
    runner.start()
    runner.received(b"")
    assert len(keeper.events) == 1 and not runner.finished and told.ends == []
    assert runner.input_closed and not runner.reading
    assert keeper.stderr_lines == [NOBODY_ANSWERS.format(waiting="select_action, cancel, quit")]
    runner.tick()
    assert len(keeper.stderr_lines) == 1  # said once
    runner.quit()  # a signal still ends it
    assert keeper.events[-1]["done"] is True
    assert keeper.events[-1]["vm"]["state"] == "select_action"
    assert told.ends == [(0, "stdin-closed-left-waiting")]


def test_end_of_input_mid_run_lets_the_run_go_on_to_done() -> None:
    runner, keeper, clock = live("generate", "-y")
    runner.start()
    runner.received(b"")
    assert keeper.stderr_lines == []  # timers are pending: it is not waiting for anyone
    run_out(runner, clock)
    assert keeper.events[-1]["done"] is True and keeper.events[-1]["vm"]["state"] == "done"
    assert runner.code == 0 and keeper.stderr_lines == []


def test_an_unterminated_last_line_is_answered_at_the_end_of_input() -> None:
    runner, keeper, clock = live("update", speed=0.0)
    runner.start()
    run_out(runner, clock)
    runner.received(b'{"type":"quit"')
    assert not runner.finished  # half a line: nothing yet
    runner.received(b"}")
    runner.received(b"")
    assert [e["done"] for e in keeper.events].count(True) == 1
    assert runner.session.violations == []


def test_a_line_is_answered_after_the_timers_due_before_it() -> None:
    runner, keeper, clock = live("update")
    runner.start()
    assert keeper.events[-1]["vm"]["state"] == "checking"
    wake = runner.next_wakeup()
    assert wake is not None
    clock.now = wake + 0.001  # the check is over, but no tick came yet
    runner.feed(b'{"type":"download"}')
    states = [e["vm"]["state"] for e in keeper.events]
    assert states == ["checking", "has_update", "downloading"]
    assert runner.session.violations == []


def test_quit_after_the_session_ended_is_nothing_more() -> None:
    runner, keeper, _ = live("version")
    runner.start()
    runner.quit()
    assert len(keeper.events) == 1 and runner.code == 0


def test_lines_after_done_are_journaled_not_answered() -> None:
    runner, keeper, _ = live("version")
    runner.start()
    runner.feed(b'{"type":"quit"}')
    assert len(keeper.events) == 1
    (late,) = runner.session.violations
    assert late.after_done


def test_a_reader_that_went_away_ends_the_run_quietly() -> None:
    runner, keeper, clock = live("generate", "-y")
    runner.start()
    keeper.gone = True
    run_out(runner, clock)
    assert runner.code == 0 and runner.finished
    assert not runner.session.done  # nobody saw the rest: the session never ended
    assert runner.next_wakeup() is None


def test_an_exit_fault_ends_the_run_with_its_code() -> None:
    runner, keeper, clock = live(
        "generate", "-y", faults=[Fault(kind="exit", after_event=2, code=9)]
    )
    runner.start()
    run_out(runner, clock)
    assert runner.code == 9 and len(keeper.events) == 2
    assert not runner.session.done


def test_a_hang_stops_everything_and_never_finishes() -> None:
    told = Told()
    plan = [Fault(kind="hang", after_event=3)]
    runner, keeper, clock = live("generate", "-y", faults=plan, observer=told)
    runner.start()
    run_out(runner, clock)
    assert told.ends == [(None, "hang")] and runner.hung
    assert not runner.finished and runner.code is None
    assert len(keeper.events) == 3 and not runner.reading
    runner.received(GENERATE)
    runner.quit()
    assert len(keeper.events) == 3


def test_stop_reading_ignores_what_comes_after() -> None:
    runner, keeper, _ = live("generate", faults=[Fault(kind="stop_reading", after_event=1)])
    runner.start()
    assert not runner.reading
    runner.received(GENERATE + b"\n")
    runner.received(b"")
    assert len(keeper.events) == 1 and not runner.finished


def test_close_stdout_and_stderr_reach_the_endpoint() -> None:
    plan = [
        Fault(kind="stderr", text="a diagnostic", after_event=1),
        Fault(kind="close_stdout", after_event=1),
    ]
    runner, keeper, _ = live("generate", faults=plan)
    runner.start()
    assert keeper.stderr_lines == ["a diagnostic"] and keeper.closed


# -- split pauses are waits --------------------------------------------------------------


def test_a_split_event_waits_for_its_pause_and_what_follows_keeps_its_place() -> None:
    plan = [Fault(kind="split", pieces=3, pause=0.5, after_event=1)]
    runner, keeper, clock = live("config", faults=plan)
    runner.start()
    assert len(keeper.writes) == 1  # the first piece; the rest wait
    assert runner.next_wakeup() == pytest.approx(clock.now + 0.5)
    runner.send(b'{"type":"control_response"}\n')  # a frame waits behind the event
    runner.feed(b'{"type":"update_fields","params":{"fields":{"language":"fr"}}}')
    assert len(keeper.writes) == 1
    clock.now += 0.5
    runner.tick()
    assert len(keeper.writes) == 2
    clock.now += 0.5
    runner.tick()
    assert json.loads(b"".join(keeper.writes[:3]))["vm"]["fields"][0]["value"] == "en"
    assert keeper.writes[3] == b'{"type":"control_response"}\n'
    assert json.loads(keeper.writes[4])["vm"]["fields"][0]["value"] == "fr"
    assert runner.next_wakeup() is None


def test_done_waits_for_the_rest_of_a_split_final_event() -> None:
    plan = [Fault(kind="split", pieces=2, pause=1.0, after_event=1)]
    runner, keeper, clock = live("version", faults=plan)
    runner.start()
    assert runner.session.done and not runner.finished
    clock.now += 1.0
    runner.tick()
    assert runner.finished and keeper.events[-1]["done"] is True


# -- pause, resume, set_speed --------------------------------------------------------------


def test_pause_freezes_the_clock_and_resume_keeps_the_time_left() -> None:
    runner, keeper, clock = live("update")
    runner.start()
    wake = runner.next_wakeup()
    assert wake is not None
    left = wake - clock.now
    runner.pause()
    assert runner.paused and runner.next_wakeup() is None
    frozen = runner.now()
    clock.now += 60.0
    runner.tick()
    assert runner.now() == frozen and len(keeper.events) == 1
    runner.resume()
    assert runner.next_wakeup() == pytest.approx(clock.now + left)


def test_set_speed_rescales_the_time_left() -> None:
    runner, _, clock = live("update")
    runner.start()
    wake = runner.next_wakeup()
    assert wake is not None
    left = wake - clock.now
    runner.set_speed(2.0)
    assert runner.next_wakeup() == pytest.approx(clock.now + 2 * left)


# -- effects ---------------------------------------------------------------------------------


def test_effects_are_carried_out_before_the_event_is_written() -> None:
    session = build_session("browse", (), speed=0.0)
    host = EffectHost()
    keeper = Keeper()
    runner = LiveSession(session, stage_of(session), keeper, clock=Clock(), host=host)
    try:
        runner.start()
        run_out(runner, Clock())
        serving = keeper.events[-1]
        assert serving["vm"]["state"] == "serving"
        with urllib.request.urlopen(serving["vm"]["url"], timeout=5) as response:
            assert response.status == 200
        assert len(host.servers) == 1
    finally:
        runner.close()
    assert host.servers == {}


class Approver:
    """A control peer: takes the control frames out of the input, and approvals."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.taken: list[object] = []

    def frame(self, live: Live, line: bytes) -> bool:
        if line.startswith(b'{"type":"control'):
            self.frames.append(line)
            return True
        return False

    def effect(self, live: Live, effect: object) -> bool:
        self.taken.append(effect)
        return isinstance(effect, AskApproval)


def test_a_peer_takes_an_effect_before_the_host() -> None:
    scenario = load_scenario("default")
    login = msgspec.structs.replace(scenario.world.login, approver="control")
    scenario = msgspec.structs.replace(
        scenario, world=msgspec.structs.replace(scenario.world, login=login)
    )
    session: Session = build_session("login", (), scenario=scenario)
    session.peer_attached = True
    clock = Clock()
    peer = Approver()
    runner = LiveSession(session, stage_of(session), Keeper(), clock=clock, peer=peer)
    runner.start()
    runner.feed(b'{"type":"select_region","params":{"region":"global"}}')
    while session.state != "waiting":
        wake = runner.next_wakeup()
        assert wake is not None
        clock.now = max(clock.now, wake)
        runner.tick()
    waiting = session.snapshot()["vm"]
    (ask,) = [effect for effect in peer.taken if isinstance(effect, AskApproval)]
    assert ask == AskApproval(waiting["authorize_url"], waiting["auth_timeout"])


def test_control_frames_are_taken_out_of_the_input() -> None:
    session = build_session("generate")
    keeper, peer = Keeper(), Approver()
    runner = LiveSession(session, stage_of(session), keeper, clock=Clock(), peer=peer)
    runner.start()
    runner.received(b'{"type":"control_request","request_id":"1"}\n' + GENERATE + b"\n")
    assert peer.frames == [b'{"type":"control_request","request_id":"1"}']
    assert [e["vm"]["state"] for e in keeper.events] == ["select_action", "running"]
    assert runner.session.violations == []


def test_a_tick_moves_the_session_clock_to_the_clock_whatever_fires() -> None:
    runner, keeper, clock = live("generate", "-y")
    runner.start()
    deadline = runner.session.next_deadline()
    assert deadline is not None
    clock.now = runner.origin + deadline / 2  # nothing due yet
    runner.tick()
    assert runner.session.now == runner.now() and len(keeper.events) == 1
    clock.now = runner.origin + deadline + 0.001  # one due, and then the clock moves on
    runner.tick()
    assert len(keeper.events) == 2
    assert runner.session.now == runner.now() > deadline


def test_a_tick_that_writes_to_a_reader_gone_stops_at_that_event() -> None:
    runner, keeper, _ = live("generate", "-y", speed=0)
    runner.start()
    keeper.gone = True
    runner.tick()
    assert runner.finished and runner.code == 0
    assert len(keeper.writes) == 1  # the first event, before the reader went
    assert runner.next_wakeup() is None


# -- speed 0: input between firings ------------------------------------------------------


def test_at_speed_0_a_tick_fires_only_the_timers_armed_before_it() -> None:
    runner, keeper, clock = live("generate", "-y", speed=0)
    runner.start()
    ticks = 0
    while runner.next_wakeup() is not None:
        assert runner.next_wakeup() <= clock.now  # everything is due at once
        before = runner.session.armed
        runner.tick()
        ticks += 1
        # What was armed before has fired; what those firings armed waits.
        assert all(t.seq > before for t in runner.session.pending())
    assert keeper.events[-1]["done"] is True
    assert ticks > 10  # one run, many ticks: room for input between them


def test_at_speed_0_a_quit_fed_between_ticks_ends_the_run_there() -> None:
    runner, keeper, _ = live("generate", "-y", speed=0)
    runner.start()
    runner.tick()
    runner.tick()
    shown = len(keeper.events)
    runner.received(b'{"type":"quit"}\n')
    events = keeper.events
    assert events[-1]["done"] is True
    assert len(events) <= shown + 2  # at most the firing the line came after, then done
    assert events[-1]["vm"]["state"] != "done"  # quit, not the end of the run


def test_at_speed_above_0_a_line_comes_after_every_timer_due_before_it() -> None:
    runner, keeper, clock = live("update", speed=1)
    runner.start()
    clock.now += 3600  # the process was stalled: the check and everything after are due
    runner.received(b'{"type":"download"}\n')
    assert keeper.events[-1]["error"] == ""
    assert keeper.events[-1]["vm"]["state"] == "downloading"


# -- properties (Hypothesis): a stream cut anywhere ---------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

STREAM_PIECES = st.sampled_from(
    [
        b'{"type":"select_action","params":{"action":"generate"}}\n',
        b'{"type":"update_fields","params":{"fields":{"language":"fr"}}}\n',
        b'{"type":"download"}\r\n',
        b'{"type":"quit","params":[1]}\n',
        b"[" * 3000 + b"\n",
        b"\x0b\n",
        b"\n",
        b"   \r\n",
        b'{"type":"retry","params":{"task_id":1e400}}\n',
        b"\xc3",
        b"\xa9\n",
    ]
)


@given(
    # browse is left out: each session's server has a port of its own, so its events differ
    command=st.sampled_from(["generate", "config", "update", "login"]),
    pieces=st.lists(STREAM_PIECES | st.binary(max_size=20), max_size=12),
    cuts=st.lists(st.integers(1, 64), min_size=1, max_size=8),
    speed=st.sampled_from([0.0, 1.0]),
)
def test_a_stream_cut_anywhere_gives_the_events_of_the_whole_lines(
    command: str, pieces: list[bytes], cuts: list[int], speed: float
) -> None:
    stream = b"".join(pieces)
    whole, whole_keeper, _ = live(command, speed=speed)
    cut, cut_keeper, _ = live(command, speed=speed)
    try:
        for runner in (whole, cut):
            runner.start()
        whole.received(stream)
        at, i = 0, 0
        while at < len(stream):
            size = cuts[i % len(cuts)]
            cut.received(stream[at : at + size])
            at, i = at + size, i + 1
        for runner in (whole, cut):
            runner.received(b"")
        assert b"".join(cut_keeper.writes) == b"".join(whole_keeper.writes)
        for line in b"".join(whole_keeper.writes).splitlines():
            assert list(json.loads(line)) == ["vm", "waiting_for", "done", "error"]
    finally:
        whole.close()
        cut.close()
