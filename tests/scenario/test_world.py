"""Tests for simulator.scenario.world: the typed [world] table, its defaults and its bounds."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from simulator.formats.ids import LEVELS
from simulator.scenario.world import (
    MAX_PAGES,
    Account,
    Login,
    PageSpec,
    Project,
    Release,
    Settings,
    World,
)


def world(spec: dict[str, Any]) -> World:
    return msgspec.convert(spec, World)


def test_defaults_are_valid_and_equal_an_empty_table() -> None:
    assert world({}) == World()
    w = World()
    assert 1 <= w.config.max_concurrent <= 64
    assert 0 <= w.config.max_retries <= 10
    assert w.login.models
    assert w.login.auth_timeout > 0
    assert w.release.download_steps >= 3
    assert w.release.download_bytes >= 1


def test_defaults_survive_a_round_trip() -> None:
    w = World()
    assert msgspec.convert(msgspec.to_builtins(w), World) == w


def test_default_factories_are_not_shared() -> None:
    a, b = World(), World()
    a.login.models.append("extra")
    assert "extra" not in b.login.models
    assert a.config is not b.config


def test_partial_table_keeps_other_defaults() -> None:
    w = world({"config": {"language": "fr"}, "release": {"package_manager": "brew"}})
    assert w.config.language == "fr"
    assert w.config.doc_language == Settings().doc_language
    assert w.release.package_manager == "brew"
    assert w.release.current_version == Release().current_version
    assert w.account == Account()


@pytest.mark.parametrize("value", [1, 2, 32, 64])
def test_max_concurrent_in_range(value: int) -> None:
    assert msgspec.convert({"max_concurrent": value}, Settings).max_concurrent == value


@pytest.mark.parametrize("value", [0, -1, 65, 1000])
def test_max_concurrent_out_of_range(value: int) -> None:
    with pytest.raises(msgspec.ValidationError, match="max_concurrent"):
        msgspec.convert({"max_concurrent": value}, Settings)


@pytest.mark.parametrize("value", [0, 5, 10])
def test_max_retries_in_range(value: int) -> None:
    assert msgspec.convert({"max_retries": value}, Settings).max_retries == value


@pytest.mark.parametrize("value", [-1, 11, 99])
def test_max_retries_out_of_range(value: int) -> None:
    with pytest.raises(msgspec.ValidationError, match="max_retries"):
        msgspec.convert({"max_retries": value}, Settings)


@pytest.mark.parametrize("value", ["4", 4.5, True, None])
def test_max_concurrent_must_be_an_integer(value: Any) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"max_concurrent": value}, Settings)


def test_bounds_are_enforced_inside_a_world() -> None:
    with pytest.raises(msgspec.ValidationError, match="max_retries"):
        world({"config": {"max_retries": 11}})


@pytest.mark.parametrize(
    "spec",
    [
        {"nope": 1},
        {"account": {"nope": 1}},
        {"config": {"nope": "x"}},
        {"release": {"nope": "x"}},
        {"login": {"nope": "x"}},
    ],
)
def test_unknown_keys_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError, match="nope"):
        world(spec)


@pytest.mark.parametrize(
    "spec",
    [
        {"release": {"download_bytes": 0}},
        {"release": {"download_steps": 2}},
        {"login": {"models": []}},
        {"login": {"auth_timeout": 0}},
        {"login": {"auth_timeout": -3.0}},
        {"account": {"logged_in": "yes"}},
        {"config": {"language": 3}},
    ],
)
def test_impossible_values_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        world(spec)


def test_login_defaults() -> None:
    login = Login()
    assert login.authorize_url.startswith("https://")
    assert login.regions == []


# -- [world.project] pages ------------------------------------------------------------------


def test_pages_is_a_count_by_default() -> None:
    project = World().project
    assert project.pages == 16 and project.page_count == 16


@pytest.mark.parametrize("pages", [0, -1, MAX_PAGES + 1])
def test_a_page_count_out_of_range_is_refused(pages: int) -> None:
    with pytest.raises(msgspec.ValidationError, match="pages must be an integer 1-5000"):
        world({"project": {"pages": pages}})


def test_pages_may_be_listed_as_tables() -> None:
    w = world(
        {
            "project": {
                "pages": [
                    {"title": "项目概览", "section": "入门指南"},
                    {"title": "Protobuf协议集成", "group": "网络通信", "level": "Intermediate"},
                ]
            }
        }
    )
    assert w.project.page_count == 2
    first, second = w.project.pages  # type: ignore[misc]
    assert first == PageSpec(title="项目概览", section="入门指南")
    assert (first.group, first.level) == ("", "")
    assert (second.group, second.level) == ("网络通信", "Intermediate")
    assert msgspec.convert(msgspec.to_builtins(w), World) == w


def test_a_page_spec_is_hashable_and_frozen() -> None:
    spec = PageSpec(title="A", level="Advanced")
    assert hash(spec) == hash(PageSpec(title="A", level="Advanced"))
    with pytest.raises(AttributeError):
        spec.title = "B"  # type: ignore[misc]


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_is_accepted(level: str) -> None:
    assert msgspec.convert({"title": "T", "level": level}, PageSpec).level == level


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            {"pages": [{"title": "T", "level": "Expert"}]},
            "level must be one of Beginner, Intermediate, Advanced, not 'Expert'",
        ),
        ({"pages": [{"title": "T", "level": "beginner"}]}, "level must be one of"),
        ({"pages": [{"title": "  "}]}, "title must not be empty"),
        ({"pages": [{"section": "S"}]}, "missing required field `title`"),
        ({"pages": [{"title": "T", "nope": 1}]}, "nope"),
        ({"pages": [{"title": 3}]}, "Expected `str`"),
        ({"pages": []}, "pages must list 1-5000"),
        ({"pages": "many"}, "Expected `int | array`"),
    ],
)
def test_bad_page_tables_are_refused(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=re.escape(problem)):
        world({"project": spec})


def test_too_many_page_tables_are_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="pages must list"):
        world({"project": {"pages": [{"title": "T"}] * (MAX_PAGES + 1)}})
    with pytest.raises(ValueError, match="pages must list"):
        Project(pages=[PageSpec(title="T")] * (MAX_PAGES + 1))
