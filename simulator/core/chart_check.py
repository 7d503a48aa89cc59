"""The checking of a chart dict: every name it gives resolved once, or a message saying which.

Owns: :class:`ChartError`, and :func:`check_chart`, which reads a command module's
``CHART`` (the keys are documented in :mod:`simulator.core.chart`) against the module
and its model class into the parts a :class:`~simulator.core.chart_specs.Chart` is made
of (:class:`CheckedChart`). A chart that names a missing state, model, flags type,
callback or params type, a delay it cannot schedule, or whose gates or prepares
disagree with its transitions, is refused here with a :class:`ChartError` that names
the chart and what is wrong, before any machine is built.

Must not: build the machine (:mod:`simulator.core.chart` does), change the chart dict
it is given, or do any I/O.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from simulator.core.chart_specs import (
    WORLD_DELAY,
    CommandSpec,
    StateSpec,
    TimerSpec,
    TransitionSpec,
)
from simulator.core.driver import Driver, Flags
from simulator.errors import SimulatorBug
from simulator.scenario.timing import Delay

_CALLBACK_KEYS = ("conditions", "unless", "prepare", "before", "after")


class ChartError(SimulatorBug):
    """A chart that cannot run: the simulator's own bug, never the client's."""


class CheckedChart(msgspec.Struct, frozen=True):
    """A chart dict once checked: its names resolved, its parts compiled."""

    name: str
    initial: str
    model: type[Driver]
    flags_type: type[Flags]
    timing: dict[str, Delay]
    states: dict[str, StateSpec]
    commands: dict[str, CommandSpec]
    failures: tuple[str, ...]
    entries: list[dict[str, Any]]
    """The transitions as the machine takes them: one source each, each trigger's
    ``prepare`` on its first candidate from each source only."""
    transitions: tuple[TransitionSpec, ...]
    """One per entry, in the same order."""
    has_start: bool
    uses_project: bool
    writes: frozenset[str]


def check_chart(module: types.ModuleType) -> CheckedChart:
    """Check ``module.CHART`` against the module and the model class it names; raises
    :class:`ChartError` at the first thing wrong."""
    data: dict[str, Any] = module.CHART
    name = data["name"]
    model = _resolve_model(name, data.get("model"), module)
    timing = _compile_timing(name, data.get("timing", {}))
    states = _compile_states(name, data["states"])
    _check_timers(name, states, timing)
    _check_state_callbacks(name, data["states"], model)
    _require(data["initial"] in states, name, f"initial state {data['initial']!r} is not declared")
    transitions = [dict(t) for t in data["transitions"]]
    _check_transitions(name, transitions, states, model)
    commands = _compile_commands(name, data.get("commands", {}), module, model)
    _check_gates(name, states, transitions, commands)
    failures = _compile_failures(name, data.get("failures", ()))
    entries = _prepare_once(name, transitions)
    specs = _transition_specs(name, entries)
    return CheckedChart(
        name=name,
        initial=data["initial"],
        model=model,
        flags_type=_resolve_flags(name, data.get("flags"), module),
        timing=timing,
        states=states,
        commands=commands,
        failures=failures,
        entries=entries,
        transitions=specs,
        has_start=any(t["trigger"] == "_start" for t in transitions),
        uses_project=bool(data.get("project", False)),
        writes=_writes(name, data.get("writes")),
    )


WRITABLE = ("project", "home")
"""What a chart's ``"writes"`` may name: the project's ``.zread/wiki``, HOME's ``.zread``."""


def _writes(name: str, value: Any) -> frozenset[str]:
    places = frozenset(_names(value))
    _require(places <= set(WRITABLE), name, f"writes {sorted(places)}: only {WRITABLE}")
    return places


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _require(ok: bool, chart: str, message: str) -> None:
    if not ok:
        raise ChartError(f"chart {chart}: {message}")


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


def _compile_failures(chart: str, raw: Any) -> tuple[str, ...]:
    _require(
        isinstance(raw, list | tuple), chart, f"failures must be a list of points, not {raw!r}"
    )
    for point in raw:
        _require(isinstance(point, str) and point != "", chart, f"{point!r} is not a point name")
    _require(len(set(raw)) == len(raw), chart, "a failure point is declared twice")
    return tuple(raw)


def _resolve_model(chart: str, name: Any, module: types.ModuleType) -> type[Driver]:
    model = getattr(module, name, None) if isinstance(name, str) else None
    if not (isinstance(model, type) and issubclass(model, Driver)):
        raise ChartError(f"chart {chart}: model {name!r} is not a Driver subclass in its module")
    return model


def _resolve_flags(chart: str, name: Any, module: types.ModuleType) -> type[Flags]:
    if name is None:
        return Flags
    flags = getattr(module, name, None) if isinstance(name, str) else None
    if not (isinstance(flags, type) and issubclass(flags, Flags)):
        raise ChartError(f"chart {chart}: flags {name!r} is not a Flags subclass in its module")
    return flags


def _compile_timing(chart: str, raw: Any) -> dict[str, Delay]:
    _require(isinstance(raw, Mapping), chart, f"timing must map delay names, not {raw!r}")
    timing: dict[str, Delay] = {}
    for delay, spec in raw.items():
        _require(isinstance(delay, str) and delay != "", chart, f"delay {delay!r} is not a name")
        _require(
            not delay.startswith(WORLD_DELAY),
            chart,
            f"delay {delay!r} is a world duration, not a [timing] delay",
        )
        try:
            timing[delay] = msgspec.convert(spec, Delay)
        except msgspec.ValidationError as error:
            raise ChartError(f"chart {chart}: timing {delay!r}: {error}") from None
    return timing


def _check_timers(chart: str, states: Mapping[str, StateSpec], timing: Mapping[str, Delay]) -> None:
    for state in states.values():
        for timer in state.timers:
            _require(
                timer.after.startswith(WORLD_DELAY) or timer.after in timing,
                chart,
                f"state {state.name!r}: timer delay {timer.after!r} has no default in timing",
            )


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
