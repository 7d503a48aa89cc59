"""Tests for simulator.core.machine: the charts run on ChartMachine exactly as on the
stock ``transitions.Machine``, event for event, byte for byte."""

from __future__ import annotations

import functools
import importlib
import re

import pytest
from transitions import Machine

import statecharts
from simulator.core.chart import compile_chart
from simulator.core.chart_specs import Chart
from simulator.core.machine import ChartMachine
from simulator.runners.virtual import SimulationError, start
from simulator.scenario import builtin_names, load_scenario
from simulator.tools.paths import paths
from simulator.tools.paths_search import Case, replay
from statecharts import COMMANDS, load_chart

_FREE_PORT = re.compile(rb"127\.0\.0\.1:\d+")
"""browse's cases listen on any free port (``--port 0``): the one thing that differs."""


@functools.cache
def stock_chart(command: str) -> Chart:
    return compile_chart(importlib.import_module(f"statecharts.{command}"), machine_cls=Machine)


@functools.cache
def cases(command: str) -> tuple[Case, ...]:
    return tuple(paths(command)[0])


def test_the_charts_are_built_on_chart_machine_and_keep_the_library_s_objects() -> None:
    chart = load_chart("generate")
    assert type(chart.machine) is ChartMachine and isinstance(chart.machine, Machine)
    assert type(stock_chart("generate").machine) is Machine
    fast, stock = chart.machine, stock_chart("generate").machine
    assert list(fast.states) == list(stock.states)
    assert list(fast.events) == list(stock.events)
    for name, event in fast.events.items():
        for source, candidates in event.transitions.items():
            theirs = stock.events[name].transitions[source]
            assert [(t.source, t.dest) for t in candidates] == [(t.source, t.dest) for t in theirs]
            assert [[c.func for c in t.conditions] for t in candidates] == [
                [c.func for c in t.conditions] for t in theirs
            ]


def transcript(monkeypatch: pytest.MonkeyPatch, case: Case, *, stock: bool) -> list[bytes]:
    with monkeypatch.context() as patch:
        if stock:
            patch.setattr(statecharts, "load_chart", stock_chart)
        sim = replay(case)
        assert (type(sim.session.chart.machine) is Machine) is stock
        return [_FREE_PORT.sub(b"127.0.0.1:PORT", line.data) for line in sim.transcript]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_path_gives_the_same_bytes_on_both_machines(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for case in cases(command):
        fast = transcript(monkeypatch, case, stock=False)
        assert fast == transcript(monkeypatch, case, stock=True), case.name


@pytest.mark.parametrize("name", builtin_names())
def test_every_built_in_scenario_runs_the_same_on_both_machines(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = load_scenario(name)
    runs = []
    for stock in (False, True):
        with monkeypatch.context() as patch:
            if stock:
                patch.setattr(statecharts, "load_chart", stock_chart)
            lines = []
            for command, args in (("generate", ("-y", "--skip-failed")), ("update", ())):
                for seed in (0, 1, 2):
                    sim = start(command, *args, scenario=scenario, seed=seed, ignore_faults=True)
                    while not sim.done:  # at each gate, the first command it offers
                        try:
                            sim.wait_done()
                        except SimulationError:
                            sim.send(next((c for c in sim.waiting_for if c != "quit"), "quit"))
                    lines += [line.data for line in sim.transcript]
            runs.append(lines)
    assert runs[0] == runs[1]


def test_a_trigger_from_a_state_it_does_not_leave_is_ignored_on_both() -> None:
    for chart in (load_chart("update"), stock_chart("update")):
        model = chart.model.__new__(chart.model)
        model.state = "has_update"
        assert chart.fire(model, "_checked") is None
        assert model.state == "has_update"
