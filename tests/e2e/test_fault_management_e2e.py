"""Faults managed at run time, end to end: ``faults``, ``remove``, ``reset`` and
``set_timing`` (and ``inject``'s ids) on real ``python -m simulator ... --control``
processes, over stdio and over a Unix socket.

Each test runs once per transport: over ``--control stdio`` the frames share the
process's pipes (:class:`~tests.e2e.test_control_e2e.Sim` sorts them out); over
``--control unix:PATH`` they go through :class:`simulator.tools.remote.Remote`. Timing is
seen by the client loosely: through ``pause`` and the snapshot's pending timers, never
through the wall clock.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.tools.remote import Remote, RemoteError
from tests.e2e.test_control_e2e import GENERATE, Sim

SCENARIO = """
extends = "default"

[[failures]]
point = "page"
target = 3
first = 99
error = "page 3: from the scenario"

[[faults]]
kind = "stderr"
on_state = "done"
text = "scenario: done"
"""


class Peer:
    """The admin API of one process, over the transport a test is run with."""

    def __init__(self, sim: Sim, remote: Remote | None) -> None:
        self.sim = sim
        self.remote = remote

    def ok(self, subtype: str, **params: Any) -> dict[str, Any]:
        """A request that must succeed; its answer (over a socket, through the verb
        :class:`Remote` has for it)."""
        remote = self.remote
        if remote is None:
            return self.sim.ok(subtype, **params)
        if subtype == "faults":
            return {"faults": remote.faults()}
        if subtype == "remove" and set(params) == {"id"}:
            return remote.remove(params["id"])
        if subtype == "reset":
            return remote.reset()
        if subtype == "set_timing" and set(params) == {"name", "timing"}:
            return remote.set_timing(params["name"], params["timing"])
        if subtype == "inject":
            return remote.inject(**params)
        return remote.request(subtype, **params)

    def error(self, subtype: str, **params: Any) -> str:
        """The error text of a request that must fail."""
        if self.remote is None:
            answer = self.sim.call(subtype, **params)
            assert answer["subtype"] == "error", answer
            return str(answer["error"])
        with pytest.raises(RemoteError) as caught:
            self.ok(subtype, **params)
        return str(caught.value)

    def faults(self) -> list[dict[str, Any]]:
        return list(self.ok("faults")["faults"])


Start = Callable[..., Peer]


@pytest.fixture(params=["stdio", "unix"])
def start(request: pytest.FixtureRequest) -> Iterator[Start]:
    """Starts a process (``command``, zread's flags, ``speed``, ``scenario``) with the
    transport of this run; its :class:`Peer`, at the process's first event."""
    folder = tempfile.mkdtemp(prefix="zfm-")  # short: socket paths max ~100 bytes
    started: list[Peer] = []

    def begin(command: str, *args: str, speed: float = 0, scenario: str = "default") -> Peer:
        if request.param == "stdio":
            sim = Sim.start(command, *args, speed=speed, scenario=scenario)
            peer = Peer(sim, None)
        else:
            path = str(Path(folder) / f"c{len(started)}.sock")
            sim = Sim.start(command, *args, speed=speed, scenario=scenario, control=f"unix:{path}")
            peer = Peer(sim, Remote(path).connect())
        started.append(peer)
        sim.next_event()
        return peer

    yield begin
    for peer in started:
        if peer.remote is not None:
            peer.remote.close()
        peer.sim.kill()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def scenario_file(tmp_path: Path) -> str:
    path = tmp_path / "managed.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    return str(path)


def until_gate(sim: Sim) -> dict[str, Any]:
    """Events until generate's retry gate or its end; that event."""
    return sim.until(lambda e: "retry" in e["waiting_for"])


# -- ids and the list ------------------------------------------------------------------


def test_every_failure_and_fault_has_an_id_the_scenarios_first(
    start: Start, scenario_file: str
) -> None:
    peer = start("generate", scenario=scenario_file)
    failure = {"point": "page", "target": 5, "attempts": [1], "error": "page 5: injected"}
    assert peer.ok("inject", failure=failure) == {"injected": "failure", "id": "failure-2"}
    fault = {"kind": "diagnostic", "text": "injected: after 4", "after_event": 4, "times": 1}
    assert peer.ok("inject", fault=fault) == {"injected": "fault", "id": "fault-2"}
    listed = peer.faults()
    assert [(e["id"], e["kind"], e["source"]) for e in listed] == [
        ("failure-1", "page", "scenario"),
        ("failure-2", "page", "injected"),
        ("fault-1", "stderr", "scenario"),
        ("fault-2", "diagnostic", "injected"),
    ]
    assert listed[0]["where"] == {"point": "page", "target": 3, "first": 99}
    assert listed[1]["where"] == {"point": "page", "target": 5, "attempts": [1]}
    assert listed[2]["where"] == {"on_state": "done"}
    assert listed[3]["where"] == {"after_event": 4}
    assert listed[3]["left"] == {"after_event": 3, "times": 1}  # one event is written
    assert all(entry["fired"] == 0 for entry in listed)

    peer.sim.send(GENERATE)
    gate = until_gate(peer.sim)
    assert "retry" in gate["waiting_for"]
    fired = {e["id"]: e for e in peer.faults()}
    assert fired["failure-1"]["fired"] == 3  # the first try and two retries
    assert fired["failure-2"]["fired"] == 1
    assert fired["fault-2"]["fired"] == 1 and fired["fault-2"]["left"] == {
        "after_event": 0,
        "times": 0,
    }
    assert fired["fault-1"]["fired"] == 0


# -- remove and reset ------------------------------------------------------------------


def test_remove_one_of_the_scenarios_and_one_injected(start: Start, scenario_file: str) -> None:
    peer = start("generate", scenario=scenario_file)
    peer.ok("inject", failure={"point": "page", "target": 6, "first": 99, "error": "page 6"})
    assert peer.ok("remove", id="failure-1") == {"removed": "failure-1"}
    assert peer.ok("remove", id="fault-1") == {"removed": "fault-1"}
    assert [e["id"] for e in peer.faults()] == ["failure-2"]
    peer.sim.send(GENERATE)
    gate = until_gate(peer.sim)
    failed = [t["id"] for t in gate["vm"]["pages"]["tasks"] if t["state"] == "failed"]
    assert failed == [6]  # page 3 no longer fails
    assert peer.ok("remove", id="failure-2") == {"removed": "failure-2"}
    peer.sim.send({"type": "retry", "params": {"task_id": 6}})
    done = peer.sim.until_done()
    assert done["vm"]["done_total"] == 16
    assert peer.sim.wait() == 0
    assert "scenario: done" not in peer.sim.stderr  # its fault was removed


def test_reset_makes_a_failing_run_pass(start: Start) -> None:
    peer = start("generate", scenario="failing-pages")
    assert [e["id"] for e in peer.faults()] == ["failure-1", "failure-2"]
    peer.ok("inject", fault={"kind": "exit", "code": 4, "on_state": "done"})
    assert peer.ok("reset") == {"removed": ["failure-1", "failure-2", "fault-1"]}
    assert peer.faults() == []
    peer.sim.send(GENERATE)
    done = peer.sim.until_done()
    assert done["vm"]["state"] == "done" and done["vm"]["done_total"] == 16
    tasks = done["vm"]["pages"]["tasks"]
    assert {t["state"] for t in tasks} == {"done"} and {t["retry_count"] for t in tasks} == {0}
    assert peer.sim.wait() == 0  # the injected exit went with the rest
    assert not any(e["waiting_for"] == ["quit", "retry", "skip_all"] for e in peer.sim.events)


def test_without_reset_the_same_run_fails(start: Start) -> None:
    peer = start("generate", scenario="failing-pages")
    peer.sim.send(GENERATE)
    gate = until_gate(peer.sim)
    failed = sorted(t["id"] for t in gate["vm"]["pages"]["tasks"] if t["state"] == "failed")
    assert failed == [3, 7]


# -- set_timing ------------------------------------------------------------------------


def page_timers(peer: Peer) -> tuple[float, list[dict[str, Any]]]:
    """The session clock and the pending page timers, from a snapshot."""
    snap = peer.ok("snapshot")
    return snap["clock"], [t for t in snap["timers"] if t["trigger"] == "_page_done"]


def test_set_timing_fixed_large_holds_the_pages(start: Start) -> None:
    peer = start("generate", speed=1.0)
    quick = peer.ok("set_timing", name="catalog_step", timing={"fixed": 0.001})
    assert quick == {"name": "catalog_step", "timing": {"fixed": 0.001}}
    assert peer.ok("set_timing", name="page", timing={"fixed": 600}) == {
        "name": "page",
        "timing": {"fixed": 600.0},
    }
    peer.sim.send(GENERATE)
    running = peer.sim.until(lambda e: e["vm"].get("pages", {}).get("tasks"))
    assert not running["done"]
    assert peer.ok("pause")["paused"] is True
    clock, timers = page_timers(peer)
    assert timers, "pages are running"
    assert all(timer["deadline"] - clock >= 590 for timer in timers), timers
    # A new delay changes the timers armed after it; the pending ones keep their deadline.
    peer.ok("set_timing", name="page", timing={"fixed": 0})
    assert page_timers(peer)[1] == timers
    assert peer.ok("set_speed", speed=0) == {"speed": 0.0}
    peer.ok("resume")
    done = peer.sim.until_done()
    assert done["vm"]["done_total"] == 16
    assert peer.sim.wait() == 0


# -- errors ----------------------------------------------------------------------------


def test_errors_name_what_is_wrong_and_change_nothing(start: Start, scenario_file: str) -> None:
    peer = start("generate", scenario=scenario_file)
    before = peer.faults()
    assert peer.error("remove", id="fault-7") == "remove: no failure or fault has the id 'fault-7'"
    assert peer.error("remove") == 'remove takes {"id": "..."}, an id the faults request lists'
    assert peer.error("set_timing", name="pages", timing={"fixed": 1}) == (
        "set_timing: 'pages' is not a timing of generate (catalog_step, page, page_retry)"
    )
    assert peer.error("set_timing", name="page", timing={"fixed": -1}) == (
        "set_timing: timing of 'page': fixed must be >= 0"
    )
    assert peer.error("set_timing", name="page", timing={"fixed": 1, "uniform": [0, 1]}) == (
        "set_timing: timing of 'page': a delay takes exactly one of fixed, uniform, lognormal"
    )
    assert peer.faults() == before
    assert peer.ok("remove", id="fault-1") == {"removed": "fault-1"}
    assert peer.error("remove", id="fault-1").startswith("remove: no failure or fault")
