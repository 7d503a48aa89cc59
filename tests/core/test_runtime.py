"""simulator.core.runtime: what a chart's model uses of its session, on real charts."""

from __future__ import annotations

import gc
import random

import msgspec
import pytest

from simulator.core.chart_check import ChartError
from simulator.core.runtime import ChartRuntime
from simulator.core.timers import Timers
from simulator.launch import build_session
from simulator.scenario import load_scenario
from simulator.scenario.failures import Failure
from simulator.scenario.timing import Delay
from statecharts import load_chart


def runtime_of(command: str, *, seed: int = 0, speed: float = 1.0) -> ChartRuntime:
    chart = load_chart(command)
    scenario = load_scenario("default")
    return ChartRuntime(chart, scenario, chart.flags_type(), seed, Timers(speed=speed))


def test_the_driver_uses_the_runtime_and_the_runtime_holds_no_session() -> None:
    session = build_session("generate")
    assert session.driver.rt is session.runtime
    assert session not in gc.get_referents(session.runtime)
    assert session.runtime.flags == session.driver.flags


def test_schedule_arms_a_timer_on_the_sessions_clock() -> None:
    session = build_session("login", speed=2.0)
    session.start()
    before = len(session.pending())
    seq = session.runtime.schedule("_flow_ready", 1.5, reason="test")
    (timer,) = [t for t in session.pending() if t.seq == seq]
    assert timer.deadline == 3.0 and timer.payload == {"reason": "test"}
    session.runtime.cancel(seq)
    assert len(session.pending()) == before


def test_a_named_delay_is_drawn_from_the_timing_stream_of_the_seed() -> None:
    chart = load_chart("login")
    (name, default), *_ = chart.timing.items()
    first, again = runtime_of("login", seed=4), runtime_of("login", seed=4)
    assert [first.draw(name) for _ in range(5)] == [again.draw(name) for _ in range(5)]
    expected = default.draw(random.Random("zread-sim:4:timing"))
    assert runtime_of("login", seed=4).draw(name) == expected


def test_the_scenarios_timing_wins_over_the_charts_default() -> None:
    chart = load_chart("login")
    name = next(iter(chart.timing))
    scenario = load_scenario("default")
    timing = {**scenario.timing, name: Delay(fixed=7.25)}
    scenario = msgspec.structs.replace(scenario, timing=timing)
    runtime = ChartRuntime(chart, scenario, chart.flags_type(), 0, Timers())
    assert runtime.draw(name) == 7.25


def test_a_world_delay_is_read_from_the_world() -> None:
    runtime = runtime_of("login")
    assert runtime.draw("world.login.auth_timeout") == float(
        runtime.scenario.world.login.auth_timeout
    )


def test_the_world_stream_is_made_on_first_use_from_the_seed() -> None:
    runtime = runtime_of("generate", seed=9)
    assert runtime.rng is runtime.rng
    assert runtime.rng.random() == random.Random("zread-sim:9:world").random()


def test_a_failure_point_met_is_marked_and_an_undeclared_one_refused() -> None:
    runtime = runtime_of("generate")
    assert runtime.failure("page", target=1) is None and runtime.met == 0
    injected = Failure(point="page", target=1, error="boom")
    runtime.inject(injected)
    assert runtime.failure("page", target=1) == injected
    assert runtime.met == runtime.chart.failure_bits["page"]
    with pytest.raises(ChartError, match="'moon' is not declared"):
        runtime.failure("moon")


def test_effects_are_kept_until_taken_once() -> None:
    runtime = runtime_of("config")
    assert runtime.take_effects() is None
    runtime.effect("first")
    runtime.effect("second")
    assert runtime.take_effects() == ["first", "second"]
    assert runtime.take_effects() is None


def test_peer_attached_is_the_sessions_as_its_runner_sets_it() -> None:
    session = build_session("login")
    assert not session.peer_attached and not session.runtime.peer_attached
    session.peer_attached = True
    assert session.runtime.peer_attached and session.peer_attached


# -- what a control peer changes ----------------------------------------------------------


def test_inject_answers_the_id_after_the_scenarios() -> None:
    chart = load_chart("generate")
    scenario = msgspec.structs.replace(
        load_scenario("default"), failures=[Failure(point="catalog", first=1)]
    )
    runtime = ChartRuntime(chart, scenario, chart.flags_type(), 0, Timers())
    assert runtime.inject(Failure(point="page")) == "failure-2"
    assert runtime.inject(Failure(point="page", target=2)) == "failure-3"
    ids = [(e["id"], e["source"]) for e in runtime.failures.entries()]
    assert ids == [("failure-1", "scenario"), ("failure-2", "injected"), ("failure-3", "injected")]


def test_set_timing_replaces_one_delay_from_now_on_and_keeps_the_stream() -> None:
    changed, plain = runtime_of("generate", seed=3), runtime_of("generate", seed=3)
    assert changed.draw("page") == plain.draw("page")
    changed.set_timing("page", Delay(fixed=5.0))
    assert changed.timing("page") == Delay(fixed=5.0)
    assert [changed.draw("page") for _ in range(3)] == [5.0, 5.0, 5.0]
    _ = [plain.draw("page") for _ in range(3)]
    # Every draw takes two numbers, whatever its kind: the other delays do not move.
    assert changed.draw("catalog_step") == plain.draw("catalog_step")
    assert plain.timing("page") == load_chart("generate").timing["page"]


def test_set_timing_of_a_delay_the_chart_has_not_is_refused() -> None:
    runtime = runtime_of("generate")
    message = r"^'pages' is not a timing of generate \(catalog_step, page, page_retry\)$"
    with pytest.raises(ValueError, match=message):
        runtime.set_timing("pages", Delay(fixed=1.0))
    with pytest.raises(ValueError, match=r"'world\.login\.auth_timeout' is not a timing"):
        runtime.known_timing("world.login.auth_timeout")
    assert runtime.draw("page") == runtime_of("generate").draw("page")


def test_set_timing_changes_the_timers_armed_after_it_not_the_pending_ones() -> None:
    session = build_session("generate", ("-y",), speed=1.0)
    session.start()
    (pending,) = session.pending()
    session.runtime.set_timing("catalog_step", Delay(fixed=40.0))
    assert session.pending() == [pending]  # its deadline is kept
    session.advance(pending.deadline)  # it fires; the next step is armed from the new delay
    (following,) = session.pending()
    assert following.deadline == pytest.approx(pending.deadline + 40.0)
