"""Tests for simulator.core.chart_specs: how a transition is named, and what a compiled
chart answers: which transition ran, what a state accepts, what bit masks mark."""

from __future__ import annotations

import pytest

from simulator.core.chart import compile_chart
from simulator.core.chart_specs import WORLD_DELAY, TransitionSpec
from simulator.core.coverage import Reached
from tests.core.toychart import GoParams, Runtime, ToyModel, toy_module


def spec(
    trigger: str,
    source: str,
    dest: str | None,
    conditions: tuple[str, ...] = (),
    unless: tuple[str, ...] = (),
) -> TransitionSpec:
    return TransitionSpec(0, trigger, source, dest, conditions, unless)


@pytest.mark.parametrize(
    ("transition", "guard", "key"),
    [
        (spec("go", "idle", "running"), "", "go idle->running"),
        (spec("go", "idle", "running", ("ready",)), "[ready]", "go idle->running [ready]"),
        (spec("go", "idle", "done", ("a", "b"), ("c",)), "[a,b,!c]", "go idle->done [a,b,!c]"),
        (spec("go", "idle", "done", unless=("c",)), "[!c]", "go idle->done [!c]"),
        (spec("_tick", "running", None), "", "_tick running->running"),
    ],
)
def test_a_transition_is_named_by_trigger_source_dest_and_guard(
    transition: TransitionSpec, guard: str, key: str
) -> None:
    assert (transition.guard, transition.key) == (guard, key)


def test_internal_transitions_are_those_a_client_never_sends() -> None:
    assert spec("_tick", "running", None).internal
    assert spec("_start", "booting", "idle").internal
    assert not spec("go", "idle", "running").internal


def test_a_world_duration_is_told_by_its_prefix() -> None:
    assert "world.login.auth_timeout".startswith(WORLD_DELAY)
    assert not "page".startswith(WORLD_DELAY)


def test_fire_runs_the_callbacks_and_names_the_transition_that_ran() -> None:
    chart = compile_chart(toy_module())
    model = ToyModel(Runtime())  # type: ignore[arg-type]
    model.state = chart.initial
    went = chart.fire(model, "go", params=GoParams(speed=3))
    assert went is not None and went.key == "go idle->running [ready]"
    assert model.state == "running"
    assert model.vm.log == ["go:3", "entered"]
    ticked = chart.fire(model, "_tick")
    assert ticked is not None and (ticked.key, ticked.internal) == ("_tick running->running", True)
    assert model.state == "running"
    assert model.vm.log[-1] == "tick"
    expired = chart.fire(model, "_expire")
    assert expired is not None and expired.dest == "finished"
    assert model.state == "finished"


def test_the_candidate_that_ran_is_the_one_named() -> None:
    # Two candidates of one trigger from one source: the one whose conditions hold is
    # the one fire() returns, not the first.
    def edit(c: dict[str, object]) -> None:
        c["transitions"].insert(  # type: ignore[attr-defined]
            0,
            {"trigger": "go", "source": "idle", "dest": "finished", "unless": "ready"},
        )

    chart = compile_chart(toy_module(edit))
    model = ToyModel(Runtime())  # type: ignore[arg-type]
    model.state = "idle"
    went = chart.fire(model, "go", params=GoParams(speed=1))
    assert went is not None and went.key == "go idle->running [ready]"
    assert model.transition_taken == went.index == 1


def test_a_trigger_from_the_wrong_state_does_nothing() -> None:
    chart = compile_chart(toy_module())
    model = ToyModel(Runtime())  # type: ignore[arg-type]
    model.state = "idle"
    assert chart.fire(model, "_tick") is None
    assert model.state == "idle"
    assert model.vm.log == []


def test_accepts_says_whether_a_trigger_leaves_a_state() -> None:
    chart = compile_chart(toy_module())
    assert chart.accepts("idle", "go")
    assert not chart.accepts("running", "go")
    assert chart.accepts("running", "_tick")
    assert not chart.accepts("idle", "no-such-trigger")


def test_reached_names_what_the_bit_masks_mark() -> None:
    chart = compile_chart(toy_module(lambda c: c.update(failures=["page", "save"])))
    assert chart.reached() == Reached("toy", frozenset(), frozenset(), frozenset(), frozenset())
    assert chart.reached(states=0b101, transitions=0b010, gates=0b10, failures=0b01) == Reached(
        "toy",
        frozenset({"idle", "finished"}),
        frozenset({"_tick running->running"}),
        frozenset({"idle:quit"}),
        frozenset({"page"}),
    )
    everything = chart.reached(states=-1, transitions=-1, gates=-1, failures=-1)
    assert everything.transitions == {t.key for t in chart.transitions}
    assert everything.failures == {"page", "save"}
