"""Tests for simulator.scenario.httpfaults: the HTTP fault entries, and the plan that
decides which request meets which fault."""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pytest

from simulator.scenario.httpfaults import KINDS, HttpFault, HttpFaultPlan, has_body


def fault(**fields: Any) -> HttpFault:
    return msgspec.convert(fields, HttpFault)


def pattern(plan: HttpFaultPlan, count: int, path: str = "/api/wiki") -> list[str | None]:
    """Which fault each of ``count`` GETs of ``path`` meets (its id, or None)."""
    found = []
    for _ in range(count):
        firing = plan.match("GET", path)
        found.append(None if firing is None else firing.id)
    return found


# -- the entries -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"status": 503}, "status"),
        ({"status": 500, "body": "down"}, "status"),
        ({"delay": {"fixed": 2.0}}, "delay"),
        ({"delay": {"uniform": [0.1, 0.2]}}, "delay"),
        ({"dribble": {"chunks": 4, "over": 1.0}}, "dribble"),
        ({"reset": True}, "reset"),
        ({"close_after_headers": True}, "close_after_headers"),
    ],
)
def test_each_effect_is_its_kind(fields: dict[str, Any], kind: str) -> None:
    made = fault(**fields)
    assert made.kind == kind
    assert made.where == "* *"
    assert kind in KINDS


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, "exactly one of status, delay, dribble, reset, close_after_headers"),
        ({"status": 500, "reset": True}, "exactly one of"),
        ({"reset": False}, "exactly one of"),
        ({"status": 99}, "status must be an integer 100-599"),
        ({"status": 600}, "status must be an integer 100-599"),
        ({"body": "x", "reset": True}, "body goes with status"),
        ({"status": 204, "body": "x"}, "a 204 answer has no body"),
        ({"status": 101, "body": "x"}, "a 101 answer has no body"),
        ({"reset": True, "method": "POST"}, "method must be GET or HEAD"),
        ({"reset": True, "method": "get"}, "method must be GET or HEAD"),
        ({"reset": True, "path": "api/wiki"}, "path must be a glob of request paths"),
        ({"reset": True, "probability": 1.5}, "probability must be between 0 and 1"),
        ({"reset": True, "first": -1}, "first and after must be >= 0"),
        ({"reset": True, "after": -2}, "first and after must be >= 0"),
        ({"dribble": {"chunks": 0, "over": 1.0}}, "chunks must be an integer 1-10000"),
        ({"dribble": {"chunks": 2, "over": -1.0}}, "over must be a finite number"),
        ({"dribble": {"chunks": 2, "over": float("inf")}}, "over must be a finite number"),
        ({"delay": {"fixed": -1.0}}, "fixed must be >= 0"),
    ],
)
def test_a_bad_entry_is_refused_in_words(fields: dict[str, Any], reason: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=reason):
        fault(**fields)


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `toxicity`"):
        fault(reset=True, toxicity=0.5)


def test_which_statuses_carry_a_body() -> None:
    assert [has_body(s) for s in (100, 199, 200, 204, 304, 404, 503, 599)] == [
        False,
        False,
        True,
        False,
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize(
    ("fields", "method", "path", "covered"),
    [
        ({}, "GET", "/", True),
        ({}, "HEAD", "/api/pages/1-overview", True),
        ({"path": "/api/wiki"}, "GET", "/api/wiki", True),
        ({"path": "/api/wiki"}, "GET", "/api/wiki/", False),
        ({"path": "/api/pages/*"}, "GET", "/api/pages/2-data-model", True),
        ({"path": "/api/pages/*"}, "GET", "/api/wiki", False),
        ({"path": "/*"}, "GET", "/api/pages/x", True),  # * crosses a /
        ({"path": "/[12]-*"}, "GET", "/2-data-model", True),
        ({"path": "/API/*"}, "GET", "/api/wiki", False),  # case counts
        ({"method": "HEAD"}, "GET", "/", False),
        ({"method": "HEAD"}, "HEAD", "/", True),
        ({"method": "GET", "path": "/"}, "GET", "/", True),
    ],
)
def test_which_requests_a_fault_covers(
    fields: dict[str, Any], method: str, path: str, covered: bool
) -> None:
    assert fault(reset=True, **fields).covers(method, path) is covered


# -- the plan --------------------------------------------------------------------------


def test_ids_count_up_and_are_never_given_twice() -> None:
    plan = HttpFaultPlan([fault(reset=True), fault(status=500)])
    assert [e["id"] for e in plan.entries()] == ["http-1", "http-2"]
    assert plan.add(fault(status=503)) == "http-3"
    assert plan.remove("http-3")
    assert not plan.remove("http-3")
    assert plan.add(fault(status=503)) == "http-4"
    plan.clear()
    assert not plan
    assert len(plan) == 0
    assert plan.entries() == []
    assert plan.add(fault(status=503)) == "http-5"


def test_add_takes_only_an_http_fault() -> None:
    with pytest.raises(TypeError, match="an HttpFault, not dict"):
        HttpFaultPlan().add({"reset": True})  # type: ignore[arg-type]


def test_an_empty_plan_matches_nothing() -> None:
    plan = HttpFaultPlan()
    assert not plan
    assert plan.match("GET", "/") is None


def test_every_matching_request_meets_a_fault_with_no_condition() -> None:
    plan = HttpFaultPlan([fault(status=503, path="/api/*")])
    assert pattern(plan, 3) == ["http-1"] * 3
    assert plan.match("GET", "/") is None
    firing = plan.match("HEAD", "/api/pages/x")
    assert firing is not None
    assert (firing.id, firing.kind, firing.fault.status, firing.seconds) == (
        "http-1",
        "status",
        503,
        0.0,
    )


def test_first_takes_the_first_n_then_lets_the_rest_pass() -> None:
    plan = HttpFaultPlan([fault(status=503, first=2)])
    assert pattern(plan, 4) == ["http-1", "http-1", None, None]


def test_after_lets_n_pass_then_takes_every_one() -> None:
    plan = HttpFaultPlan([fault(reset=True, after=2)])
    assert pattern(plan, 4) == [None, None, "http-1", "http-1"]


def test_after_and_first_together_skip_n_then_take_m() -> None:
    plan = HttpFaultPlan([fault(reset=True, after=1, first=2)])
    assert pattern(plan, 5) == [None, "http-1", "http-1", None, None]


def test_only_matching_requests_count() -> None:
    plan = HttpFaultPlan([fault(status=500, path="/api/wiki", first=1)])
    assert plan.match("GET", "/") is None
    assert plan.match("GET", "/1-overview") is None
    assert pattern(plan, 2) == ["http-1", None]


def test_the_first_fault_that_takes_a_request_wins_and_every_match_counts() -> None:
    plan = HttpFaultPlan([fault(status=503, first=1), fault(reset=True, after=1)])
    # request 1: http-1 takes it; http-2 counts it too (its one to let pass)
    assert pattern(plan, 3) == ["http-1", "http-2", "http-2"]
    entries = {e["id"]: e for e in plan.entries()}
    assert (entries["http-1"]["fired"], entries["http-1"]["left"]) == (1, {"first": 0})
    assert (entries["http-2"]["fired"], entries["http-2"]["left"]) == (2, {"after": 0})


def test_entries_say_where_what_is_left_and_whose_they_are() -> None:
    plan = HttpFaultPlan([fault(method="GET", path="/api/*", status=503, after=1, first=2)])
    plan.add(fault(reset=True, probability=0.25))
    assert plan.entries() == [
        {
            "id": "http-1",
            "kind": "status",
            "source": "scenario",
            "where": {"method": "GET", "path": "/api/*", "after": 1, "first": 2},
            "left": {"after": 1, "first": 2},
            "fired": 0,
        },
        {
            "id": "http-2",
            "kind": "reset",
            "source": "injected",
            "where": {"method": "*", "path": "*", "probability": 0.25},
            "left": {},
            "fired": 0,
        },
    ]
    plan.remove("http-2")
    plan.match("GET", "/api/wiki")  # passes
    plan.match("GET", "/api/wiki")  # http-1
    (first,) = plan.entries()
    assert (first["left"], first["fired"]) == ({"after": 0, "first": 1}, 1)
    plan.match("GET", "/api/wiki")
    plan.match("GET", "/api/wiki")
    assert plan.entries()[0]["left"] == {"after": 0, "first": 0}
    assert plan.entries()[0]["fired"] == 2


def test_a_probability_is_reproduced_by_its_seed() -> None:
    def run(seed: int) -> list[str | None]:
        return pattern(HttpFaultPlan([fault(status=500, probability=0.5)], seed=seed), 40)

    first = run(7)
    assert first == run(7)
    assert first != run(8)
    assert 5 < first.count("http-1") < 35  # about half of them, not all or none
    assert {None, "http-1"} == set(first)


def test_a_fault_added_later_does_not_move_the_draws_of_another() -> None:
    alone = HttpFaultPlan([fault(path="/api/*", status=500, probability=0.5)], seed=3)
    mixed = HttpFaultPlan([fault(path="/api/*", status=500, probability=0.5)], seed=3)
    mixed.add(fault(reset=True, path="/other", probability=0.5))
    for _ in range(5):  # requests the second one takes, or not, in between
        mixed.match("GET", "/other")
    assert pattern(alone, 30) == pattern(mixed, 30)


def test_a_delay_is_drawn_from_the_seed() -> None:
    def delays(seed: int) -> list[float]:
        plan = HttpFaultPlan([fault(delay={"uniform": [1.0, 2.0]})], seed=seed)
        drawn = []
        for _ in range(5):
            firing = plan.match("GET", "/")
            assert firing is not None and firing.kind == "delay"
            drawn.append(firing.seconds)
        return drawn

    first = delays(1)
    assert all(1.0 <= s <= 2.0 for s in first)
    assert len(set(first)) == 5
    assert first == delays(1)
    assert first != delays(2)
    fixed = HttpFaultPlan([fault(delay={"fixed": 2.5})]).match("GET", "/")
    assert fixed is not None and fixed.seconds == 2.5


def test_threads_adding_and_matching_at_once_lose_nothing() -> None:
    plan = HttpFaultPlan()
    ids: list[str] = []
    start = threading.Barrier(8)

    def adder() -> None:
        start.wait()
        for _ in range(50):
            ids.append(plan.add(fault(status=500, path="/nothing")))

    met: list[str] = []

    def matcher() -> None:
        start.wait()
        for _ in range(200):
            firing = plan.match("GET", "/nothing")
            if firing is not None:
                met.append(firing.id)

    threads = [threading.Thread(target=f) for f in [adder] * 4 + [matcher] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 200
    entries = plan.entries()
    assert len(entries) == 200
    assert sum(e["fired"] for e in entries) == len(met)  # each request taken once at most
