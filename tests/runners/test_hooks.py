"""simulator.runners.hooks: what a live session calls out to. Each transport action is
a method, of the live session or of its endpoint; one observer hears everything."""

from __future__ import annotations

from typing import get_args

import msgspec
import pytest

from simulator.errors import SimulatorBug
from simulator.runners.hooks import Endpoint, Observers, carrier, carriers, observers
from simulator.runners.live import LiveSession
from simulator.scenario import faults
from tests.runners.helpers import Told, live, run_out


def test_carriers_cover_every_action_of_the_output_stage() -> None:
    assert set(carriers(LiveSession)) == set(get_args(faults.Action))


def test_every_action_is_carried_out_by_a_method() -> None:
    names = {
        action_type.__name__: getattr(carrier(action_type, LiveSession), "__name__", "")
        for action_type in get_args(faults.Action)
    }
    assert names == {
        "Write": "_act_write",
        "Pause": "_act_pause",
        "Stderr": "on_endpoint",
        "Exit": "_act_exit",
        "Hang": "_act_hang",
        "CloseStdout": "on_endpoint",
        "StopReading": "_act_stop_reading",
    }


class Beep(msgspec.Struct, frozen=True):
    """A transport action the simulator does not have."""

    tone: int


def test_a_transport_action_is_its_type_and_an_endpoint_method(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SimulatorBug, match="no method carries out Beep: Endpoint has no beep"):
        carrier(Beep, LiveSession)
    monkeypatch.setattr(Endpoint, "beep", lambda self, tone: None, raising=False)
    runner, keeper, _ = live("version")
    heard: list[int] = []
    keeper.beep = heard.append  # type: ignore[attr-defined]
    carrier(Beep, LiveSession)(runner, *msgspec.structs.astuple(Beep(440)))
    assert heard == [440]


def test_one_observer_hears_everything_in_order() -> None:
    first, second = Told(), Told()
    assert observers() is None and observers(None, None) is None
    assert observers(first) is first and observers(None, first) is first
    assert isinstance(observers(first, second), Observers)
    runner, keeper, clock = live("generate", "-y", speed=0.0, observer=observers(first, second))
    runner.start()
    run_out(runner, clock)
    for told in (first, second):
        assert told.produced_events == keeper.writes  # plain: each event one write
        assert len(told.fired_due) == len(keeper.writes) - 1  # every event but the first
        assert told.settled_count > 1 and told.ends == [(0, "done")]
