"""Tests for simulator.core.chart_check: a chart dict read into its parts, and every
broken one refused with a message that names the chart and what is wrong."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from simulator.core.chart_check import ChartError, check_chart
from simulator.core.driver import Flags
from tests.core.toychart import CountingModel, ToyModel, poke, state, toy_module


def refused(edit: Callable[[dict[str, Any]], None], model: type[ToyModel] = ToyModel) -> str:
    with pytest.raises(ChartError) as info:
        check_chart(toy_module(edit, model))
    return str(info.value)


# -- a valid chart ------------------------------------------------------------------


def test_a_valid_chart_is_read_into_its_parts() -> None:
    checked = check_chart(toy_module())
    assert (checked.name, checked.initial, checked.model) == ("toy", "idle", ToyModel)
    assert list(checked.states) == ["idle", "running", "finished"]
    assert checked.flags_type is Flags  # no "flags": the command takes none
    assert checked.commands["go"].examples == "go_examples"
    assert checked.failures == ()
    assert (checked.has_start, checked.uses_project) == (False, False)
    assert [t.key for t in checked.transitions] == [
        "go idle->running [ready]",
        "_tick running->running",
        "_expire running->finished",
    ]
    assert [e["source"] for e in checked.entries] == ["idle", "running", "running"]


def test_checking_does_not_modify_the_chart_data() -> None:
    module = toy_module(poke, CountingModel)
    before = copy.deepcopy(module.CHART)
    check_chart(module)
    assert before == module.CHART


def test_each_prepare_is_on_the_first_candidate_from_each_source_only() -> None:
    entries = check_chart(toy_module(poke, CountingModel)).entries
    poked = [(e["source"], e.get("prepare")) for e in entries if e["trigger"] == "_poke"]
    assert poked == [
        ("idle", ["work"]),
        ("running", ["work"]),
        ("running", None),
        ("idle", None),
    ]


def test_a_chart_may_name_its_flags_and_use_the_project() -> None:
    class ToyFlags(Flags):
        pass

    def edit(c: dict[str, Any]) -> None:
        c.update(flags="ToyFlags", project=True)

    module = toy_module(edit)
    module.ToyFlags = ToyFlags  # type: ignore[attr-defined]
    checked = check_chart(module)
    assert (checked.flags_type, checked.uses_project) == (ToyFlags, True)


def test_a_chart_names_what_it_writes_among_the_project_and_home() -> None:
    assert check_chart(toy_module()).writes == frozenset()
    checked = check_chart(toy_module(lambda c: c.update(writes=["project", "home"])))
    assert checked.writes == {"project", "home"}
    with pytest.raises(ChartError, match=r"writes \['disk'\]: only \('project', 'home'\)"):
        check_chart(toy_module(lambda c: c.update(writes="disk")))


def test_a_chart_that_names_no_model_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        del c["model"]

    module = toy_module(edit)
    module.Model = ToyModel  # type: ignore[attr-defined]
    with pytest.raises(ChartError, match="model None is not a Driver subclass"):
        check_chart(module)


def test_timing_gives_every_delay_a_default() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["timing"] = {"nap": {"uniform": [1.0, 2.0]}, "tick": {"fixed": 0.5}}

    timing = check_chart(toy_module(edit)).timing
    assert set(timing) == {"nap", "tick"}  # a delay the model schedules by name too
    assert timing["nap"].uniform == (1.0, 2.0)


# -- refusals -----------------------------------------------------------------------


def test_unknown_initial() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["initial"] = "nowhere"

    text = refused(edit)
    assert "chart toy" in text
    assert "nowhere" in text
    assert "initial" in text


def test_unknown_source() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"].append({"trigger": "_x", "source": "ghost", "dest": "idle"})

    text = refused(edit)
    assert "ghost" in text
    assert "unknown source" in text


def test_unknown_source_in_a_list() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"][1]["source"] = ["running", "ghost"]

    assert "unknown source" in refused(edit)


def test_unknown_dest() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"][2]["dest"] = "limbo"

    text = refused(edit)
    assert "limbo" in text
    assert "unknown dest" in text


@pytest.mark.parametrize("key", ["conditions", "unless", "prepare", "before", "after"])
def test_missing_transition_callback(key: str) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"][0][key] = "vanished"

    text = refused(edit)
    assert "vanished" in text
    assert "ToyModel" in text


def test_callback_that_is_not_callable() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"][0]["before"] = "not_callable"

    assert "not_callable" in refused(edit)


def test_missing_callback_in_a_list() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"][0]["conditions"] = ["ready", "vanished"]

    assert "vanished" in refused(edit)


def test_missing_command_check() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["commands"]["go"]["check"] = "vanished"

    text = refused(edit)
    assert "vanished" in text
    assert "go" in text


@pytest.mark.parametrize("key", ["on_enter", "on_exit"])
def test_missing_state_callback(key: str) -> None:
    # "Every name is resolved here, once, when the chart is compiled" (chart docstring).
    def edit(c: dict[str, Any]) -> None:
        state(c, "running")[key] = "vanished"

    assert "vanished" in refused(edit)


@pytest.mark.parametrize("name", ["NOT_A_TYPE", "Missing"])
def test_params_that_is_not_a_type(name: str) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["commands"]["go"]["params"] = name

    text = refused(edit)
    assert name in text
    assert "not a type" in text


def test_terminal_state_with_waiting_for() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "finished")["waiting_for"] = ["quit"]

    text = refused(edit)
    assert "finished" in text
    assert "terminal" in text


def test_waiting_for_an_internal_trigger() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "idle")["waiting_for"] = ["go", "_tick", "quit"]

    text = refused(edit)
    assert "_tick" in text
    assert "idle" in text


def test_command_accepted_but_not_waited_for() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "idle")["waiting_for"] = ["quit"]

    text = refused(edit)
    assert "'idle' accepts 'go'" in text
    assert "does not wait for it" in text


def test_waiting_for_entry_without_a_transition() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "idle")["waiting_for"] = ["go", "stop", "quit"]
        c["commands"]["stop"] = {}

    text = refused(edit)
    assert "'idle' waits for 'stop'" in text
    assert "no way" in text


def test_quit_needs_no_transition() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "running")["waiting_for"] = ["quit"]

    assert check_chart(toy_module(edit)).states["running"].waiting_for == ("quit",)


def test_transition_for_an_undeclared_command() -> None:
    def edit(c: dict[str, Any]) -> None:
        del c["commands"]["go"]

    text = refused(edit)
    assert "'go'" in text
    assert "not declared" in text


def test_internal_command_declaration() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["commands"]["_secret"] = {}

    assert "_secret" in refused(edit)


def test_timer_trigger_not_internal() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "running")["timers"] = [{"after": "tick", "trigger": "tock"}]
        c["transitions"].append({"trigger": "tock", "source": "running", "dest": None})

    text = refused(edit)
    assert "'tock'" in text
    assert "internal" in text


def test_timer_without_a_transition() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "running")["timers"].append({"after": "tick", "trigger": "_nothing"})

    text = refused(edit)
    assert "_nothing" in text
    assert "no transition" in text


def test_timer_whose_trigger_exists_only_from_another_state() -> None:
    def edit(c: dict[str, Any]) -> None:
        state(c, "idle")["timers"] = [{"after": "tick", "trigger": "_tick"}]

    text = refused(edit)
    assert "'_tick' of 'idle'" in text


def test_reflexive_transition() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"][1]["dest"] = "running"

    text = refused(edit)
    assert "reflexive" in text


def test_leaving_a_terminal_state() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"].append({"trigger": "_again", "source": "finished", "dest": "idle"})

    text = refused(edit)
    assert "finished" in text
    assert "terminal" in text


def test_command_with_params_but_no_examples() -> None:
    def edit(c: dict[str, Any]) -> None:
        del c["commands"]["go"]["examples"]

    assert "command 'go' takes params but names no examples" in refused(edit)


def test_examples_that_are_not_a_method() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["commands"]["go"]["examples"] = "nowhere"

    assert "command 'go' examples names 'nowhere'" in refused(edit)


def test_transition_declared_twice() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["transitions"].append(dict(c["transitions"][2]))

    assert "transition '_expire running->finished' is declared twice" in refused(edit)


@pytest.mark.parametrize(
    ("failures", "reason"),
    [
        ("page", "failures must be a list of points"),
        ([""], "'' is not a point name"),
        ([3], "3 is not a point name"),
        (["page", "page"], "a failure point is declared twice"),
    ],
)
def test_failures_that_are_not_points(failures: object, reason: str) -> None:
    assert reason in refused(lambda c: c.update(failures=failures))


def test_state_declared_twice() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["states"].append({"name": "idle"})

    assert "twice" in refused(edit)


@pytest.mark.parametrize("name", ["Missing", "GoParams", "NOT_A_TYPE", 3])
def test_model_that_is_not_a_driver_of_the_module(name: object) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["model"] = name

    text = refused(edit)
    assert f"model {name!r}" in text
    assert "not a Driver subclass" in text


@pytest.mark.parametrize(
    ("timing", "reason"),
    [
        ("page", "timing must map delay names"),
        (["page"], "timing must map delay names"),
        ({3: {"fixed": 1.0}}, "delay 3 is not a name"),
        ({"": {"fixed": 1.0}}, "delay '' is not a name"),
        ({"world.login.auth_timeout": {"fixed": 1.0}}, "is a world duration"),
        ({"tick": {"fixed": -1.0}}, "timing 'tick'"),
        ({"tick": {"often": 1.0}}, "timing 'tick'"),
        ({"nap": {"fixed": 1.0}}, "timer delay 'tick' has no default in timing"),
    ],
)
def test_delays_that_cannot_be_scheduled(timing: object, reason: str) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["timing"] = timing

    assert reason in refused(edit)


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c["transitions"][-2].pop("prepare"),  # running: a candidate without it
        lambda c: c["transitions"][-1].update(prepare="ticked"),  # idle: another one
        lambda c: c["transitions"][-3].update(prepare=["work", "ticked"]),  # both: a longer one
    ],
)
def test_candidates_that_disagree_on_their_prepare(
    change: Callable[[dict[str, Any]], None],
) -> None:
    def edit(c: dict[str, Any]) -> None:
        poke(c)
        change(c)

    text = refused(edit, CountingModel)
    assert "transitions '_poke' from" in text
    assert "different prepares" in text


@pytest.mark.parametrize("name", ["Missing", "GoParams", 3])
def test_flags_that_are_not_a_flags_type_of_the_module(name: object) -> None:
    def edit(c: dict[str, Any]) -> None:
        c["flags"] = name

    assert f"chart toy: flags {name!r} is not a Flags subclass in its module" == refused(edit)


def test_the_first_thing_wrong_is_the_one_named() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["initial"] = "nowhere"
        c["model"] = "Missing"

    assert refused(edit) == "chart toy: model 'Missing' is not a Driver subclass in its module"
