"""Test cases from the charts: a few runs that together take every transition.

Owns: :func:`paths`, which finds them, :func:`replay`, which plays one case in virtual
time, and ``zread-sim paths COMMAND [--format jsonl|pytest]``.

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

The scenarios tried are the built-ins without transport faults, then a few written here
(:data:`EXTRA_SCENARIOS`) for what no built-in reaches (a failure at a point no
built-in fails, a draft whose id is a version's, a draft with every page written, login
approved by a control peer).
A transition no case takes is named on stderr, and the command exits 1.

Steps count events, so a case replays exactly in virtual time (``zread_sim``): there,
a client answers before the next timer fires. A process at speed 0 reads its input
between firings, so a step at a gate (the session waits) replays there too, but one
sent while the session runs (``cancel`` in ``running``) can land a few events later.

Must not: write anything but its output; it runs sessions with no files (``home`` and
``project`` unset) and the browse server on a free loopback port.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Final

from simulator.errors import ConfigurationError
from simulator.tools.arguments import raising

__all__ = ["EXTRA_SCENARIOS", "Case", "PathsError", "Step", "main", "paths", "replay"]

PROG = "zread-sim paths"

FLAGS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "generate": (
        (),
        ("-y",),
        ("-y", "--skip-failed"),
        ("--draft", "resume"),
        ("--draft", "clear"),
        ("--draft", "cancel"),
    ),
    "login": ((), ("--custom",)),
    "browse": (("--port", "0"), ("--port", "0", "--version", "no-such-version")),
}
"""The flags tried per command (besides none); browse also tries ``--version`` with the
id of each version its world has."""

EXTRA_SCENARIOS: Final[dict[str, dict[str, str]]] = {
    "generate": {
        "logged-out": "[world.account]\nlogged_in = false\n",
        "broken-repository": '[[failures]]\npoint = "repository"\n'
        'error = "open repository: no .git here"\n',
        "draft-already-a-version": 'extends = "draft"\n[world.draft]\nid = "2025-01-01-000000"\n'
        '[[world.wikis]]\nid = "2025-01-01-000000"\n',
        "draft-complete": '[[world.project.pages]]\ntitle = "A"\n[[world.project.pages]]\n'
        'title = "B"\n[world.draft]\nid = "2025-01-01-000000"\nfinished = ["1-a", "2-b"]\n',
    },
    "login": {
        "approved-by-peer": '[world.login]\napprover = "control"\n',
        "flow-fails": '[[failures]]\npoint = "init_flow"\n',
        "authorization-denied": '[[failures]]\npoint = "authorization"\n',
        "save-fails": '[[failures]]\npoint = "save"\nerror = "write login.json: disk full"\n',
    },
    "update": {
        "check-fails": '[[failures]]\npoint = "check"\nerror = "check for updates: network down"\n',
    },
}
"""Scenarios written for the cases, by command: TOML text, extending ``default``."""

RUNS_PER_CONFIGURATION: Final = 200
"""At most this many runs for one scenario and set of flags (a bound, never reached by
the charts of zread-sim)."""


class PathsError(ConfigurationError):
    """An unknown command or format, or an output that cannot be written: one line."""


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
    from simulator.scenario import builtin_names, load_scenario

    flag_sets = list(FLAGS.get(command, ((),)))
    if command == "browse":
        flag_sets += [("--port", "0", "--version", v) for v in _version_ids()]
    names = [n for n in builtin_names() if not load_scenario(n).faults]
    configs = [_Configuration(command, flags, name) for flags in flag_sets for name in names]
    for name, text in EXTRA_SCENARIOS.get(command, {}).items():
        peer = load_scenario(name, text=text).world.login.approver == "control"
        configs += [_Configuration(command, flags, name, text, peer) for flags in flag_sets]
    return configs


def _version_ids() -> list[str]:
    """The wiki versions of the built-in scenarios' worlds, as browse lists them."""
    from simulator.scenario import builtin_names

    ids: list[str] = []
    for name in builtin_names():
        with (
            contextlib.suppress(Exception),
            _session(_Configuration("browse", ("--port", "0"), name)) as sim,
        ):
            for version in sim.vm.get("versions") or []:
                if version["id"] not in ids:
                    ids.append(version["id"])
    return ids[:1]


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


def paths(command: str) -> tuple[list[Case], list[str]]:
    """The cases of ``command``'s chart, shortest first, and the transitions none takes."""
    from statecharts import COMMANDS, load_chart

    if command not in COMMANDS:
        raise PathsError(f"unknown command {command!r} (one of {', '.join(COMMANDS)})")
    every = [t.key for t in load_chart(command).transitions]
    found: list[Case] = []
    reached: set[str] = set()
    for config in _configurations(command):
        start = len(found)
        _explore(config, found)
        for case in found[start:]:
            reached |= case.transitions
        if reached.issuperset(every):
            break
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
    chosen.sort(key=lambda c: (c.events, len(c.steps)))
    named = [_named(case, f"{command}-{i}") for i, case in enumerate(chosen, 1)]
    return named, [key for key in every if key not in covered]


def _named(case: Case, name: str) -> Case:
    from dataclasses import replace

    return replace(case, name=name)


# -- output ------------------------------------------------------------------------------

_PYTEST_HEAD = '''"""Paths through zread's {command} chart: together they take every transition.

Written by ``zread-sim paths {command} --format pytest``. Each case is a scenario, the
flags, and the steps a client takes: after the n-th event it sends a command (or, as
the control peer, answers the approval request). Replace the sending with your client
to check that it takes each path; the cases replay exactly in virtual time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CASES: list[dict[str, Any]] = json.loads(
    r"""
{cases}
"""
)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_path(zread_sim: Any, tmp_path: Path, case: dict[str, Any]) -> None:
    scenario = case["scenario"]
    if case["scenario_toml"] is not None:
        scenario = tmp_path / f"{{case['scenario']}}.toml"
        scenario.write_text(case["scenario_toml"], encoding="utf-8")
    session = zread_sim.start(
        case["command"], *case["args"], scenario=str(scenario), seed=case["seed"],
        peer=case["peer"],
    )
    seen = 0
    for step in case["steps"]:
        while seen < step["after_event"]:
            event = session.wait_for(lambda _: True)
            seen += 1
        assert event["waiting_for"] == step["expect"]["waiting_for"]
        if "state" in step["expect"]:
            assert event["vm"]["state"] == step["expect"]["state"]
        if "approve" in step:
            session.answer_approval(step["approve"])
        else:
            session.send(step["send"]["type"], **step["send"]["params"])
    assert session.wait_done()["done"] is True
    taken = session.session.reached.transitions
    assert taken >= set(case["transitions"]), sorted(set(case["transitions"]) - taken)
'''


def pytest_module(command: str, cases: Sequence[Case]) -> str:
    """A pytest module that replays ``cases`` with the ``zread_sim`` fixture."""
    data = json.dumps([case.as_json() for case in cases], indent=1)
    return _PYTEST_HEAD.format(command=command, cases=data)


def _parser() -> argparse.ArgumentParser:
    parser = raising(PathsError)(
        prog=PROG,
        description="Test cases that together take every transition of a zread chart: "
        "one JSON object per line (scenario, flags, steps), or a pytest module.",
    )
    parser.add_argument("command", help="browse, generate, config, login, update or version")
    parser.add_argument("--format", choices=("jsonl", "pytest"), default="jsonl")
    parser.add_argument("--out", metavar="FILE", help="write there instead of stdout")
    return parser


def main(argv: list[str], out: IO[str] | None = None) -> int:
    """``zread-sim paths COMMAND [--format jsonl|pytest] [--out FILE]``: 0 when the
    cases take every transition, 1 when some are left (named on stderr), 2 on a bad
    argument."""
    try:
        args = _parser().parse_args(argv)
    except PathsError as refused:
        sys.stderr.write(f"{PROG}: {refused}\n")
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        cases, left = paths(args.command)
        if args.format == "pytest":
            text = pytest_module(args.command, cases)
        else:
            text = "".join(json.dumps(case.as_json()) + "\n" for case in cases)
        if args.out:
            try:
                with open(args.out, "w", encoding="utf-8") as file:
                    file.write(text)
            except OSError as err:
                raise PathsError(f"{args.out}: {err.strerror or err}") from None
        else:
            with contextlib.suppress(OSError, ValueError):
                (out or sys.stdout).write(text)
                (out or sys.stdout).flush()
    except PathsError as err:
        sys.stderr.write(f"{PROG}: {err}\n")
        return 2
    for key in left:
        sys.stderr.write(f"{PROG}: no case takes {key}\n")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
