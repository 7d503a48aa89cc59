"""simulator.core.timers: a session's clock, its speed and its pending timers."""

from __future__ import annotations

import math
import sys

import pytest

from simulator.core.timers import Timer, Timers


def fire_all(timers: Timers) -> list[str]:
    """Take every pending timer in order; their triggers."""
    fired = []
    while (timer := timers.take()) is not None:
        fired.append(timer.trigger)
    return fired


def test_timers_come_in_deadline_order_ties_in_arming_order() -> None:
    timers = Timers(now=10.0)
    for trigger, seconds in (("_c", 3.0), ("_a", 1.0), ("_b", 1.0), ("_d", 0.0)):
        timers.arm(trigger, seconds, {})
    assert [t.deadline for t in timers.pending()] == [10.0, 11.0, 11.0, 13.0]
    assert fire_all(timers) == ["_d", "_a", "_b", "_c"]
    assert timers.armed == 4 and timers.next() is None and timers.take() is None


def test_a_delay_is_multiplied_by_the_speed_and_counts_from_now() -> None:
    timers = Timers(now=2.0, speed=0.5)
    seq = timers.arm("_x", 4.0, {"n": 1}, state="running", repeat_after="tick")
    (timer,) = timers.pending()
    assert timer == Timer(4.0, seq, "_x", {"n": 1}, "running", "tick")
    timers.now = 3.0
    timers.arm("_y", 4.0, {})
    assert [t.deadline for t in timers.pending()] == [4.0, 5.0]


def test_a_cancelled_timer_leaves_an_entry_that_pop_skips() -> None:
    timers = Timers()
    first = timers.arm("_first", 1.0, {})
    timers.arm("_second", 2.0, {})
    timers.cancel(first)
    timers.cancel(12345)  # unknown: nothing happens
    assert timers.due(1.0)  # the cancelled entry is still first in the heap...
    assert timers.pop() is None  # ...and comes off as nothing
    assert not timers.due(1.5) and timers.due(2.0)
    popped = timers.pop()
    assert popped is not None and popped.trigger == "_second"
    assert timers.pending() == [] and not timers.due(1e9)


def test_next_drops_cancelled_entries_and_leaves_the_timer_pending() -> None:
    timers = Timers()
    timers.cancel(timers.arm("_gone", 1.0, {}))
    timers.arm("_kept", 2.0, {})
    upcoming = timers.next()
    assert upcoming is not None and upcoming.trigger == "_kept"
    assert [t.trigger for t in timers.pending()] == ["_kept"]


def test_keep_state_forgets_the_timers_of_other_states_only() -> None:
    timers = Timers()
    timers.arm("_free", 1.0, {})
    timers.arm("_here", 1.0, {}, state="here")
    timers.arm("_there", 1.0, {}, state="there")
    timers.keep_state("here")
    assert fire_all(timers) == ["_free", "_here"]


def test_clear_forgets_everything() -> None:
    timers = Timers()
    timers.arm("_a", 1.0, {})
    timers.clear()
    assert timers.next() is None and timers.pending() == [] and not timers.due(10.0)
    assert timers.armed == 1  # the count of timers ever armed goes on


@pytest.mark.parametrize(
    ("speed", "expected"), [(2.0, [14.0, 18.0]), (0.5, [11.0, 12.0]), (0.0, [10.0, 10.0])]
)
def test_rescale_keeps_the_share_of_each_wait_done(speed: float, expected: list[float]) -> None:
    timers = Timers(now=0.0, speed=1.0)
    timers.arm("_a", 12.0, {})
    timers.arm("_b", 14.0, {})
    timers.now = 10.0  # 2 and 4 seconds left
    timers.rescale(speed)
    assert timers.speed == speed
    assert [t.deadline for t in timers.pending()] == expected
    assert fire_all(timers) == ["_a", "_b"]


def test_rescale_from_speed_zero_makes_every_timer_due_now() -> None:
    timers = Timers(now=5.0, speed=0.0)
    timers.arm("_a", 30.0, {})
    timers.rescale(1.0)
    assert [t.deadline for t in timers.pending()] == [5.0]
    assert timers.arm("_b", 2.0, {}) == 2 and timers.pending()[-1].deadline == 7.0


def test_as_json_is_what_a_snapshot_shows() -> None:
    timers = Timers(now=1.0)
    timers.arm("_later", 2.5, {"secret": "kept out"})
    timers.arm("_past", 0.0, {})
    timers.now = 2.0
    assert timers.as_json() == [
        {"trigger": "_past", "deadline": 1.0, "in": 0.0},
        {"trigger": "_later", "deadline": 3.5, "in": 1.5},
    ]


def test_a_deadline_past_the_range_of_a_float_is_held_at_the_latest() -> None:
    # A delay times a speed far past any use would be infinity: no JSON shows it.
    timers = Timers(now=1.0, speed=1e300)
    timers.arm("_far", 1e9, {})
    timers.rescale(1e305)
    (timer,) = timers.pending()
    assert timer.deadline == sys.float_info.max
    assert all(math.isfinite(entry["deadline"]) for entry in timers.as_json())
