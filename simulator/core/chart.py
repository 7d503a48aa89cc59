"""Turns a chart declared as data into one shared ``transitions`` machine.

Owns: the schema of a chart (``statecharts/<command>.py`` exports ``CHART``, a dict of
plain lists and dicts, and the :class:`~simulator.core.driver.Driver` subclass whose methods
the chart names), and :func:`compile_chart`, which checks one
(:mod:`simulator.core.chart_check`) and builds the machine its sessions share into a
:class:`Chart` (:mod:`simulator.core.chart_specs`, the compiled form a session runs).
Those modules' names are importable from here too.

A chart dict has:

- ``name``: the zread command; ``initial``: the state a session starts in.
- ``model``: the name of the chart's Driver subclass in its module (``"GenerateModel"``).
- ``flags``: the name of the command's :class:`~simulator.core.driver.Flags` subclass in
  its module (none: the command takes no flags).
- ``timing``: every delay the chart uses, by name, with its default distribution
  (``{"page": {"uniform": [0.6, 1.5]}}``, as a scenario's ``[timing]`` writes it): those
  the model schedules (``self.rt.schedule("_x", "page")``) and its states' timers. A
  scenario's ``[timing]`` replaces a delay by name; the default is used otherwise.
- ``states``: a list of ``{"name", "waiting_for": [...], "vm_state", "terminal",
  "timers": [{"after": <delay name>, "trigger": "_x", "repeat": bool}], "on_enter",
  "on_exit"}``. A state's timers are armed when it is entered and dropped when it is
  left; a ``repeat`` timer is armed again each time it fires while the state holds.
  ``after`` names a delay of the chart's ``timing``, or a duration of its world
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
  (``self.rt.failure("page", ...)``), each once; asking about another is a bug. A
  scenario may name the points of every command.
- ``project``: true when the command reads or writes the project's ``.zread/wiki``.

Each transition a session can take is one :class:`TransitionSpec` of
:attr:`Chart.transitions` (one per source of a chart entry), named by its ``key``.

A chart may declare an internal ``_start`` trigger: the session fires it once before
the first event, so a chart can choose its first state from flags and the world.

Every name is resolved once, when the chart is compiled; a chart that names a missing
state, model, callback or params type, a delay it cannot schedule, or whose gates or
prepares disagree with its transitions, fails to compile with a message saying which.

Sessions are models the shared machine does not list: ``Event.trigger(model)`` needs
only the model's ``state`` attribute, while ``Machine.add_model`` scans a list
(O(models)) and binds a dozen methods to every model.

Must not: run a session, read files or the clock; it is given the chart's module.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any

from transitions import Machine

from simulator.core.chart_check import check_chart
from simulator.core.chart_specs import (
    Chart,
    TransitionSpec,
)
from simulator.core.machine import ChartMachine


def compile_chart(module: types.ModuleType, *, machine_cls: type[Machine] = ChartMachine) -> Chart:
    """Validate ``module.CHART`` against the model class it names and build its machine
    (a :class:`~simulator.core.machine.ChartMachine`; ``machine_cls=transitions.Machine``
    builds the stock one, which runs a chart the same)."""
    checked = check_chart(module)
    specs = checked.transitions
    taken: dict[int, int] = {}  # id of the machine's Transition -> its spec's index
    machine = machine_cls(
        model=None,
        states=[_machine_state(spec) for spec in module.CHART["states"]],
        transitions=checked.entries,
        initial=checked.initial,
        send_event=True,
        auto_transitions=False,
        ignore_invalid_triggers=True,
        before_state_change=[_taken_by(taken)],
    )
    for spec, transition in zip(specs, _machine_transitions(machine, specs), strict=True):
        taken[id(transition)] = spec.index
    states = checked.states
    gates = tuple((s.name, command) for s in states.values() for command in s.waiting_for)
    vm_fields = getattr(checked.model.vm_type, "__struct_fields__", ())
    return Chart(
        name=checked.name,
        initial=checked.initial,
        states=states,
        commands=checked.commands,
        model=checked.model,
        flags_type=checked.flags_type,
        machine=machine,
        timing=checked.timing,
        has_start=checked.has_start,
        shows_state="state" in vm_fields,
        transitions=specs,
        gates=gates,
        failures=checked.failures,
        uses_project=checked.uses_project,
        writes=checked.writes,
        state_bits={state: 1 << i for i, state in enumerate(states)},
        gate_bits={gate: 1 << i for i, gate in enumerate(gates)},
        failure_bits={point: 1 << i for i, point in enumerate(checked.failures)},
    )


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


def _machine_state(spec: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {"name": spec["name"]}
    for key in ("on_enter", "on_exit"):
        if key in spec:
            state[key] = spec[key]
    return state
