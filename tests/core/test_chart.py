"""Tests for simulator.core.chart: compiling charts declared as data, and refusing broken ones."""

from __future__ import annotations

import copy
import importlib
import types
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from simulator.core.chart import ChartError, compile_chart
from simulator.core.driver import Driver
from statecharts import load_chart


class ToyVM(msgspec.Struct):
    state: str = ""
    log: list[str] = msgspec.field(default_factory=list)


class GoParams(msgspec.Struct):
    speed: int = 1


class ToyModel(Driver):
    vm_type = ToyVM
    vm: ToyVM
    not_callable = "just a string"

    def note_go(self, event: Any) -> None:
        self.vm.log.append(f"go:{event.kwargs['params'].speed}")

    def ready(self, _: Any) -> bool:
        return True

    def check_go(self, params: GoParams) -> None:
        pass

    def entered(self, _: Any) -> None:
        self.vm.log.append("entered")

    def ticked(self, _: Any) -> None:
        self.vm.log.append("tick")


def toy_chart() -> dict[str, Any]:
    return {
        "name": "toy",
        "initial": "idle",
        "states": [
            {"name": "idle", "waiting_for": ["go", "quit"]},
            {
                "name": "running",
                "vm_state": "busy",
                "on_enter": "entered",
                "timers": [
                    {"after": "tick", "trigger": "_tick", "repeat": True},
                    {"after": "world.login.auth_timeout", "trigger": "_expire"},
                ],
            },
            {"name": "finished", "terminal": True},
        ],
        "transitions": [
            {
                "trigger": "go",
                "source": "idle",
                "dest": "running",
                "conditions": "ready",
                "before": "note_go",
            },
            {"trigger": "_tick", "source": "running", "dest": None, "after": "ticked"},
            {"trigger": "_expire", "source": "running", "dest": "finished"},
        ],
        "commands": {"go": {"params": "GoParams", "check": "check_go"}},
    }


def toy_module(
    edit: Callable[[dict[str, Any]], None] | None = None, model: type[Driver] = ToyModel
) -> types.ModuleType:
    module = types.ModuleType("toy_chart")
    chart = toy_chart()
    if edit is not None:
        edit(chart)
    module.CHART = chart  # type: ignore[attr-defined]
    module.Model = model  # type: ignore[attr-defined]
    module.GoParams = GoParams  # type: ignore[attr-defined]
    module.NOT_A_TYPE = 3  # type: ignore[attr-defined]
    return module


def state(chart: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in chart["states"] if s["name"] == name)


def refused(edit: Callable[[dict[str, Any]], None], model: type[Driver] = ToyModel) -> str:
    with pytest.raises(ChartError) as info:
        compile_chart(toy_module(edit, model))
    return str(info.value)


class _Runtime:
    """The smallest stand-in for a session: the toy model only needs ``rt`` to exist."""


# -- a valid chart ------------------------------------------------------------------


def test_valid_chart_compiles_to_its_specs() -> None:
    chart = compile_chart(toy_module())
    assert chart.name == "toy"
    assert chart.initial == "idle"
    assert list(chart.states) == ["idle", "running", "finished"]
    assert chart.states["idle"].waiting_for == ("go", "quit")
    assert chart.states["idle"].vm_state == "idle"  # defaults to the name
    assert chart.states["running"].vm_state == "busy"
    assert chart.states["finished"].terminal
    assert not chart.states["running"].terminal
    assert [t.trigger for t in chart.states["running"].timers] == ["_tick", "_expire"]
    assert chart.states["running"].timers[0].repeat
    assert not chart.states["running"].timers[1].repeat
    assert chart.commands["go"].params is GoParams
    assert chart.commands["go"].check == "check_go"
    assert chart.model is ToyModel
    assert chart.delays == frozenset({"tick"})  # world durations are not scenario delays
    assert chart.has_start is False
    assert chart.shows_state is True


def test_machine_fires_and_runs_callbacks() -> None:
    chart = compile_chart(toy_module())
    model = ToyModel(_Runtime())  # type: ignore[arg-type]
    model.state = chart.initial
    assert chart.accepts("idle", "go")
    assert not chart.accepts("running", "go")
    assert not chart.accepts("idle", "no-such-trigger")
    assert chart.fire(model, "go", params=GoParams(speed=3)) is True
    assert model.state == "running"
    assert model.vm.log == ["go:3", "entered"]
    assert chart.fire(model, "_tick") is True
    assert model.state == "running"
    assert model.vm.log[-1] == "tick"
    assert chart.fire(model, "_expire") is True
    assert model.state == "finished"


def test_a_trigger_from_the_wrong_state_does_nothing() -> None:
    chart = compile_chart(toy_module())
    model = ToyModel(_Runtime())  # type: ignore[arg-type]
    model.state = "idle"
    assert chart.fire(model, "_tick") is False
    assert model.state == "idle"
    assert model.vm.log == []


def test_sessions_share_one_machine_per_chart() -> None:
    chart = compile_chart(toy_module())
    a = ToyModel(_Runtime())  # type: ignore[arg-type]
    b = ToyModel(_Runtime())  # type: ignore[arg-type]
    a.state = b.state = "idle"
    chart.fire(a, "go", params=GoParams())
    assert (a.state, b.state) == ("running", "idle")


def test_has_start_when_a_start_trigger_is_declared() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["states"].insert(0, {"name": "booting"})
        c["initial"] = "booting"
        c["transitions"].append({"trigger": "_start", "source": "booting", "dest": "idle"})

    assert compile_chart(toy_module(edit)).has_start is True


def test_chart_without_state_field_does_not_show_state() -> None:
    class Plain(msgspec.Struct):
        log: list[str] = msgspec.field(default_factory=list)

    class PlainModel(ToyModel):
        vm_type = Plain  # type: ignore[assignment]

    assert compile_chart(toy_module(model=PlainModel)).shows_state is False


def test_compiling_does_not_modify_the_chart_data() -> None:
    module = toy_module()
    before = copy.deepcopy(module.CHART)
    compile_chart(module)
    assert before == module.CHART


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

    assert compile_chart(toy_module(edit)).states["running"].waiting_for == ("quit",)


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


def test_state_declared_twice() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["states"].append({"name": "idle"})

    assert "twice" in refused(edit)


# -- the real charts ----------------------------------------------------------------


@pytest.mark.parametrize("command", ["config", "login", "update", "version"])
def test_real_charts_compile(command: str) -> None:
    chart = load_chart(command)
    assert chart.name == command
    assert chart.initial in chart.states
    assert any(spec.terminal for spec in chart.states.values())
    for spec in chart.states.values():
        if spec.terminal:
            assert spec.waiting_for == ()
        assert not any(w.startswith("_") for w in spec.waiting_for)


@pytest.mark.parametrize("command", ["config", "login", "update", "version"])
def test_real_chart_modules_compile_afresh(command: str) -> None:
    module = importlib.import_module(f"statecharts.{command}")
    assert compile_chart(module).states.keys() == load_chart(command).states.keys()


@pytest.mark.parametrize("command", ["config", "version"])
def test_shows_state_false_without_a_state_field(command: str) -> None:
    assert load_chart(command).shows_state is False


@pytest.mark.parametrize("command", ["login", "update"])
def test_shows_state_for_charts_with_state(command: str) -> None:
    assert load_chart(command).shows_state is True


def test_config_chart_gates_match_fidelity() -> None:
    chart = load_chart("config")
    gates = {s.waiting_for for s in chart.states.values() if s.waiting_for}
    assert gates == {("update_fields", "save", "reload_llm", "quit")}
    assert {s.vm_state for s in chart.states.values() if s.waiting_for} == {"editing"}


def test_update_chart_gates_match_fidelity() -> None:
    states = load_chart("update").states
    assert states["has_update"].waiting_for == ("download", "quit")
    assert states["confirm_restart"].waiting_for == ("restart", "skip_restart", "quit")
    assert states["checking"].waiting_for == ()
    assert states["downloading"].waiting_for == ()
    for name in ("up_to_date", "package_manager", "error"):
        assert states[name].terminal


def test_login_chart_gates_match_fidelity() -> None:
    states = load_chart("login").states
    assert states["select_region"].waiting_for == ("select_region", "quit")
    assert states["select_model"].waiting_for == ("select_model", "quit")
    for name in ("init_flow", "open_browser", "waiting", "saving"):
        assert states[name].waiting_for == ()
    assert states["done"].terminal
    assert states["error"].terminal


def test_load_chart_is_shared_and_rejects_unknown_commands() -> None:
    assert load_chart("update") is load_chart("update")
    with pytest.raises(KeyError):
        load_chart("no-such-command")
