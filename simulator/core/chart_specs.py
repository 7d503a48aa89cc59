"""The compiled form of a chart: what a session runs, once its chart dict is checked.

Owns: :class:`Chart` (the states, commands, transitions, timing and the one machine
every session of the chart shares) and the parts it is made of, :class:`StateSpec`,
:class:`TimerSpec`, :class:`CommandSpec` and :class:`TransitionSpec`; and
:data:`WORLD_DELAY`, how a timer names a duration of the world rather than a delay.
These are what sessions, coverage and the tools read; :mod:`simulator.core.chart`
re-exports them, with :func:`~simulator.core.chart.compile_chart`, which builds them.

Each transition a session can take is one :class:`TransitionSpec` of
:attr:`Chart.transitions` (one per source of a chart entry), named by its ``key``; the
machine tells the model which one ran (``Driver.transition_taken``), so a session can
say what of its chart it reached (:mod:`simulator.core.coverage`).

Must not: read a chart dict or check one (:mod:`simulator.core.chart_check` does),
build the machine (:mod:`simulator.core.chart` does), or do any I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from transitions import Machine

from simulator.core.coverage import Reached
from simulator.core.driver import Driver, Flags
from simulator.scenario.timing import Delay

WORLD_DELAY = "world."
"""A timer ``after`` that starts with this is a duration read from the world, in seconds."""


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
    """The model's method that lists example params (``commands`` in a chart dict, see
    :mod:`simulator.core.chart`)."""


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


_NAMED: dict[int, tuple[Chart, dict[tuple[int, int, int, int], Reached]]] = {}
"""By chart (its ``id``, the chart kept beside it): the :class:`Reached` each set of
marks names (:meth:`Chart.reached`). The commands' charts are compiled once a process
(:func:`statecharts.load_chart`), so keeping a chart here keeps nothing that would go."""
_NAMED_MOST = 4096


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
    flags_type: type[Flags]
    machine: Machine
    timing: Mapping[str, Delay]
    """The default of every delay the chart uses (a scenario's ``[timing]`` wins)."""
    has_start: bool
    shows_state: bool
    transitions: tuple[TransitionSpec, ...]
    gates: tuple[tuple[str, str], ...]
    failures: tuple[str, ...]
    uses_project: bool
    """Whether the command reads or writes the project's ``.zread/wiki`` (the chart's
    ``"project"``; other commands never open it)."""
    writes: frozenset[str]
    """What the command may write, ``"project"`` and ``"home"`` (the chart's
    ``"writes"``): those folders are checked writable before its first event."""
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
        """The names of what the bit masks mark (bit ``i`` is item ``i`` in chart order).

        Sessions of one chart reach the same few sets of marks over and over (a journal
        asks at each event that reached something new): each is named once a process,
        for up to :data:`_NAMED_MOST` sets a chart."""
        masks = (states, transitions, gates, failures)
        chart, named = _NAMED.get(id(self), (None, {}))
        if chart is not self:  # (a chart gone and another at its address: anew)
            named = {}
            _NAMED[id(self)] = (self, named)
        found = named.get(masks)
        if found is None:
            if len(named) >= _NAMED_MOST:
                named.clear()
            found = named[masks] = self._name(*masks)
        return found

    def _name(self, states: int, transitions: int, gates: int, failures: int) -> Reached:
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
