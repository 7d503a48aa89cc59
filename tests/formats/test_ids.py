"""Tests of simulator/formats/ids.py: plain names, zread's version ids, page slugs and
times as Go writes them."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulator.formats.ids import (
    _title_slug,  # the cached function, to call uncached
    go_time,
    is_plain_name,
    next_version_id,
    slug,
    version_id,
    version_time,
)

# -- is_plain_name ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "2026-04-06-130213",
        "1-xiang-mu-gai-lan",
        "3-default_config",
        "1-",
        "a",
        "...",
        ".hidden",
        "wiki.json",
        "项目概览",
        "x" * 200,
    ],
)
def test_plain_names(name: str) -> None:
    assert is_plain_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "a/b",
        "/abs",
        "a\\b",
        "a b",
        " x",
        "x\n",
        "x\t",
        "a\x00b",
        "a\x1bb",
        "a\u00a0b",
        "a\u2028b",
        "a\u3000b",
        "x" * 201,
    ],
)
def test_names_that_are_not_plain(name: str) -> None:
    assert not is_plain_name(name)


# -- version ids --------------------------------------------------------------------------


def test_version_id_is_the_local_wall_clock_to_the_second() -> None:
    assert version_id(dt.datetime(2026, 4, 6, 13, 2, 13, 999_999)) == "2026-04-06-130213"
    aware = dt.datetime(2026, 4, 6, 13, 2, 13, tzinfo=dt.timezone(dt.timedelta(hours=-6)))
    assert version_id(aware) == "2026-04-06-130213"


def test_next_version_id_is_the_first_free_second() -> None:
    at = dt.datetime(2026, 12, 31, 23, 59, 58, 500_000)
    assert next_version_id(at, set()) == "2026-12-31-235958"
    taken = {"2026-12-31-235958", "2026-12-31-235959", "other"}
    assert next_version_id(at, taken) == "2027-01-01-000000"
    assert next_version_id(at, ["2026-12-31-235959"]) == "2026-12-31-235958"


def test_next_version_id_skips_free_ids_when_asked() -> None:
    at = dt.datetime(2026, 4, 6, 13, 2, 13)
    taken = {"2026-04-06-130214"}
    assert next_version_id(at, taken, skip=0) == "2026-04-06-130213"
    assert next_version_id(at, taken, skip=1) == "2026-04-06-130215"
    assert next_version_id(at, taken, skip=2) == "2026-04-06-130216"
    assert next_version_id(at, taken, skip=-3) == "2026-04-06-130213"
    ids = [next_version_id(at, taken, skip=n) for n in range(5)]
    assert len(set(ids)) == 5 and not set(ids) & taken


# -- slugs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "title", "expected"),
    [
        (
            12,
            "UI框架设计（Ctrl/Handler/Panel/Template）",
            "12-uikuang-jia-she-ji-ctrl-handler-panel-template",
        ),
        (10, "Protobuf协议集成", "10-protobufxie-yi-ji-cheng"),
        (1, "项目概览", "1-xiang-mu-gai-lan"),
        (3, "default_config", "3-default_config"),
        (1, "Overview", "1-overview"),
        (2, "Quick Start", "2-quick-start"),
        (4, "!!!", "4-"),
    ],
)
def test_slug_reproduces_zreads_samples(n: int, title: str, expected: str) -> None:
    assert slug(n, title) == expected


def test_the_number_keeps_slugs_of_one_wiki_apart() -> None:
    titles = ["Quick Start", "quick start", "Quick-Start!", "QUICK   START"]
    assert len({slug(1, t)[2:] for t in titles}) == 1
    slugs = [slug(n, t) for n, t in enumerate(titles, start=1)]
    assert len(set(slugs)) == len(slugs)


@pytest.mark.parametrize("n", [0, -1])
def test_slug_numbers_start_at_one(n: int) -> None:
    with pytest.raises(ValueError, match="page numbers start at 1"):
        slug(n, "Overview")


@pytest.mark.parametrize(
    ("n", "title"),
    [
        (1, "a" * 1000),
        (12345, "word " * 400),
        (7, "项目概览" * 200),
        (99, "Architecture & Design / Overview. " * 50),
    ],
)
def test_a_very_long_title_gives_a_bounded_plain_slug(n: int, title: str) -> None:
    result = slug(n, title)
    prefix = f"{n}-"
    assert result.startswith(prefix)
    assert len(result) <= 150 + len(prefix)
    assert len(result) > 100
    assert is_plain_name(result)
    assert is_plain_name(result + ".md")


@pytest.mark.parametrize("title", ["", ".", "..", "/", "a/../b", "\\", "\n", " ", "\x00"])
def test_every_slug_is_a_plain_name(title: str) -> None:
    assert is_plain_name(slug(1, title))


# -- Go time ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (183_259_466, "2026-04-06T19:02:13.183259466Z"),
        (183_259_460, "2026-04-06T19:02:13.18325946Z"),
        (500_000_000, "2026-04-06T19:02:13.5Z"),
        (1, "2026-04-06T19:02:13.000000001Z"),
        (999_999_999, "2026-04-06T19:02:13.999999999Z"),
        (0, "2026-04-06T19:02:13Z"),
    ],
)
def test_go_time_is_rfc3339nano(nanos: int, text: str) -> None:
    assert go_time(dt.datetime(2026, 4, 6, 19, 2, 13, tzinfo=dt.UTC), nanos) == text


def test_go_time_converts_to_utc_and_defaults_to_microseconds() -> None:
    local = dt.datetime(2026, 4, 6, 13, 2, 13, 183_259, tzinfo=dt.timezone(-dt.timedelta(hours=6)))
    assert go_time(local) == "2026-04-06T19:02:13.183259Z"
    assert go_time(dt.datetime(2026, 4, 6, 19, 2, 13)) == "2026-04-06T19:02:13Z"
    assert go_time(dt.datetime(2026, 4, 6, 19, 2, 13, 500_000)) == "2026-04-06T19:02:13.5Z"
    assert go_time(local, 7) == "2026-04-06T19:02:13.000000007Z"


def test_go_time_crosses_the_date_line_when_converting() -> None:
    east = dt.datetime(2026, 1, 1, 3, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    assert go_time(east) == "2025-12-31T19:00:00Z"


@pytest.mark.parametrize("nanos", [-1, 1_000_000_000])
def test_go_time_refuses_nanos_out_of_range(nanos: int) -> None:
    with pytest.raises(ValueError, match="nanos"):
        go_time(dt.datetime(2026, 1, 1), nanos)


def test_next_version_id_walks_past_a_run_of_taken_seconds_across_minutes() -> None:
    at = dt.datetime(2026, 4, 6, 13, 58, 30)
    taken = {version_id(at + dt.timedelta(seconds=n)) for n in range(200)}
    assert next_version_id(at, taken) == version_id(at + dt.timedelta(seconds=200))
    assert next_version_id(at, taken, skip=1) == version_id(at + dt.timedelta(seconds=201))


def test_version_time_is_the_ids_local_time_in_utc() -> None:
    local = dt.datetime(2026, 4, 6, 13, 2, 13)
    expected = f"{local.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%S}Z"
    assert version_time(version_id(local)) == expected


def test_version_time_follows_a_change_of_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    name = "2026-04-06-130213"
    seen = []
    for zone in ("UTC-9", "UTC+5", "UTC-9"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        seen.append(version_time(name))
    monkeypatch.undo()
    time.tzset()
    assert seen == ["2026-04-06T04:02:13Z", "2026-04-06T18:02:13Z", "2026-04-06T04:02:13Z"]


@pytest.mark.parametrize(
    "name",
    [
        "",
        "current",
        "2026-04-06-13021",
        "2026-04-06-1302130",
        "2026-13-06-130213",
        "2026-04-06-130260",
        "2026/04/06-130213",
        "\uff12\uff10\uff12\uff16-04-06-130213",
        "2026-02-30-120000",
    ],
)
def test_version_time_of_what_is_not_a_version_id_is_none(name: str) -> None:
    assert version_time(name) is None


@settings(max_examples=2000)
@example("a" * 149 + "--b")
@example("x" * 150 + " y")
@example("-" * 160 + "A_b")
@example("Quick Start: a C++ / Rust guide")
@given(st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=200))
def test_an_ascii_title_has_python_slugify_s_slug(title: str) -> None:
    from slugify import slugify

    expected = slugify(title, lowercase=True, regex_pattern=r"[^-a-z0-9_]+", max_length=150)
    assert _title_slug.__wrapped__(title) == expected
