"""Tests for simulator.scenario.failures: which attempts fail, with seeded probability."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest

from simulator.scenario.failures import Failure, FailurePlan

POINTS = ("check", "download", "init_flow", "authorization", "save", "page", "server")


def failure(**spec: Any) -> Failure:
    spec.setdefault("point", "page")
    return msgspec.convert(spec, Failure)


# -- selects ----------------------------------------------------------------------


def test_no_selector_selects_every_attempt_of_every_target() -> None:
    f = failure()
    assert all(f.selects(t, a) for t in range(0, 5) for a in range(1, 6))


def test_target_limits_to_one_target() -> None:
    f = failure(target=3)
    assert f.selects(3, 1)
    assert f.selects(3, 7)
    assert not f.selects(2, 1)
    assert not f.selects(4, 1)


def test_attempts_lists_exact_attempts() -> None:
    f = failure(attempts=[1, 3])
    assert [a for a in range(1, 7) if f.selects(0, a)] == [1, 3]


def test_first_selects_the_first_n() -> None:
    f = failure(first=2)
    assert [a for a in range(1, 7) if f.selects(0, a)] == [1, 2]


def test_attempts_take_precedence_over_first() -> None:
    f = failure(attempts=[4], first=2)
    assert [a for a in range(1, 7) if f.selects(0, a)] == [4]


def test_target_and_first_combine() -> None:
    f = failure(target=2, first=1)
    assert f.selects(2, 1)
    assert not f.selects(2, 2)
    assert not f.selects(1, 1)


# -- FailurePlan ------------------------------------------------------------------


def test_plan_answers_only_its_point() -> None:
    plan = FailurePlan([failure(point="check", error="nope")], random.Random(0))
    assert plan.check("download") is None
    hit = plan.check("check")
    assert hit is not None
    assert hit.error == "nope"


def test_empty_plan_never_fails() -> None:
    plan = FailurePlan([], random.Random(0))
    assert all(plan.check(p) is None for p in POINTS)


def test_probability_zero_never_fails() -> None:
    plan = FailurePlan([failure(probability=0.0)], random.Random(1))
    assert all(plan.check("page", target=1, attempt=a) is None for a in range(1, 501))


def test_probability_one_always_fails() -> None:
    plan = FailurePlan([failure(probability=1.0)], random.Random(1))
    assert all(plan.check("page", target=1, attempt=a) is not None for a in range(1, 501))


def outcomes(seed: int, probability: float, n: int = 2000) -> list[bool]:
    plan = FailurePlan([failure(probability=probability)], random.Random(seed))
    return [
        plan.check("page", target=1 + i % 40, attempt=1 + i // 40) is not None for i in range(n)
    ]


def test_an_attempts_outcome_does_not_depend_on_the_order_of_checks() -> None:
    keys = [(target, attempt) for target in range(1, 30) for attempt in range(1, 4)]
    forward = FailurePlan([failure(probability=0.5)], random.Random(5))
    backward = FailurePlan([failure(probability=0.5)], random.Random(5))
    ahead = {k: forward.check("page", target=k[0], attempt=k[1]) is not None for k in keys}
    behind = {
        k: backward.check("page", target=k[0], attempt=k[1]) is not None for k in reversed(keys)
    }
    assert ahead == behind
    assert 0 < sum(ahead.values()) < len(keys)


def test_probability_half_is_roughly_half() -> None:
    hits = sum(outcomes(11, 0.5))
    assert 900 < hits < 1100  # ~4.5 sigma either side of 1000


def test_probability_is_reproducible_from_the_seed() -> None:
    assert outcomes(3, 0.5) == outcomes(3, 0.5)
    assert outcomes(3, 0.5) != outcomes(4, 0.5)


def test_probability_applies_only_to_selected_attempts() -> None:
    plan = FailurePlan([failure(first=1, probability=0.999999)], random.Random(0))
    assert all(plan.check("page", attempt=a) is None for a in range(2, 200))


def test_first_matching_entry_wins() -> None:
    specific = failure(target=2, error="specific")
    general = failure(error="general")
    plan = FailurePlan([specific, general], random.Random(0))
    assert plan.check("page", target=2) is specific
    assert plan.check("page", target=5) is general
    reversed_plan = FailurePlan([general, specific], random.Random(0))
    assert reversed_plan.check("page", target=2) is general


def test_entry_that_does_not_select_falls_through() -> None:
    early = failure(attempts=[1], error="early")
    late = failure(attempts=[3], error="late")
    plan = FailurePlan([early, late], random.Random(0))
    assert plan.check("page", attempt=1) is early
    assert plan.check("page", attempt=2) is None
    assert plan.check("page", attempt=3) is late


def test_defaults() -> None:
    f = Failure(point="check")
    assert (f.error, f.target, f.attempts, f.first, f.probability) == ("", 0, [], 0, 1.0)
    assert f.at_percent == 0.0
    assert f.timeout is False


@pytest.mark.parametrize(
    "spec",
    [
        {"point": ""},
        {"point": 3},
        {},
        {"point": "page", "probability": 1.5},
        {"point": "page", "probability": -0.1},
        {"point": "page", "first": -1},
        {"point": "page", "target": -2},
        {"point": "page", "attempts": [0]},
        {"point": "page", "attempts": [2, -1]},
        {"point": "download", "at_percent": 101.0},
        {"point": "download", "at_percent": -1.0},
        {"point": "page", "unknown": 1},
        {"point": "page", "first": "two"},
    ],
)
def test_invalid_values_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(spec, Failure)


def test_any_named_point_is_accepted_and_an_empty_one_refused() -> None:
    # Which names are points is the charts' to say (simulator.launch checks them).
    for point in POINTS:
        assert msgspec.convert({"point": point}, Failure).point == point
    with pytest.raises(msgspec.ValidationError, match="point must name a failure point"):
        msgspec.convert({"point": ""}, Failure)


def test_an_injected_entry_does_not_move_the_draws_of_the_others() -> None:
    flaky = failure(probability=0.5)
    keys = [(target, attempt) for target in range(1, 40) for attempt in (1, 2)]
    before = FailurePlan([flaky], random.Random(9))
    after = FailurePlan([flaky], random.Random(9))
    after.add(failure(target=999))  # ahead of the scenario's entry, matching nothing here
    assert [before.check("page", target=t, attempt=a) for t, a in keys] == [
        after.check("page", target=t, attempt=a) for t, a in keys
    ]


# -- ids, listing and removal -----------------------------------------------------------


def test_entries_have_ids_in_order_the_scenarios_first() -> None:
    plan = FailurePlan([failure(point="catalog"), failure(target=2)], random.Random(0))
    assert plan.add(failure(point="page", first=2)) == "failure-3"
    entries = plan.entries()
    assert [(e["id"], e["kind"], e["source"]) for e in entries] == [
        ("failure-1", "catalog", "scenario"),
        ("failure-2", "page", "scenario"),
        ("failure-3", "page", "injected"),
    ]
    assert entries[1]["where"] == {"point": "page", "target": 2}
    assert entries[2]["where"] == {"point": "page", "first": 2}
    assert entries[2]["left"] == {"first": 2} and entries[2]["fired"] == 0


def test_fired_counts_the_attempts_an_entry_failed() -> None:
    plan = FailurePlan([failure(target=1, first=2)], random.Random(0))
    assert plan.check("page", target=1, attempt=1) is not None
    assert plan.check("page", target=2, attempt=1) is None
    (entry,) = plan.entries()
    assert entry["fired"] == 1 and entry["left"] == {"first": 1}
    assert plan.check("page", target=1, attempt=2) is not None
    assert plan.check("page", target=1, attempt=3) is None
    (entry,) = plan.entries()
    assert entry["fired"] == 2 and entry["left"] == {"first": 0}


def test_first_left_of_an_entry_of_every_target_is_one_number_only_for_one_target() -> None:
    plan = FailurePlan([failure(first=3)], random.Random(0))
    plan.check("page", target=0, attempt=1)
    assert plan.entries()[0]["left"] == {"first": 2}
    plan.check("page", target=5, attempt=1)  # now each target counts its own
    assert plan.entries()[0]["left"] == {}


def test_remove_one_and_clear_all() -> None:
    specific, general = failure(target=1, error="one"), failure(error="all")
    plan = FailurePlan([specific, general], random.Random(0))
    assert plan.remove("failure-1") is True
    assert plan.remove("failure-1") is False and plan.remove("fault-2") is False
    assert plan.check("page", target=1) == general
    assert [e["id"] for e in plan.entries()] == ["failure-2"]
    assert plan.add(failure(point="catalog")) == "failure-3"  # an id is never given twice
    plan.clear()
    assert plan.entries() == [] and plan.check("page", target=1) is None


def test_removing_an_entry_does_not_move_the_draws_of_the_others() -> None:
    flaky = failure(probability=0.5)
    kept = FailurePlan([failure(point="page", target=9), flaky], random.Random(4))
    alone = FailurePlan([failure(point="page", target=9), flaky], random.Random(4))
    kept.remove("failure-1")
    assert [kept.check("page", target=1, attempt=a) for a in range(1, 30)] == [
        alone.check("page", target=1, attempt=a) for a in range(1, 30)
    ]
