"""Turns a chart declared as data into one shared ``transitions`` machine.

Owns: the schema of a chart (``statecharts/<command>.py`` exports ``CHART``, a dict of
plain lists and dicts, and the :class:`~simulator.core.driver.Driver` subclass whose methods
the chart names), its validation, and :class:`Chart`, the compiled form a session runs.

A chart dict has:

- ``name``: the zread command; ``initial``: the state a session starts in.
- ``model``: the name of the chart's Driver subclass in its module (``"GenerateModel"``).
- ``delays``: every delay of the scenario's ``[timing]`` the model schedules by name
  (``self.rt.schedule("_x", "page")``), each once. The delays a session needs are
  these and its states' timer delays: a scenario without one of them is refused
  before the session starts, not when the delay is first drawn.
- ``states``: a list of ``{"name", "waiting_for": [...], "vm_state", "terminal",
  "timers": [{"after": <delay name>, "trigger": "_x", "repeat": bool}], "on_enter",
  "on_exit"}``. A state's timers are armed when it is entered and dropped when it is
  left; a ``repeat`` timer is armed again each time it fires while the state holds.
  ``after`` names a delay of the scenario's ``[timing]``, or a duration of its world
  (``"world.login.auth_timeout"``).
  ``vm_state`` is what ``vm.state`` shows (default: the name), so several chart states
  can be one zread state with different gates. ``waiting_for`` is the list the event
  carries, in order; it is the only place gates are written.
- ``transitions``: ``{"trigger", "source", "dest", "conditions", "unless", "prepare",
  "before", "after"}`` as ``transitions`` takes them; ``dest: None`` is internal.
  Triggers starting with ``_`` are internal (timers, start-up) and never accepted
  from a client. The candidates of one trigger from one source are tried in order,
  the first whose conditions hold wins. Conditions only test: the work is done in
  ``prepare``, ``before``, ``after`` and the states' callbacks. ``prepare`` is the work
  a trigger does in its source before any candidate is chosen, so every candidate of
  the trigger from that source names the same one (or none); it runs once per firing,
  before the first candidate's conditions, and no candidate depends on the order.
- ``commands``: ``{type: {"params": <Struct name in the module>, "check": <method>,
  "examples": <method>}}`` for every command a client may send. ``examples`` returns
  the params (plain JSON objects) a client could send now, one per choice that leads
  somewhere different (``{"action": "generate"}``, ``{"action": "browse"}``): what
  ``zread-sim paths`` tries; a command without params has the one example ``{}``.
- ``failures``: every scenario failure point the model asks about
  (``self.rt.failure("page", ...)``), each once; asking about another is a bug.

Each transition a session can take is one :class:`TransitionSpec` of
:attr:`Chart.transitions` (one per source of a chart entry), named by its ``key``; the
machine tells the model which one ran (``Driver.transition_taken``), so a session can
say what of its chart it reached (:mod:`simulator.core.coverage`).

A chart may declare an internal ``_start`` trigger: the session fires it once before
the first event, so a chart can choose its first state from flags and the world.

Every name is resolved here, once, when the chart is compiled; a chart that names a
missing state, model, callback or params type, a delay it cannot schedule, or whose
gates or prepares disagree with its transitions, fails to compile with a message
saying which.

Sessions are models the shared machine does not list: ``Event.trigger(model)`` needs
only the model's ``state`` attribute, while ``Machine.add_model`` scans a list
(O(models)) and binds a dozen methods to every model.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from transitions import Machine

from simulator.core.coverage import Reached
from simulator.core.driver import Driver
from simulator.core.machine import ChartMachine
from simulator.errors import SimulatorBug
from simulator.scenario.failures import POINTS

__all__ = [
    "Chart",
    "ChartError",
    "CommandSpec",
    "StateSpec",
    "TimerSpec",
    "TransitionSpec",
    "compile_chart",
]

_CALLBACK_KEYS = ("conditions", "unless", "prepare", "before", "after")
WORLD_DELAY = "world."
"""A timer ``after`` that starts with this is a duration read from the world, in seconds."""


class ChartError(SimulatorBug):
    """A chart that cannot run: the simulator's own bug, never the client's."""


class TimerSpec(msgspec.Struct, frozen=True):
    after: str
    trigger: str
    repeat: bool


class StateSpec(msgspec.Struct, frozen=True):
    name: str
    vm_state: str
    waiting_for: tuple[str, ...]
    terminal: bool
    timers: tuple[TimerSpec, ...]


class CommandSpec(msgspec.Struct, frozen=True):
    params: type[Any] | None
    check: str | None
    examples: str | None = None
    """The model's method that lists example params (see the module docstring)."""


class TransitionSpec(msgspec.Struct, frozen=True):
    """One transition a session can take: a chart entry from one of its sources."""

    index: int
    trigger: str
    source: str
    dest: str | None
    """None: internal, the state stays."""
    conditions: tuple[str, ...]
    unless: tuple[str, ...]

    @property
    def internal(self) -> bool:
        """Fired by the session (a timer, start-up, an effect's answer), not a client."""
        return self.trigger.startswith("_")

    @property
    def guard(self) -> str:
        """``[a,b,!c]``: the conditions that must hold, ``!`` for an ``unless``; or ""."""
        names = [*self.conditions, *(f"!{name}" for name in self.unless)]
        return f"[{','.join(names)}]" if names else ""

    @property
    def key(self) -> str:
        """``trigger source->dest [guard]``: how journals and reports name it."""
        key = f"{self.trigger} {self.source}->{self.dest or self.source}"
        return f"{key} {self.guard}" if self.guard else key


class Chart(msgspec.Struct, frozen=True):
    """A compiled chart: its states, commands and the machine shared by its sessions.

    ``transitions``, ``gates`` (``(state, command)`` for each command a state waits
    for) and ``failures`` (the failure points the model asks about) are in chart order;
    a session's coverage masks index them, and ``state_bits``, ``gate_bits`` and
    ``failure_bits`` give the bit of each.
    """

    name: str
    initial: str
    states: Mapping[str, StateSpec]
    commands: Mapping[str, CommandSpec]
    model: type[Driver]
    machine: Machine
    delays: frozenset[str]
    has_start: bool
    shows_state: bool
    transitions: tuple[TransitionSpec, ...]
    gates: tuple[tuple[str, str], ...]
    failures: tuple[str, ...]
    uses_project: bool
    """Whether the command reads or writes the project's ``.zread/wiki`` (the chart's
    ``"project"``; other commands never open it)."""
    state_bits: Mapping[str, int]
    gate_bits: Mapping[tuple[str, str], int]
    failure_bits: Mapping[str, int]

    def fire(self, model: Driver, trigger: str, **payload: Any) -> TransitionSpec | None:
        """Fire ``trigger`` on ``model``; the transition that ran, or None."""
        model.transition_taken = -1
        if not self.machine.events[trigger].trigger(model, **payload):
            return None
        return self.transitions[model.transition_taken]

    def reached(
        self, states: int = 0, transitions: int = 0, gates: int = 0, failures: int = 0
    ) -> Reached:
        """The names of what the bit masks mark (bit ``i`` is item ``i`` in chart order)."""
        return Reached(
            self.name,
            frozenset(name for name, bit in self.state_bits.items() if states & bit),
            frozenset(t.key for t in self.transitions if transitions >> t.index & 1),
            frozenset(f"{s}:{c}" for (s, c), bit in self.gate_bits.items() if gates & bit),
            frozenset(name for name, bit in self.failure_bits.items() if failures & bit),
        )

    def accepts(self, state: str, trigger: str) -> bool:
        """True when ``trigger`` has a transition out of ``state``."""
        event = self.machine.events.get(trigger)
        return event is not None and bool(event.transitions.get(state))


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _require(ok: bool, chart: str, message: str) -> None:
    if not ok:
        raise ChartError(f"chart {chart}: {message}")


def compile_chart(module: types.ModuleType, *, machine_cls: type[Machine] = ChartMachine) -> Chart:
    """Validate ``module.CHART`` against the model class it names and build its machine
    (a :class:`~simulator.core.machine.ChartMachine`; ``machine_cls=transitions.Machine``
    builds the stock one, which runs a chart the same)."""
    data: dict[str, Any] = module.CHART
    name = data["name"]
    model = _resolve_model(name, data.get("model"), module)
    declared = _compile_delays(name, data.get("delays", ()))
    states = _compile_states(name, data["states"])
    _check_state_callbacks(name, data["states"], model)
    _require(data["initial"] in states, name, f"initial state {data['initial']!r} is not declared")
    transitions = [dict(t) for t in data["transitions"]]
    _check_transitions(name, transitions, states, model)
    commands = _compile_commands(name, data.get("commands", {}), module, model)
    _check_gates(name, states, transitions, commands)
    failures = _compile_failures(name, data.get("failures", ()))
    entries = _prepare_once(name, transitions)
    specs = _transition_specs(name, entries)
    taken: dict[int, int] = {}  # id of the machine's Transition -> its spec's index
    machine = machine_cls(
        model=None,
        states=[_machine_state(spec) for spec in data["states"]],
        transitions=entries,
        initial=data["initial"],
        send_event=True,
        auto_transitions=False,
        ignore_invalid_triggers=True,
        before_state_change=[_taken_by(taken)],
    )
    for spec, transition in zip(specs, _machine_transitions(machine, specs), strict=True):
        taken[id(transition)] = spec.index
    gates = tuple((s.name, command) for s in states.values() for command in s.waiting_for)
    delays = declared | frozenset(
        t.after for s in states.values() for t in s.timers if not t.after.startswith(WORLD_DELAY)
    )
    vm_fields = getattr(model.vm_type, "__struct_fields__", ())
    return Chart(
        name=name,
        initial=data["initial"],
        states=states,
        commands=commands,
        model=model,
        machine=machine,
        delays=delays,
        has_start=any(t["trigger"] == "_start" for t in transitions),
        shows_state="state" in vm_fields,
        transitions=specs,
        gates=gates,
        failures=failures,
        uses_project=bool(data.get("project", False)),
        state_bits={state: 1 << i for i, state in enumerate(states)},
        gate_bits={gate: 1 << i for i, gate in enumerate(gates)},
        failure_bits={point: 1 << i for i, point in enumerate(failures)},
    )


def _transition_specs(chart: str, entries: list[dict[str, Any]]) -> tuple[TransitionSpec, ...]:
    specs = tuple(
        TransitionSpec(
            index=i,
            trigger=t["trigger"],
            source=t["source"],
            dest=t.get("dest"),
            conditions=tuple(_names(t.get("conditions"))),
            unless=tuple(_names(t.get("unless"))),
        )
        for i, t in enumerate(entries)
    )
    seen: set[str] = set()
    for spec in specs:
        _require(spec.key not in seen, chart, f"transition {spec.key!r} is declared twice")
        seen.add(spec.key)
    return specs


def _machine_transitions(machine: Machine, specs: Iterable[TransitionSpec]) -> list[object]:
    """The machine's Transition object of each spec: candidates of one trigger from one
    source are kept in the order they were given, which is the specs' order."""
    used: dict[tuple[str, str], int] = {}
    out: list[object] = []
    for spec in specs:
        key = (spec.trigger, spec.source)
        k = used.get(key, 0)
        used[key] = k + 1
        out.append(machine.events[spec.trigger].transitions[spec.source][k])
    return out


def _taken_by(index: dict[int, int]) -> Any:
    """The machine's ``before_state_change`` callback: it runs once a candidate's
    conditions hold, and tells the model which transition that is."""

    def taken(event: Any) -> None:
        event.model.transition_taken = index[id(event.transition)]

    return taken


def _compile_failures(chart: str, raw: Any) -> tuple[str, ...]:
    _require(
        isinstance(raw, list | tuple), chart, f"failures must be a list of points, not {raw!r}"
    )
    for point in raw:
        _require(point in POINTS, chart, f"failure point {point!r} is not one of {POINTS}")
    _require(len(set(raw)) == len(raw), chart, "a failure point is declared twice")
    return tuple(raw)


def _resolve_model(chart: str, name: Any, module: types.ModuleType) -> type[Driver]:
    model = getattr(module, name, None) if isinstance(name, str) else None
    if not (isinstance(model, type) and issubclass(model, Driver)):
        raise ChartError(f"chart {chart}: model {name!r} is not a Driver subclass in its module")
    return model


def _compile_delays(chart: str, raw: Any) -> frozenset[str]:
    _require(isinstance(raw, list | tuple), chart, f"delays must be a list of names, not {raw!r}")
    seen: set[str] = set()
    for delay in raw:
        _require(isinstance(delay, str) and delay != "", chart, f"delay {delay!r} is not a name")
        _require(
            not delay.startswith(WORLD_DELAY),
            chart,
            f"delay {delay!r} is a world duration, not a [timing] delay",
        )
        _require(delay not in seen, chart, f"delay {delay!r} is declared twice")
        seen.add(delay)
    return frozenset(seen)


def _prepare_once(chart: str, transitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transitions as the machine takes them, one source each, with each trigger's
    ``prepare`` on the first candidate from each source only.

    ``transitions`` runs a candidate's prepare before its conditions, candidate after
    candidate; the chart's prepare is the trigger's, run once per firing. The first
    candidate is always tried first, so its prepare runs before every condition.
    """
    prepares: dict[tuple[str, str], list[str]] = {}
    out: list[dict[str, Any]] = []
    for t in transitions:
        prepare = _names(t.get("prepare"))
        for source in _names(t["source"]):
            key = (t["trigger"], source)
            first = key not in prepares
            expected = prepares.setdefault(key, prepare)
            _require(
                prepare == expected,
                chart,
                f"transitions {t['trigger']!r} from {source!r} name different prepares "
                f"({', '.join(expected) or 'none'} and {', '.join(prepare) or 'none'}): "
                "a prepare runs once, before any candidate's conditions, so every "
                "candidate names the same",
            )
            one = {**t, "source": source}
            one.pop("prepare", None)
            if first and prepare:
                one["prepare"] = prepare
            out.append(one)
    return out


def _machine_state(spec: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {"name": spec["name"]}
    for key in ("on_enter", "on_exit"):
        if key in spec:
            state[key] = spec[key]
    return state


def _check_state_callbacks(
    chart: str, raw: Iterable[Mapping[str, Any]], model: type[Driver]
) -> None:
    for spec in raw:
        for key in ("on_enter", "on_exit"):
            for callback in _names(spec.get(key)):
                _check_callable(chart, model, callback, f"state {spec['name']!r} {key}")


def _compile_states(chart: str, raw: Iterable[Mapping[str, Any]]) -> dict[str, StateSpec]:
    states: dict[str, StateSpec] = {}
    for spec in raw:
        name = spec["name"]
        _require(name not in states, chart, f"state {name!r} is declared twice")
        waiting_for = tuple(spec.get("waiting_for", ()))
        terminal = bool(spec.get("terminal", False))
        _require(
            not (terminal and waiting_for), chart, f"terminal state {name!r} has a waiting_for"
        )
        for entry in waiting_for:
            _require(not entry.startswith("_"), chart, f"state {name!r} waits for {entry!r}")
        timers = tuple(
            TimerSpec(t["after"], t["trigger"], bool(t.get("repeat", False)))
            for t in spec.get("timers", ())
        )
        for timer in timers:
            _require(
                timer.trigger.startswith("_"),
                chart,
                f"timer trigger {timer.trigger!r} of {name!r} must be internal",
            )
        states[name] = StateSpec(
            name=name,
            vm_state=spec.get("vm_state", name),
            waiting_for=waiting_for,
            terminal=terminal,
            timers=timers,
        )
    return states


def _check_callable(chart: str, model: type[Driver], callback: str, where: str) -> None:
    _require(
        callable(getattr(model, callback, None)),
        chart,
        f"{where} names {callback!r}, which {model.__name__} does not define",
    )


def _check_transitions(
    chart: str,
    transitions: list[dict[str, Any]],
    states: Mapping[str, StateSpec],
    model: type[Driver],
) -> None:
    for t in transitions:
        where = f"transition {t['trigger']!r} from {t['source']!r}"
        for source in _names(t["source"]):
            _require(source in states, chart, f"{where}: unknown source")
            _require(not states[source].terminal, chart, f"{where}: leaves a terminal state")
        dest = t.get("dest")
        _require(dest is None or dest in states, chart, f"{where}: unknown dest {dest!r}")
        _require(dest not in _names(t["source"]), chart, f"{where}: reflexive (use dest None)")
        for key in _CALLBACK_KEYS:
            for callback in _names(t.get(key)):
                _check_callable(chart, model, callback, where)
    for state in states.values():
        for timer in state.timers:
            fired = any(
                t["trigger"] == timer.trigger and state.name in _names(t["source"])
                for t in transitions
            )
            _require(fired, chart, f"timer {timer.trigger!r} of {state.name!r} has no transition")


def _compile_commands(
    chart: str, raw: Mapping[str, Mapping[str, Any]], module: types.ModuleType, model: type[Driver]
) -> dict[str, CommandSpec]:
    commands: dict[str, CommandSpec] = {}
    for command, spec in raw.items():
        _require(not command.startswith("_"), chart, f"command {command!r} is internal")
        params = None
        if "params" in spec:
            params = getattr(module, spec["params"], None)
            _require(isinstance(params, type), chart, f"params {spec['params']!r} is not a type")
        check = spec.get("check")
        if check is not None:
            _check_callable(chart, model, check, f"command {command!r}")
        examples = spec.get("examples")
        if examples is not None:
            _check_callable(chart, model, examples, f"command {command!r} examples")
        _require(
            params is None or examples is not None,
            chart,
            f"command {command!r} takes params but names no examples",
        )
        commands[command] = CommandSpec(params=params, check=check, examples=examples)
    return commands


def _check_gates(
    chart: str,
    states: Mapping[str, StateSpec],
    transitions: list[dict[str, Any]],
    commands: Mapping[str, CommandSpec],
) -> None:
    for t in transitions:
        trigger = t["trigger"]
        if trigger.startswith("_"):
            continue
        _require(trigger in commands, chart, f"command {trigger!r} is not declared")
        for source in _names(t["source"]):
            _require(
                trigger in states[source].waiting_for,
                chart,
                f"{source!r} accepts {trigger!r} but does not wait for it",
            )
    for state in states.values():
        for entry in state.waiting_for:
            if entry == "quit":
                continue
            has_transition = any(
                t["trigger"] == entry and state.name in _names(t["source"]) for t in transitions
            )
            _require(has_transition, chart, f"{state.name!r} waits for {entry!r} but has no way")
