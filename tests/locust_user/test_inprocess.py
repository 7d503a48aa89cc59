"""simulator.locust_user.inprocess: in-process sessions on one hub, their figures, their verdict.

Runs here on gevent's hub without Locust (nothing is monkey-patched): real sessions in
this process, their timers in real time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gevent
import pytest

from simulator.locust_user.drive import Prepared, Report
from simulator.locust_user.inprocess import Fleet, GreenLoop, process_hub, run_inprocess
from tests.locust_user.plans import Figure
from tests.locust_user.plans import plan as _plan
from tests.locust_user.plans import report as _report

pytestmark = pytest.mark.timeout(60)


def test_an_in_process_session_reports_each_timer_command_and_itself() -> None:
    figures: list[Figure] = []
    plan = _plan()
    report = _report(figures)
    run_inprocess(plan, Prepared.of("generate", (), "flaky-pages"), 3, report)
    report.session("generate")
    kinds = {(kind, name) for kind, name, _, _ in figures}
    assert ("lateness", "_page_done") in kinds and ("command", "select_action") in kinds
    assert figures[-1][:2] == ("session", "generate") and figures[-1][3] == ""
    assert all(ms >= 0 for _, _, ms, _ in figures)


def test_a_bad_command_fails_the_session_and_its_command() -> None:
    figures: list[Figure] = []
    sent: list[bytes] = []

    def careless(event: Mapping[str, Any]) -> bytes | None:
        if not sent and not event["done"]:
            sent.append(b'{"type":"bogus"}\n')
            return sent[0]
        return None if event["waiting_for"] != ["quit"] else b'{"type":"quit"}\n'

    plan = _plan(careless, args=("-y",), scenario="default")
    report = _report(figures, in_full=False)
    run_inprocess(plan, Prepared.of("generate", ("-y",), "default"), 0, report)
    report.session("generate")
    command = next(f for f in figures if f[0] == "command")
    assert command[1] == "bogus" and "not allowed" in command[3]
    assert figures[-1][0] == "session" and "client mistake" in figures[-1][3]


def test_sessions_side_by_side_each_end_with_their_own_transcript() -> None:
    prepared = Prepared.of("generate", ("-y",), "default")
    fleet = Fleet(prepared)
    reports = [Report("generate", lambda *f: None, in_full=seed == 0) for seed in range(6)]
    try:
        for seed, report in enumerate(reports):
            fleet.start(_plan(args=("-y",), scenario="default", speed=0.05), seed, report)
        assert len(fleet.running) == 6
        ended = [fleet.next_ended() for _ in range(6)]
    finally:
        fleet.close()
    assert sorted(map(id, ended)) == sorted(map(id, reports))
    for report in reports:
        report.session("generate")
        assert report.problem == "" and report.checker.clean and report.done_at is not None
        assert report.lines_out == reports[0].lines_out  # a whole run each


def test_an_answer_left_unsent_fails_as_left_waiting() -> None:
    report = _report([])
    plan = _plan(lambda event: None, scenario="default", speed=0.0)
    run_inprocess(plan, Prepared.of("generate", (), "default"), 0, report)
    assert report.problem == "left waiting for select_action, cancel, quit: no answer came"


def test_an_answer_that_raises_fails_its_session_and_not_the_others() -> None:
    def broken(event: Mapping[str, Any]) -> bytes | None:
        raise RuntimeError("oops")

    prepared = Prepared.of("generate", ("-y",), "default")
    fleet = Fleet(prepared)
    bad, good = _report([]), _report([])
    try:
        fleet.start(_plan(broken, args=("-y",), scenario="default", speed=0.0), 0, bad)
        fleet.start(_plan(args=("-y",), scenario="default", speed=0.0), 1, good)
        ended = {id(fleet.next_ended()), id(fleet.next_ended())}
    finally:
        fleet.close()
    assert ended == {id(bad), id(good)}
    assert bad.problem == "the answer to an event raised RuntimeError: oops"
    assert good.problem == "" and good.done_at is not None


def test_a_session_past_its_timeout_fails_and_is_ended() -> None:
    report = _report([])
    plan = _plan(args=("-y",), scenario="default", speed=1.0, timeout=0.2)
    began = time.monotonic()
    run_inprocess(plan, Prepared.of("generate", ("-y",), "default"), 0, report)
    assert report.problem == "no done:true within 0.2 s"
    assert time.monotonic() - began < 5


def test_a_closed_fleet_leaves_no_wakeup_on_the_hub_and_lets_go_of_its_sessions() -> None:
    prepared = Prepared.of("generate", ("-y",), "default")
    fleet = Fleet(prepared)
    fleet.start(_plan(args=("-y",), scenario="default", speed=1.0), 0, _report([]))
    (client,) = fleet.running
    live = client.live
    assert live is not None and live.next_wakeup() is not None
    assert process_hub().wakeup(live) is not None
    fleet.close()
    assert client.live is None and not fleet.running  # let go of: no cycle left
    assert live.next_wakeup() is None and process_hub().wakeup(live) is None


def test_the_green_loop_runs_callbacks_in_time_order_and_skips_cancelled_ones() -> None:
    loop = GreenLoop()
    ran: list[str] = []
    now = loop.time()
    loop.call_at(now + 0.05, lambda: ran.append("late"))
    loop.call_at(now + 0.01, lambda: ran.append("early"))
    loop.call_at(now + 0.02, lambda: ran.append("cancelled")).cancel()
    loop.call_soon(lambda: ran.append("soon"))
    gevent.sleep(0.1)
    assert ran == ["soon", "early", "late"]


def test_the_green_loop_wakes_for_a_callback_earlier_than_its_sleep() -> None:
    loop = GreenLoop()
    ran: list[float] = []
    loop.call_at(loop.time() + 5.0, lambda: ran.append(0.0))
    gevent.sleep(0.01)  # it sleeps for 5 s now
    began = loop.time()
    loop.call_at(began + 0.02, lambda: ran.append(loop.time() - began))
    gevent.sleep(0.2)
    assert len(ran) == 1 and ran[0] < 0.15


def test_a_callback_that_raises_is_said_and_the_loop_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    loop = GreenLoop()
    ran: list[int] = []

    def boom() -> None:
        raise ValueError("bad")

    loop.call_soon(boom)
    loop.call_soon(lambda: ran.append(1))
    gevent.sleep(0.05)
    assert ran == [1]
    assert "internal error in a session: ValueError('bad')" in capsys.readouterr().err


def test_an_error_of_the_simulators_own_fails_its_session_and_not_the_hub(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from simulator.locust_user.drive import TimedSession

    def broken(self: TimedSession, timer: Any, out: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(TimedSession, "_due", broken)
    report = _report([])
    plan = _plan(args=("-y",), scenario="default", speed=0.0)
    run_inprocess(plan, Prepared.of("generate", ("-y",), "default"), 0, report)
    assert report.problem == "the simulator's own error: RuntimeError: a bug"
    monkeypatch.undo()
    after = _report([])
    run_inprocess(plan, Prepared.of("generate", ("-y",), "default"), 1, after)
    assert after.problem == "" and after.done_at is not None  # the hub goes on


def test_an_error_in_a_sessions_first_event_fails_it_and_not_its_fleet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from simulator.locust_user.drive import TimedSession

    start = TimedSession.start

    def broken_for_seed_1(self: TimedSession) -> Any:
        if self.runtime.seed == 1:
            raise RuntimeError("no first event")
        return start(self)

    monkeypatch.setattr(TimedSession, "start", broken_for_seed_1)
    fleet = Fleet(Prepared.of("generate", ("-y",), "default"))
    reports = [_report([]) for _ in range(3)]
    try:
        for seed, report in enumerate(reports):
            fleet.start(_plan(args=("-y",), scenario="default", speed=0.0), seed, report)
        ended = [fleet.next_ended() for _ in range(3)]
    finally:
        fleet.close()
    assert sorted(map(id, ended)) == sorted(map(id, reports))
    assert reports[1].problem == "the simulator's own error: RuntimeError: no first event"
    assert reports[0].problem == reports[2].problem == ""


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda event: '{"type":"quit"}', "the answer to an event is a str, not bytes"),
        (lambda event: gevent.sleep(5), "the answer to an event raised Timeout: 0.01 seconds"),
    ],
)
def test_an_answer_of_the_wrong_kind_or_that_times_out_fails_its_session(
    answer: Any, problem: str
) -> None:
    def timed(event: Mapping[str, Any]) -> Any:
        with gevent.Timeout(0.01):
            return answer(event)

    report = _report([])
    run_inprocess(
        _plan(timed, scenario="default", speed=0.0),
        Prepared.of("generate", (), "default"),
        0,
        report,
    )
    assert report.problem == problem
    after = _report([])
    run_inprocess(
        _plan(args=("-y",), scenario="default", speed=0.0),
        Prepared.of("generate", ("-y",), "default"),
        1,
        after,
    )
    assert after.problem == "" and after.done_at is not None  # the hub goes on


def test_the_green_loop_outlives_a_timeout_and_comes_back_if_killed() -> None:
    loop = GreenLoop()
    ran: list[int] = []

    def times_out() -> None:
        raise gevent.Timeout(0)

    loop.call_soon(times_out)
    loop.call_soon(lambda: ran.append(1))
    gevent.sleep(0.02)
    assert ran == [1]
    greenlet = loop._greenlet
    assert greenlet is not None
    greenlet.kill()
    loop.call_soon(lambda: ran.append(2))  # a dead loop's greenlet is started again
    gevent.sleep(0.02)
    assert ran == [1, 2]
