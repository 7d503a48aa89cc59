"""Tests for statecharts.version, in process and in virtual time.

version writes one event, ``done:true`` with an empty waiting_for, describing the
installed zread and the host in Go's names; nothing is accepted.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.virtual import SimSession, start
from statecharts import load_chart

GO_OS = {"linux": "linux", "darwin": "darwin", "win32": "windows"}[sys.platform]
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[
    platform.machine().lower()
]
VM_KEYS = ["version", "channel", "go_version", "os", "arch"]

Starter = Callable[..., SimSession]


@pytest.fixture
def run() -> Iterator[Starter]:
    """Start ``zread version --stdio`` sessions in virtual time; closed at the end."""
    opened: list[SimSession] = []

    def _start(*args: str, **kwargs: Any) -> SimSession:
        sim = start("version", *args, **kwargs)
        opened.append(sim)
        return sim

    yield _start
    for sim in opened:
        sim.close()


def done_event(version: str, channel: str = "stable", go_version: str = "go1.24.4") -> Any:
    return {
        "vm": {
            "version": version,
            "channel": channel,
            "go_version": go_version,
            "os": GO_OS,
            "arch": GO_ARCH,
        },
        "waiting_for": [],
        "done": True,
        "error": "",
    }


def scenario_file(tmp_path: Path, text: str, name: str = "custom") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text('extends = "default"\n' + text, encoding="utf-8")
    return str(path)


def test_chart_goes_straight_to_a_terminal_state() -> None:
    chart = load_chart("version")
    shown = {name: spec for name, spec in chart.states.items() if name != chart.initial}
    assert list(shown) == ["done"]
    assert shown["done"].terminal is True
    assert shown["done"].waiting_for == ()
    assert all(spec.timers == () for spec in chart.states.values())
    assert dict(chart.commands) == {}


@pytest.mark.parametrize(("scenario", "version"), [("default", "0.2.13"), ("up-to-date", "0.2.13")])
def test_one_done_event_at_once(run: Starter, scenario: str, version: str) -> None:
    sim = run(scenario=scenario)
    assert sim.events == [done_event(version)]
    assert list(sim.vm) == VM_KEYS
    assert "state" not in sim.vm
    assert sim.done is True
    assert sim.now == 0.0
    assert sim.session.pending() == []
    assert sim.violations == []
    out = [line.data for line in sim.transcript if line.direction == "out"]
    assert len(out) == 1
    assert out[0].endswith(b'},"waiting_for":[],"done":true,"error":""}\n')


def test_default_version_is_the_one_real_clients_pin(run: Starter) -> None:
    assert run().vm["version"] == "0.2.13"


def test_the_world_release_is_described(run: Starter, tmp_path: Path) -> None:
    text = '[world.release]\ncurrent_version = "1.2.3"\nchannel = "beta"\ngo_version = "go1.25.0"\n'
    sim = run(scenario=scenario_file(tmp_path, text))
    assert sim.events == [done_event("1.2.3", channel="beta", go_version="go1.25.0")]


def test_an_empty_channel_is_present_and_empty(run: Starter, tmp_path: Path) -> None:
    sim = run(scenario=scenario_file(tmp_path, '[world.release]\nchannel = ""\n'))
    assert sim.vm["channel"] == ""
    assert list(sim.vm) == VM_KEYS


def test_nothing_is_answered_after_the_event(run: Starter) -> None:
    sim = run()
    assert sim.send("quit") == []
    assert sim.send("download") == []
    assert sim.send_line(b"not json") == []
    assert sim.advance(3600.0) == []
    assert sim.close_stdin() == []
    assert len(sim.events) == 1
    assert [(v.after_done, v.state, v.waiting_for) for v in sim.violations] == [
        (True, "done", ()),
        (True, "done", ()),
        (True, "done", ()),
    ]
    assert all(
        v.error == "the session is already done (done:true was written)" for v in sim.violations
    )


@pytest.mark.parametrize("speed", [0.0, 1.0, 10.0])
def test_same_event_for_every_seed_and_speed(run: Starter, speed: float) -> None:
    runs = [run(seed=seed, speed=speed) for seed in (0, 0, 1, 99)]
    lines = [[line.data for line in sim.transcript] for sim in runs]
    assert lines[0] == lines[1] == lines[2] == lines[3]
    assert runs[0].events == [done_event("0.2.13")]
