"""The ``transitions`` machine the charts run on, without what a chart does not use.

Owns: :class:`ChartMachine`, a subclass of ``transitions.Machine`` that the chart
compiler builds (:func:`simulator.core.chart.compile_chart`), and its Event, Transition
and State classes.

What it keeps of the library: everything a chart is made of. The machine is built by
``Machine.__init__`` from the chart's states and transitions; its ``State``,
``Transition``, ``Condition`` and ``Event`` objects, its ``EventData``, the callbacks
named by string and resolved on the model, and their order (prepare, conditions in
order, ``before_state_change``, ``before``, exit, the state set, enter, ``after``,
``after_state_change``; the first candidate whose conditions hold wins) are the
library's. So is what is not overridden here: a chart that used queued transitions,
``on_exception`` or nested states would still get the library's behaviour through the
stock methods it falls back to.

What it drops, measured per trigger on the generate chart (~60 % of the dispatch's
instructions, ``benchmarks/instructions.py``):

- the logger calls (``_LOGGER.debug``/``info``: 7.4 a trigger, each a call that checks
  the level and returns: nothing is ever logged by a chart);
- the ``functools.partial`` ``Event.trigger`` wraps ``_trigger`` in, to pass it to the
  machine's queue (a chart's machine has no queue: the session is the queue);
- ``itertools.chain`` of the machine's and the transition's callbacks, and a call to
  ``Machine.callbacks`` for every empty list;
- ``get_state``'s ``Enum`` check and its ``in`` test before the dict lookup, and
  ``State.name``'s (a chart's states are strings, validated when it is compiled);
- the properties in front of the machine's callback lists and queue flag: they are
  read as the attributes behind them (``_queued``, ``_prepare_event``,
  ``_before_state_change``...), as the library's own methods read them (``transitions``
  is pinned below 0.10, and ``tests/core/test_machine.py`` fails if one moves).

A callback or condition named by string is looked up on the model with ``getattr``
(the compiler has checked that it is a method); ``resolve_callable``, which the
library's own paths still use, tries that first too.

``tests/core/test_machine.py`` runs every chart on the stock ``Machine`` and on this one
and compares every event byte for byte.

Must not: change what a chart does; read the clock or do I/O.
"""

from __future__ import annotations

from typing import Any

from transitions import Event, EventData, Machine, State, Transition


def _call_all(funcs: list[Any], event_data: EventData) -> None:
    model = event_data.model
    for func in funcs:
        if isinstance(func, str):
            func = getattr(model, func)
        func(event_data)


class _ChartState(State):
    def enter(self, event_data: EventData) -> None:
        if self.on_enter:
            _call_all(self.on_enter, event_data)

    def exit(self, event_data: EventData) -> None:
        if self.on_exit:
            _call_all(self.on_exit, event_data)


class _ChartTransition(Transition):
    def execute(self, event_data: EventData) -> bool:
        machine = event_data.machine
        if self.prepare:
            _call_all(self.prepare, event_data)
        model = event_data.model
        for condition in self.conditions:  # Condition.check, without its indirections
            check = condition.func
            if isinstance(check, str):
                check = getattr(model, check)
            if check(event_data) != condition.target:
                return False
        if machine._before_state_change:
            _call_all(machine._before_state_change, event_data)
        if self.before:
            _call_all(self.before, event_data)
        if self.dest:  # None: internal, the state stays
            self._change_state(event_data)
        if self.after:
            _call_all(self.after, event_data)
        if machine._after_state_change:
            _call_all(machine._after_state_change, event_data)
        return True

    def _change_state(self, event_data: EventData) -> None:
        machine = event_data.machine
        states = machine.states
        states[self.source].exit(event_data)
        dest = states[self.dest]  # type: ignore[index]  # never None here: execute checks
        setattr(event_data.model, machine.model_attribute, dest.value)
        event_data.state = dest
        dest.enter(event_data)
        if dest.final and machine.on_final:
            _call_all(machine.on_final, event_data)


class _ChartEvent(Event):
    def trigger(self, model: Any, *args: Any, **kwargs: Any) -> bool:
        machine = self.machine
        if machine._queued:  # pragma: no cover - charts have no queue
            return bool(super().trigger(model, *args, **kwargs))
        event_data = EventData(None, self, machine, model, args=args, kwargs=kwargs)
        name = getattr(model, machine.model_attribute)  # a chart's states are strings
        event_data.state = machine.states[name]
        candidates = self.transitions.get(name)
        if candidates is None:  # not a source of this trigger: ignored (as charts ask)
            if not machine.ignore_invalid_triggers:  # pragma: no cover
                return bool(super().trigger(model, *args, **kwargs))
            return False
        if machine._prepare_event or machine._finalize_event or machine._on_exception:
            return bool(super().trigger(model, *args, **kwargs))  # pragma: no cover
        for transition in candidates:
            event_data.transition = transition
            if transition.execute(event_data):
                event_data.result = True
                return True
        return False


class ChartMachine(Machine):
    """``transitions.Machine`` with the chart's Event, Transition and State classes."""

    event_cls = _ChartEvent
    transition_cls = _ChartTransition
    state_cls = _ChartState

    @staticmethod
    def resolve_callable(func: Any, event_data: EventData) -> Any:
        if isinstance(func, str):
            method = getattr(event_data.model, func, None)
            if callable(method):
                return method
        return Machine.resolve_callable(func, event_data)
