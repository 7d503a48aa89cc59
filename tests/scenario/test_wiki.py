"""Tests of simulator/wiki.py: the seeded catalog, page bodies and wiki versions."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from simulator.scenario import wiki
from simulator.scenario.world import WikiVersion, World

PROJECT = "acme/widget"
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def fresh_catalog(seed: int, project: str, pages: int, version: int = 0) -> tuple[wiki.Page, ...]:
    """The catalog drawn anew, bypassing the cache (so determinism is not the cache's)."""
    return wiki.catalog.__wrapped__(seed, project, pages, version)  # type: ignore[attr-defined]


def parse_stamp(text: str) -> dt.datetime:
    assert STAMP.match(text), text
    stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert stamp.utcoffset() == dt.timedelta(0)
    return stamp


# -- catalog ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_catalog_is_deterministic_per_seed(seed: int) -> None:
    first = wiki.catalog(seed, PROJECT, 16)
    assert first == wiki.catalog(seed, PROJECT, 16)
    assert first == fresh_catalog(seed, PROJECT, 16)
    assert fresh_catalog(seed, PROJECT, 16) == fresh_catalog(seed, PROJECT, 16)


def test_catalog_differs_per_seed() -> None:
    catalogs = {fresh_catalog(seed, PROJECT, 16) for seed in range(20)}
    assert len(catalogs) == 20


def test_catalog_differs_per_project_and_version() -> None:
    base = fresh_catalog(0, PROJECT, 16)
    assert fresh_catalog(0, "other/project", 16) != base
    assert fresh_catalog(0, PROJECT, 16, version=1) != base


@pytest.mark.parametrize("pages", [1, 2, 16, 28, 29, 60, 300])
def test_catalog_ids_are_one_to_n(pages: int) -> None:
    for seed in (0, 3):
        catalog = wiki.catalog(seed, PROJECT, pages)
        assert len(catalog) == pages
        assert [p.id for p in catalog] == list(range(1, pages + 1))
        assert all(isinstance(p, wiki.Page) for p in catalog)


@pytest.mark.parametrize("seed", [0, 1, 2, 99])
def test_overview_comes_first(seed: int) -> None:
    for pages in (1, 5, 16, 300):
        first = wiki.catalog(seed, PROJECT, pages)[0]
        assert (first.id, first.title, first.slug) == (1, "Overview", "overview")


@pytest.mark.parametrize("pages", [16, 28, 29, 100, 300, 5000])
@pytest.mark.parametrize("seed", [0, 7])
def test_titles_and_slugs_are_unique(seed: int, pages: int) -> None:
    catalog = fresh_catalog(seed, PROJECT, pages)
    titles = [p.title for p in catalog]
    slugs = [p.slug for p in catalog]
    assert len(set(titles)) == pages
    assert len(set(slugs)) == pages


@pytest.mark.parametrize("seed", [0, 5])
def test_titles_read_like_a_code_wiki(seed: int) -> None:
    catalog = wiki.catalog(seed, PROJECT, 300)
    for page in catalog:
        title = page.title
        assert title == title.strip() and "  " not in title
        assert 3 <= len(title) <= 60, title
        assert title[0].isupper(), title
        assert re.fullmatch(r"[A-Za-z0-9 \-]+", title), title
        assert SLUG.match(page.slug), page.slug
        # The slug is the title, lowercased, words joined by hyphens.
        assert page.slug == "-".join(re.findall(r"[a-z0-9]+", title.lower()))
    # A small wiki is made of distinct topics, not numbered filler.
    small = wiki.catalog(seed, PROJECT, 16)
    assert not any(re.search(r"\d", p.title) for p in small)
    assert len({p.title.split()[0] for p in small}) > 5


# -- page bodies --------------------------------------------------------------------------


def test_page_body_is_deterministic_and_not_empty() -> None:
    page = wiki.catalog(0, PROJECT, 16)[3]
    body = wiki.page_body(0, PROJECT, page)
    assert isinstance(body, tuple)
    assert len(body) >= 1
    assert all(isinstance(p, str) and p.strip() for p in body)
    assert sum(len(p) for p in body) > 200
    fresh = wiki.page_body.__wrapped__(0, PROJECT, page)  # type: ignore[attr-defined]
    assert fresh == body
    # Another draw in between does not change it (the faker instance is re-seeded).
    wiki.page_body.__wrapped__(9, PROJECT, wiki.catalog(9, PROJECT, 16)[1])  # type: ignore[attr-defined]
    assert wiki.page_body.__wrapped__(0, PROJECT, page) == body  # type: ignore[attr-defined]


def test_page_body_talks_about_its_page() -> None:
    for page in wiki.catalog(1, PROJECT, 16):
        body = wiki.page_body(1, PROJECT, page)
        text = " ".join(body)
        assert page.title.lower() in text.lower()
        assert PROJECT in text


def test_page_bodies_differ_between_pages_and_seeds() -> None:
    pages = wiki.catalog(0, PROJECT, 16)
    bodies = {wiki.page_body(0, PROJECT, page) for page in pages}
    assert len(bodies) == len(pages)
    overview = pages[0]
    assert wiki.page_body(0, PROJECT, overview) != wiki.page_body(1, PROJECT, overview)


# -- versions -----------------------------------------------------------------------------


def test_default_world_has_one_current_version() -> None:
    (version,) = wiki.versions(World(), 0)
    assert version.is_current is True
    assert version.id
    parse_stamp(version.timestamp)


def test_no_wikis_no_versions() -> None:
    assert wiki.versions(World(wikis=[]), 0) == ()


def test_drawn_versions_are_deterministic_oldest_first_and_utc() -> None:
    world = World(wikis=[WikiVersion() for _ in range(5)] + [WikiVersion(current=True)])
    for seed in (0, 1, 2, 3):
        versions = wiki.versions(world, seed)
        assert versions == wiki.versions(world, seed)
        assert len(versions) == 6
        stamps = [parse_stamp(v.timestamp) for v in versions]
        assert stamps == sorted(stamps)
        assert len({v.id for v in versions}) == 6
        assert all(v.id for v in versions)
        assert [v.is_current for v in versions] == [False] * 5 + [True]


def test_drawn_versions_differ_per_seed() -> None:
    world = World(wikis=[WikiVersion(), WikiVersion(current=True)])
    drawn = {tuple(wiki.versions(world, seed)) for seed in range(10)}
    assert len(drawn) == 10


def test_given_ids_and_timestamps_are_used_and_the_rest_drawn() -> None:
    world = World(
        wikis=[
            WikiVersion(id="v-first", timestamp="2025-03-04T05:06:07Z"),
            WikiVersion(id="v-second"),
            WikiVersion(timestamp="2026-11-30T23:59:59Z", current=True),
        ]
    )
    first, second, third = wiki.versions(world, 0)
    assert (first.id, first.timestamp, first.is_current) == (
        "v-first",
        "2025-03-04T05:06:07Z",
        False,
    )
    assert second.id == "v-second"
    parse_stamp(second.timestamp)
    assert second.timestamp not in ("", "2025-03-04T05:06:07Z")
    assert third.id not in ("", "v-first", "v-second")
    assert third.timestamp == "2026-11-30T23:59:59Z"
    assert third.is_current is True
    stamps = [parse_stamp(v.timestamp) for v in (first, second, third)]
    assert stamps == sorted(stamps)


def test_versions_are_oldest_first_even_when_a_given_date_is_older() -> None:
    # The docstring promises oldest first; a given timestamp must not break the order.
    world = World(
        wikis=[
            WikiVersion(),
            WikiVersion(id="v-old", timestamp="2025-05-01T00:00:00Z"),
            WikiVersion(current=True),
        ]
    )
    versions = wiki.versions(world, 0)
    stamps = [parse_stamp(v.timestamp) for v in versions]
    assert stamps == sorted(stamps), versions
    assert "v-old" in {v.id for v in versions}
    assert [v.timestamp for v in versions if v.is_current] == [versions[-1].timestamp]
