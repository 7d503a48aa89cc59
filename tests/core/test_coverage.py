"""What a session reached, as names: merging, and the JSON journals and reports hold."""

from __future__ import annotations

import pytest

from simulator.core.coverage import Reached, merge


def test_reached_merges_set_by_set() -> None:
    a = Reached("generate", frozenset({"starting"}), frozenset({"t1"}), gates=frozenset({"g"}))
    b = Reached("generate", frozenset({"done"}), frozenset({"t1", "t2"}), faults=frozenset({"x"}))
    both = a | b
    assert both.states == {"starting", "done"}
    assert both.transitions == {"t1", "t2"}
    assert both.gates == {"g"} and both.faults == {"x"} and both.failures == frozenset()


def test_reached_of_two_commands_do_not_merge() -> None:
    with pytest.raises(ValueError, match="cannot merge login into generate"):
        _ = Reached("generate") | Reached("login")


def test_merge_keeps_one_per_command() -> None:
    merged = merge(
        [
            Reached("generate", transitions=frozenset({"a"})),
            Reached("login", states=frozenset({"region"})),
            Reached("generate", transitions=frozenset({"b"})),
        ]
    )
    assert sorted(merged) == ["generate", "login"]
    assert merged["generate"].transitions == {"a", "b"}


def test_empty_is_false() -> None:
    assert not Reached("version")
    assert Reached("version", failures=frozenset({"check"}))


def test_json_round_trip_sorts_each_set() -> None:
    reached = Reached("update", frozenset({"b", "a"}), frozenset({"t"}), faults=frozenset({"exit"}))
    data = reached.as_json()
    assert data["states"] == ["a", "b"]
    assert Reached.from_json(data) == reached
    assert Reached.from_json({"command": "update", "extra": 1}) == Reached("update")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"states": []}, "command must be a name"),
        ({"command": "x", "states": "abc"}, "states must be a list of names"),
        ({"command": "x", "gates": [1]}, "gates must be a list of names"),
    ],
)
def test_from_json_refuses_what_is_not_names(data: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        Reached.from_json(data)
