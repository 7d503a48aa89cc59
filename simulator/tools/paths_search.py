"""Test cases from the charts: a few runs that together take every transition.

Owns: :class:`Case` and :class:`Step`, what a case is; :func:`replay`, which plays one
case in virtual time; and :func:`search`, which finds the cases of a chart. Which
command, the outputs (JSON lines, a pytest module) and ``zread-sim paths`` are
:mod:`simulator.tools.paths`'s.

A case is a scenario (a built-in name, or TOML text of its own), zread's flags, and the
steps a client takes: after the n-th event (whose ``waiting_for`` it checks, and its
``vm.state`` where the vm has one) it sends a command, or, as the control peer
(``peer``), answers login's approval request. After the last step the session runs by
itself to its ``done:true`` event. The cases are found by running the charts, not by
reading them: conditions test the world, the flags and the vm, so only a run says
which scenario and which answer take a transition. The search is breadth-first over
the client's choices, per scenario and flags: at every event, each command the state
waits for, with each of the chart's example params (``examples`` in the chart, see
:mod:`simulator.core.chart`), is tried once per chart state; a run that stops at a gate
nobody answers ends with ``quit`` there. Of all the runs, a greedy cover keeps the
fewest that take every transition reached, preferring short ones; the cases come
shortest first. Everything is seeded and ordered: the same charts give the same cases.

The scenarios tried are the built-ins without transport faults, then those the
command's module writes in its ``EXAMPLES`` for what no built-in reaches (a failure at
a point no built-in fails, a draft whose id is a version's, a draft with every page
written, login approved by a control peer), each with every set of flags ``EXAMPLES``
names.

Steps count events, so a case replays exactly in virtual time (``zread_sim``): there,
a client answers before the next timer fires. A process at speed 0 reads its input
between firings, so a step at a gate (the session waits) replays there too, but one
sent while the session runs (``cancel`` in ``running``) can land a few events later.

Must not: write anything; it runs sessions with no files (``home`` and ``project``
unset) and the browse server on a free loopback port.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from simulator.core.command import Examples

RUNS_PER_CONFIGURATION: Final = 200
"""At most this many runs for one scenario and set of flags (a bound, never reached by
the charts of zread-sim)."""


@dataclass(frozen=True)
class Step:
    """After event ``after_event`` (1-based), send ``send``, or answer the approval."""

    after_event: int
    expect: dict[str, Any]
    """What that event shows: ``waiting_for``, and ``state`` where the vm has one."""
    send: dict[str, Any] | None = None
    """The command line, as an object: ``{"type": ..., "params": {...}}``."""
    approve: bool | None = None
    """As the control peer: approve (True) or deny (False) the login request."""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"after_event": self.after_event, "expect": self.expect}
        if self.send is not None:
            out["send"] = self.send
        if self.approve is not None:
            out["approve"] = self.approve
        return out


@dataclass(frozen=True)
class Case:
    """One run to replay: the scenario, the flags, the steps; what it takes."""

    command: str
    args: tuple[str, ...]
    scenario: str
    """A built-in's name, or the name of :attr:`scenario_toml`."""
    scenario_toml: str | None
    peer: bool
    steps: tuple[Step, ...]
    transitions: frozenset[str] = frozenset()
    events: int = 0
    name: str = ""
    seed: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "scenario": self.scenario,
            "scenario_toml": self.scenario_toml,
            "peer": self.peer,
            "seed": self.seed,
            "steps": [step.as_json() for step in self.steps],
            "events": self.events,
            "transitions": sorted(self.transitions),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(
            command=data["command"],
            args=tuple(data["args"]),
            scenario=data["scenario"],
            scenario_toml=data.get("scenario_toml"),
            peer=bool(data.get("peer", False)),
            steps=tuple(
                Step(s["after_event"], s["expect"], s.get("send"), s.get("approve"))
                for s in data["steps"]
            ),
            transitions=frozenset(data.get("transitions", ())),
            events=int(data.get("events", 0)),
            name=data.get("name", ""),
            seed=int(data.get("seed", 0)),
        )


@dataclass(frozen=True)
class _Configuration:
    command: str
    args: tuple[str, ...]
    scenario: str
    scenario_toml: str | None = None
    peer: bool = False


@dataclass
class _Run:
    """What one run did: each event's choices, whether it ended by itself, its reach."""

    choices: list[tuple[int, str, list[Step]]] = field(default_factory=list)
    """(event number, chart state, the steps a client could take after it)."""
    ended: bool = False
    events: int = 0
    transitions: frozenset[str] = frozenset()
    stop: Step | None = None
    """The ``quit`` that ends a run left waiting at a gate."""


# -- running a case ----------------------------------------------------------------------


def _scenario(config: _Configuration | Case) -> Any:
    from simulator.scenario import load_scenario

    return load_scenario(config.scenario, text=config.scenario_toml)


@contextlib.contextmanager
def _session(config: _Configuration | Case, seed: int = 0) -> Iterator[Any]:
    from simulator.runners.virtual import start

    sim = start(
        config.command, *config.args, scenario=_scenario(config), seed=seed, peer=config.peer
    )
    try:
        yield sim
    finally:
        sim.close()


def _expect(sim: Any, event: dict[str, Any]) -> dict[str, Any]:
    expect: dict[str, Any] = {"waiting_for": list(event["waiting_for"])}
    if "state" in event["vm"]:
        expect["state"] = event["vm"]["state"]
    return expect


def _next(sim: Any) -> dict[str, Any] | None:
    from simulator.runners.virtual import SimulationError

    try:
        event: dict[str, Any] = sim.wait_for(lambda _: True)
    except SimulationError:
        return None
    return event


def _take(sim: Any, step: Step) -> None:
    if step.approve is not None:
        sim.answer_approval(step.approve)
    elif step.send is not None:
        sim.send(step.send["type"], **step.send.get("params", {}))


def _options(sim: Any, event: dict[str, Any], number: int) -> list[Step]:
    """Every step a client could take after this event."""
    expect = _expect(sim, event)
    steps = []
    if sim.approval is not None:
        steps += [Step(number, expect, approve=True), Step(number, expect, approve=False)]
    chart, driver = sim.session.chart, sim.session.driver
    for command in event["waiting_for"]:
        spec = chart.commands.get(command)
        examples: list[dict[str, Any]] = [{}]
        if spec is not None and spec.examples is not None:
            examples = getattr(driver, spec.examples)()
        steps += [Step(number, expect, {"type": command, "params": p}) for p in examples]
    return steps


def _run(config: _Configuration, steps: Sequence[Step]) -> _Run:
    """Play ``steps``, then let the session run by itself; what it offered meanwhile."""
    run = _Run()
    with _session(config) as sim:
        number = 0
        pending = deque(steps)
        while True:
            event = _next(sim)
            if event is None:
                break
            number += 1
            if pending and pending[0].after_event == number:
                _take(sim, pending.popleft())
                continue
            if not pending and not sim.done:
                run.choices.append((number, sim.session.state, _options(sim, event, number)))
        run.ended = sim.done
        if not sim.done:  # left waiting at a gate: a client would quit
            run.stop = Step(number, _expect(sim, sim.last), {"type": "quit", "params": {}})
            _take(sim, run.stop)
        run.events = len(sim.events)
        run.transitions = sim.session.reached.transitions
    return run


def replay(case: Case) -> Any:
    """Play ``case`` in virtual time; the finished session (a
    :class:`~simulator.runners.virtual.SimSession`). Raises AssertionError when an
    event is not what the step expects."""
    with _session(case, case.seed) as sim:
        number = 0
        event: dict[str, Any] | None = None
        for step in case.steps:
            while number < step.after_event:
                event = _next(sim)
                if event is None:
                    raise AssertionError(
                        f"{case.name}: the session ended before event {number + 1}"
                    )
                number += 1
            assert event is not None
            got = _expect(sim, event)
            if got != step.expect:
                raise AssertionError(f"{case.name}: event {number} is {got}, not {step.expect}")
            _take(sim, step)
        while _next(sim) is not None:
            pass
        if not sim.done:
            raise AssertionError(f"{case.name}: the session waits for {sim.waiting_for}")
        return sim


# -- finding the cases -------------------------------------------------------------------


def _configurations(command: str) -> list[_Configuration]:
    """Every scenario with every set of flags the command's ``EXAMPLES`` name."""
    from simulator.scenario import builtin_names, load_scenario
    from statecharts import command_module

    examples: Examples = getattr(command_module(command), "EXAMPLES", Examples())
    flag_sets = list(examples.flags)
    if examples.flags_from_vm is not None:
        flag_sets += _flags_from_vm(command, flag_sets[0], examples.flags_from_vm)
    names = [n for n in builtin_names() if not load_scenario(n).faults]
    configs = [_Configuration(command, flags, name) for flags in flag_sets for name in names]
    for name, text in examples.scenarios.items():
        peer = load_scenario(name, text=text).world.login.approver == "control"
        configs += [_Configuration(command, flags, name, text, peer) for flags in flag_sets]
    return configs


def _flags_from_vm(
    command: str,
    first: tuple[str, ...],
    made: Callable[[dict[str, Any]], tuple[str, ...] | None],
) -> list[tuple[str, ...]]:
    """The flags ``made`` from the first event's vm of the first built-in scenario
    whose run gives any (browse: the ``--version`` of a version it lists)."""
    from simulator.scenario import builtin_names

    for name in builtin_names():
        with contextlib.suppress(Exception), _session(_Configuration(command, first, name)) as sim:
            flags = made(sim.vm)
            if flags is not None:
                return [flags]
    return []


def _explore(config: _Configuration, found: list[Case]) -> None:
    tried: set[tuple[str, str]] = set()
    queue: deque[tuple[Step, ...]] = deque([()])
    runs = 0
    while queue and runs < RUNS_PER_CONFIGURATION:
        steps = queue.popleft()
        run = _run(config, steps)
        runs += 1
        taken = (*steps, run.stop) if run.stop is not None else steps
        found.append(
            Case(
                config.command,
                config.args,
                config.scenario,
                config.scenario_toml,
                config.peer,
                tuple(s for s in taken if s is not None),
                run.transitions,
                run.events,
            )
        )
        for _, state, options in run.choices:
            for option in options:
                key = (
                    state,
                    json.dumps(option.send) if option.send else f"approve={option.approve}",
                )
                if key not in tried:
                    tried.add(key)
                    queue.append((*steps, option))


def search(command: str) -> tuple[list[Case], list[str]]:
    """The cases of ``command``'s chart (a command of ``statecharts.COMMANDS``),
    shortest first, and the transitions none takes."""
    from statecharts import load_chart

    every = [t.key for t in load_chart(command).transitions]
    chosen, covered = _cover(_explore_until_covered(command, every))
    chosen.sort(key=lambda c: (c.events, len(c.steps)))
    named = [_named(case, f"{command}-{i}") for i, case in enumerate(chosen, 1)]
    return named, [key for key in every if key not in covered]


def _explore_until_covered(command: str, every: Sequence[str]) -> list[Case]:
    """Every run of every configuration in turn, until the runs take ``every``
    transition or the configurations are all tried."""
    found: list[Case] = []
    reached: set[str] = set()
    for config in _configurations(command):
        start = len(found)
        _explore(config, found)
        for case in found[start:]:
            reached |= case.transitions
        if reached.issuperset(every):
            break
    return found


def _cover(found: Sequence[Case]) -> tuple[list[Case], set[str]]:
    """A greedy cover: the case that adds the most transitions (the fewest events and
    steps among equals) until none adds any; the cases kept and what they take."""
    chosen: list[Case] = []
    covered: set[str] = set()
    while True:
        best = max(
            found,
            key=lambda c: (len(c.transitions - covered), -c.events, -len(c.steps)),
            default=None,
        )
        if best is None or not best.transitions - covered:
            break
        chosen.append(best)
        covered |= best.transitions
    return chosen, covered


def _named(case: Case, name: str) -> Case:
    from dataclasses import replace

    return replace(case, name=name)
