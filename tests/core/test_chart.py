"""Tests for simulator.core.chart: compiling charts declared as data into the machine
their sessions share, and the real charts compiled and run against their models.

What a broken chart is refused with is tested with its checking
(``tests/core/test_chart_check.py``); what a compiled chart answers, with its types
(``tests/core/test_chart_specs.py``)."""

from __future__ import annotations

import ast
import copy
import importlib
import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.core.chart import compile_chart
from simulator.core.chart_specs import Chart
from simulator.core.driver import Driver, Flags
from simulator.core.effects import AskApproval, ServerStarted, StartServer
from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.scenario import Scenario, builtin_names, load_scenario
from simulator.scenario.failures import Failure
from simulator.tools.client import ReferenceClient
from statecharts import COMMANDS, failure_points, load_chart
from statecharts.generate import GenerateFlags
from statecharts.login import LoginFlags
from tests.core.toychart import (
    CountingModel,
    GoParams,
    Runtime,
    ToyModel,
    poke,
    toy_module,
)

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
    assert set(chart.timing) == {"tick"}  # world durations are not scenario delays
    assert chart.timing["tick"].fixed == 1.0
    assert chart.flags_type is Flags  # no "flags": the command takes none
    assert chart.has_start is False
    assert chart.shows_state is True


def test_transitions_gates_and_failures_are_listed_in_chart_order() -> None:
    chart = compile_chart(toy_module(lambda c: c.update(failures=["page", "save"])))
    assert [t.key for t in chart.transitions] == [
        "go idle->running [ready]",
        "_tick running->running",
        "_expire running->finished",
    ]
    assert [t.index for t in chart.transitions] == [0, 1, 2]
    assert chart.gates == (("idle", "go"), ("idle", "quit"))
    assert chart.failures == ("page", "save")
    assert chart.state_bits == {"idle": 1, "running": 2, "finished": 4}
    assert chart.gate_bits == {("idle", "go"): 1, ("idle", "quit"): 2}
    assert chart.failure_bits == {"page": 1, "save": 2}


def test_a_source_list_is_one_transition_per_source_with_its_guard() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["states"].append({"name": "paused", "waiting_for": ["go", "quit"]})
        c["transitions"][0] = {
            "trigger": "go",
            "source": ["idle", "paused"],
            "dest": "running",
            "conditions": ["ready"],
            "unless": "late",
        }

    class LateModel(ToyModel):
        def late(self, event: object) -> bool:
            return False

    chart = compile_chart(toy_module(edit, LateModel))
    keys = [t.key for t in chart.transitions if t.trigger == "go"]
    assert keys == ["go idle->running [ready,!late]", "go paused->running [ready,!late]"]
    model = LateModel(Runtime())  # type: ignore[arg-type]
    model.state = "paused"
    went = chart.fire(model, "go", params=GoParams())
    assert went is not None and went.source == "paused"


def test_sessions_share_one_machine_per_chart() -> None:
    chart = compile_chart(toy_module())
    a = ToyModel(Runtime())  # type: ignore[arg-type]
    b = ToyModel(Runtime())  # type: ignore[arg-type]
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


@pytest.mark.parametrize("source", ["idle", "running"])
def test_a_prepare_runs_once_per_firing_before_every_candidate(source: str) -> None:
    chart = compile_chart(toy_module(poke, CountingModel))
    model = CountingModel(Runtime())  # type: ignore[arg-type]
    model.state = source
    assert chart.fire(model, "_poke") is not None
    assert model.prepared == 1
    assert model.vm.log == ["tick"]
    # Fired again, from running no candidate holds (prepared_once): the work is done all
    # the same, once.
    assert (chart.fire(model, "_poke") is not None) is (source == "idle")
    assert model.prepared == 2


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


# -- the real charts: their models hide nothing from them ----------------------------

STATECHARTS = Path(__file__).resolve().parents[2] / "statecharts"


def chart_module(command: str) -> types.ModuleType:
    return importlib.import_module(f"statecharts.{command}")


def callbacks(data: dict[str, Any], *keys: str) -> set[str]:
    """The methods the chart's transitions name under ``keys``."""
    names: set[str] = set()
    for t in data["transitions"]:
        for key in keys:
            value = t.get(key)
            names.update([value] if isinstance(value, str) else value or ())
    return names


@pytest.mark.parametrize("command", list(COMMANDS))
def test_real_charts_name_their_model_and_their_delays(command: str) -> None:
    module = chart_module(command)
    data = module.CHART
    assert data["model"] == f"{command.capitalize()}Model"
    assert load_chart(command).model is getattr(module, data["model"])
    assert not hasattr(module, "Model")
    assert isinstance(data.get("timing", {}), dict)
    timers = {t.after for s in load_chart(command).states.values() for t in s.timers}
    assert set(load_chart(command).timing) >= {t for t in timers if not t.startswith("world.")}


def scheduled_delays(path: Path) -> list[tuple[int, object]]:
    """(line, delay) of every ``.schedule(trigger, delay, ...)`` call in ``path``; a delay
    that is not a literal is the source text of its expression."""
    found: list[tuple[int, object]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "schedule"
        ):
            continue
        args = node.args[1:2] or [k.value for k in node.keywords if k.arg == "delay"]
        assert args, f"{path.name}:{node.lineno}: schedule() without a delay"
        delay = args[0]
        literal = isinstance(delay, ast.Constant)
        found.append((node.lineno, delay.value if literal else f"<{ast.unparse(delay)}>"))
    return found


@pytest.mark.parametrize("command", list(COMMANDS))
def test_models_schedule_only_the_delays_their_chart_declares(command: str) -> None:
    # Every named delay a model asks for is a literal its chart's timing declares, so
    # it has a default, and every declared one is asked for somewhere, by the model or
    # by a state's timer (numbers are seconds, not scenario delays).
    declared = chart_module(command).CHART.get("timing", {})
    named = {t.after for s in load_chart(command).states.values() for t in s.timers}
    for line, delay in scheduled_delays(STATECHARTS / f"{command}.py"):
        if isinstance(delay, int | float):
            continue
        assert delay in declared, f"{command}.py:{line}: schedules {delay!r}, not declared"
        named.add(delay)
    assert named >= set(declared)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_models_ask_about_exactly_the_failure_points_their_chart_declares(command: str) -> None:
    declared = chart_module(command).CHART["failures"]
    asked = set()
    source = STATECHARTS / f"{command}.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "failure":
            point = node.args[0]
            assert isinstance(point, ast.Constant), f"{command}.py:{node.lineno}: not a literal"
            asked.add(point.value)
    assert asked == set(declared)
    assert load_chart(command).failures == tuple(declared)


def test_the_delay_scan_sees_names_numbers_and_expressions(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(
        "def f(self, name):\n"
        '    self.rt.schedule("_a", "page", task_id=1)\n'
        '    self.rt.schedule("_b", 0.0)\n'
        '    self.rt.schedule("_c", delay=name)\n',
        encoding="utf-8",
    )
    assert scheduled_delays(path) == [(2, "page"), (3, 0.0), (4, "<name>")]


class _Watch:
    """The session as a chart's model sees it, watched: a delay scheduled by a name the
    chart does not declare, and any work asked for while a condition runs, fail."""

    _WORK = frozenset({"rng", "cancel", "failure", "effect"})

    def __init__(self, rt: Session, declared: frozenset[str], report: dict[str, set[str]]):
        self._rt = rt
        self._declared = declared
        self._report = report
        self.condition = ""  # the condition being evaluated, if any

    def __getattr__(self, name: str) -> Any:
        if name in self._WORK:
            assert not self.condition, f"condition {self.condition} uses rt.{name}"
        return getattr(self._rt, name)

    def schedule(self, trigger: str, delay: str | float, **payload: Any) -> int:
        assert not self.condition, f"condition {self.condition} schedules {trigger}"
        if isinstance(delay, str):
            assert delay in self._declared, f"{trigger} scheduled after undeclared {delay!r}"
            self._report["delays"].add(delay)
        return self._rt.schedule(trigger, delay, **payload)


def _plain(obj: Any) -> Any:
    try:
        return list(obj)  # a task list: its tasks
    except TypeError:
        return repr(obj)


def _state_of(model: Driver) -> bytes:
    """Everything the model holds, as bytes."""
    held = {key: value for key, value in vars(model).items() if key != "rt"}
    return msgspec.json.encode(held, enc_hook=_plain)


def watched_chart(command: str, report: dict[str, set[str]]) -> Chart:
    """``command``'s chart compiled with its model's conditions and runtime watched."""
    module = chart_module(command)
    data = module.CHART
    base: type[Driver] = getattr(module, data["model"])
    declared = frozenset(data.get("timing", {}))

    def init(self: Driver, rt: Session) -> None:
        base.__init__(self, _Watch(rt, declared, report))  # type: ignore[call-arg]

    def watch(name: str) -> Callable[[Driver, Any], bool]:
        test = getattr(base, name)

        def condition(self: Driver, event: Any) -> bool:
            before = _state_of(self)
            self.rt.condition = name  # type: ignore[attr-defined]
            try:
                result = test(self, event)
            finally:
                self.rt.condition = ""  # type: ignore[attr-defined]
            assert _state_of(self) == before, f"condition {name} changed the model"
            report["conditions"].add(name)
            return bool(result)

        return condition

    members: dict[str, Any] = {"__init__": init}
    members.update((name, watch(name)) for name in callbacks(data, "conditions", "unless"))
    watched = types.ModuleType(module.__name__)
    watched.__dict__.update(vars(module))
    watched.Watched = type(f"Watched{base.__name__}", (base,), members)  # type: ignore[attr-defined]
    watched.CHART = {**data, "model": "Watched"}  # type: ignore[attr-defined]
    return compile_chart(watched)


def run_to_the_end(session: Session, *, approve: bool | None = None) -> None:
    """Drive ``session`` as the reference client does, in virtual time, until done; a
    server always starts, and with ``approve`` a control peer answers the login."""
    client = ReferenceClient()
    answers: list[bool] = []

    def take(out: Outcome) -> None:
        for effect in out.effects:
            if isinstance(effect, StartServer):
                take(session.resolve(effect, ServerStarted(url="http://127.0.0.1:9681/")))
            elif isinstance(effect, AskApproval) and approve is not None:
                answers.append(approve)
        for line in out:
            command = client.answer(json.loads(line))
            if command is not None and not session.done:
                take(session.feed(command.rstrip(b"\n")))

    take(session.start())
    for _ in range(10_000):
        if session.done:
            return
        deadline = session.next_deadline()
        if answers:
            take(session.deliver("_answered", approve=answers.pop(), reason=""))
        elif deadline is None:
            take(session.quit())  # waiting for a client with nothing more to say
        else:
            take(session.advance(deadline))
    raise AssertionError(f"{session.chart.name} did not end")


FLAGS: dict[str, list[Flags]] = {
    "generate": [
        GenerateFlags(),
        GenerateFlags(yes=True),
        GenerateFlags(yes=True, skip_failed=True),
        GenerateFlags(draft_action="clear"),
        GenerateFlags(draft_action="cancel"),
        GenerateFlags(draft_action="resume"),
    ],
    "login": [LoginFlags(), LoginFlags(custom=True)],
}


def scenarios() -> list[Scenario]:
    """Every built-in scenario, and the default one failing at each point, logged out,
    or approved by a control peer."""
    default = load_scenario("default")
    world = default.world
    out = [load_scenario(name) for name in builtin_names()]
    out += [msgspec.structs.replace(default, failures=[Failure(point=p)]) for p in failure_points()]
    out.append(
        msgspec.structs.replace(default, failures=[Failure(point="authorization", timeout=True)])
    )
    account = msgspec.structs.replace(world.account, logged_in=False)
    out.append(
        msgspec.structs.replace(default, world=msgspec.structs.replace(world, account=account))
    )
    return out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_conditions_only_test_and_delays_are_declared(command: str) -> None:
    report: dict[str, set[str]] = {"conditions": set(), "delays": set()}
    chart = watched_chart(command, report)
    default = load_scenario("default")
    control = msgspec.structs.replace(
        default,
        world=msgspec.structs.replace(
            default.world,
            login=msgspec.structs.replace(default.world.login, approver="control"),
        ),
    )
    for flags in FLAGS.get(command, [load_chart(command).flags_type()]):
        for scenario in scenarios():
            run_to_the_end(Session(chart, scenario, flags=flags, seed=3))
        for approve in (True, False):
            session = Session(chart, control, flags=flags, seed=3)
            session.peer_attached = True
            run_to_the_end(session, approve=approve)
    data = chart_module(command).CHART
    assert report["conditions"] == callbacks(data, "conditions", "unless")  # each was watched
    timers = {t.after for s in chart.states.values() for t in s.timers}
    assert report["delays"] == set(data.get("timing", {})) - timers
