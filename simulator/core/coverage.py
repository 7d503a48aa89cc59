"""What a session reached of its chart: the raw material of a coverage report.

Owns: :class:`Reached`, the names of what one session (or many, merged) reached of
one chart, and the spelling of those names, which journals and reports share:

- a state is its chart name (``catalog``, finer than ``vm.state``);
- a transition is its :attr:`~simulator.core.chart.TransitionSpec.key`,
  ``trigger source->dest [guards]`` (``select_action select_action->catalog
  [chose_fresh]``; ``->source`` for an internal one, ``!name`` for an ``unless``);
- a gate is ``state:command``, a command a client sent in a state that waits for it
  (``catalog:cancel``, ``retry_gate:retry``, ``select_action:quit``);
- a failure is the scenario point that failed (``page``, ``catalog``);
- a fault is the kind of a transport fault that fired (``split``, ``exit``), known to
  the process runner only.

A session keeps what it reached as bit masks over its chart's tuples (a few ints, and
no set, per session); :meth:`simulator.core.chart.Chart.reached` turns them into names.

Must not: know the totals (that is the report's, :mod:`simulator.tools.coverage`), read
files or the clock.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec


class Reached(msgspec.Struct, frozen=True):
    """What was reached of the chart of ``command``; empty sets where nothing was."""

    command: str
    states: frozenset[str] = frozenset()
    transitions: frozenset[str] = frozenset()
    gates: frozenset[str] = frozenset()
    failures: frozenset[str] = frozenset()
    faults: frozenset[str] = frozenset()

    def __or__(self, other: Reached) -> Reached:
        """Both together (of one command)."""
        if other.command != self.command:
            raise ValueError(f"cannot merge {other.command} into {self.command}")
        return Reached(
            self.command,
            self.states | other.states,
            self.transitions | other.transitions,
            self.gates | other.gates,
            self.failures | other.failures,
            self.faults | other.faults,
        )

    def __bool__(self) -> bool:
        return bool(self.states or self.transitions or self.gates or self.failures or self.faults)

    def as_json(self) -> dict[str, object]:
        """Plain data, each set as a sorted list: what a journal's ``cover`` record and
        ``--zread-coverage-json`` hold."""
        return {
            "command": self.command,
            "states": sorted(self.states),
            "transitions": sorted(self.transitions),
            "gates": sorted(self.gates),
            "failures": sorted(self.failures),
            "faults": sorted(self.faults),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Reached:
        """The inverse of :meth:`as_json` (unknown keys ignored, missing ones empty)."""

        def names(key: str) -> frozenset[str]:
            value = data.get(key, ())
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key} must be a list of names")
            return frozenset(value)

        command = data.get("command")
        if not isinstance(command, str):
            raise ValueError("command must be a name")
        return cls(
            command,
            names("states"),
            names("transitions"),
            names("gates"),
            names("failures"),
            names("faults"),
        )


def merge(reached: Iterable[Reached]) -> dict[str, Reached]:
    """Everything reached, one :class:`Reached` per command."""
    out: dict[str, Reached] = {}
    for one in reached:
        out[one.command] = out[one.command] | one if one.command in out else one
    return out
