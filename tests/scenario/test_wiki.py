"""Tests of simulator/scenario/wiki.py: slugs, the seeded catalog (English and Chinese, drawn
or listed by a scenario), page markdown, page bodies and wiki versions."""

from __future__ import annotations

import datetime as dt
import random
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.formats import ids
from simulator.formats.ids import LEVELS
from simulator.scenario import wiki, wikiwords
from simulator.scenario.world import PageSpec, Project, Settings, WikiVersion, World

PROJECT = "acme/widget"
SLUG = re.compile(r"^[0-9]+-[a-z0-9_]+(?:-[a-z0-9_]+)*$")
STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
CJK = re.compile(r"[\u4e00-\u9fff]")


def fresh_catalog(
    seed: int, project: str, pages: int, version: int = 0, language: wikiwords.Language = "en"
) -> tuple[wiki.Page, ...]:
    """The catalog drawn anew, bypassing the cache (so determinism is not the cache's)."""
    return wiki._catalog.__wrapped__(seed, project, pages, version, language)  # type: ignore[attr-defined]


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
        assert (first.id, first.title, first.slug) == (1, "Overview", "1-overview")
        assert first.level == "Beginner"


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
        # The slug is the page's number, then the title, lowercased, words joined by hyphens.
        assert page.slug == "-".join([str(page.id), *re.findall(r"[a-z0-9]+", title.lower())])
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


# -- slugs, ids, language -------------------------------------------------------------------


def test_slugs_and_version_ids_are_the_formats_ones() -> None:
    """zread's slugs and ids are :mod:`simulator.formats.ids`' (tested there); the
    scenario's wiki names its pages and versions with them."""
    assert [p.slug for p in wiki.catalog(0, "acme/widget", 3)] == [
        ids.slug(p.id, p.title) for p in wiki.catalog(0, "acme/widget", 3)
    ]


def test_the_languages_are_the_words_ones() -> None:
    assert wikiwords.LANGUAGES == ("en", "zh")
    assert wikiwords.wiki_language("zh-CN") == "zh" and wikiwords.wiki_language("fr") == "en"


# -- sections, groups, levels ---------------------------------------------------------------


@pytest.mark.parametrize("language", wikiwords.LANGUAGES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_catalog_pages_are_ordered_by_level_and_grouped(
    seed: int, language: wikiwords.Language
) -> None:
    catalog = wiki.catalog(seed, PROJECT, 60, language=language)
    levels = [LEVELS.index(p.level) for p in catalog]
    assert levels == sorted(levels)
    assert set(levels) == {0, 1, 2}
    # One section per level, and a group's pages are next to each other.
    sections = {p.level: p.section for p in catalog}
    assert all(p.section == sections[p.level] for p in catalog)
    assert len(set(sections.values())) == 3
    runs = [p.group for i, p in enumerate(catalog) if i == 0 or catalog[i - 1].group != p.group]
    grouped = [g for g in runs if g]
    assert len(grouped) == len(set(grouped))
    assert any(p.group for p in catalog) and any(not p.group for p in catalog)


def test_catalog_refuses_an_unknown_language() -> None:
    with pytest.raises(ValueError, match="language must be one of en, zh"):
        wiki.catalog(0, PROJECT, 3, language="fr")  # type: ignore[arg-type]


def test_a_smaller_catalog_keeps_the_section_names() -> None:
    big = {p.level: p.section for p in wiki.catalog(4, PROJECT, 40)}
    small = {p.level: p.section for p in wiki.catalog(4, PROJECT, 3)}
    assert all(big[level] == section for level, section in small.items())


# -- Chinese -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_a_chinese_catalog_has_chinese_titles_and_pinyin_slugs(seed: int) -> None:
    catalog = wiki.catalog(seed, PROJECT, 16, language="zh")
    assert (catalog[0].title, catalog[0].slug) == ("项目概览", "1-xiang-mu-gai-lan")
    assert all(CJK.search(p.title) for p in catalog)
    for page in catalog:
        assert SLUG.match(page.slug), page.slug
        assert page.slug == wiki.slug(page.id, page.title)
        assert page.slug.isascii()


def test_chinese_and_english_catalogs_are_translations() -> None:
    english = wiki.catalog(3, PROJECT, 200)
    chinese = wiki.catalog(3, PROJECT, 200, language="zh")
    assert [p.level for p in english] == [p.level for p in chinese]
    assert [bool(p.group) for p in english] == [bool(p.group) for p in chinese]
    assert len({p.title for p in chinese}) == 200


def test_chinese_wikis_name_their_sections_in_chinese_mostly() -> None:
    kinds = []
    for seed in range(30):
        sections = {p.section for p in wiki.catalog(seed, PROJECT, 40, language="zh")}
        kinds.append(all(CJK.search(s) for s in sections))
        assert kinds[-1] or all(s.isascii() for s in sections)
    assert 0 < kinds.count(False) < kinds.count(True)


@pytest.mark.parametrize("pages", [100, 5000])
def test_chinese_titles_and_slugs_are_unique(pages: int) -> None:
    catalog = fresh_catalog(7, PROJECT, pages, language="zh")
    assert len({p.title for p in catalog}) == pages
    assert len({p.slug for p in catalog}) == pages


def test_world_catalog_takes_the_language_from_the_config() -> None:
    zh = World(config=Settings(language="zh"))
    assert wiki.world_catalog(zh, 2) == wiki.catalog(2, PROJECT, 16, language="zh")
    assert wiki.world_catalog(World(), 2) == wiki.catalog(2, PROJECT, 16)
    assert wiki.world_catalog(World(), 2, version=1) == wiki.catalog(2, PROJECT, 16, 1)


# -- pages listed by a scenario -------------------------------------------------------------


def test_listed_pages_are_used_in_order() -> None:
    specs = [
        PageSpec(title="项目概览", section="入门指南"),
        PageSpec(
            title="Protobuf协议集成", section="核心框架", group="网络通信", level="Intermediate"
        ),
        PageSpec(title="Quick Start"),
        PageSpec(title="Quick Start", level="Advanced"),
    ]
    catalog = wiki.catalog(0, PROJECT, specs)
    assert catalog == wiki.catalog(0, PROJECT, tuple(specs))
    assert [(p.id, p.title, p.slug) for p in catalog] == [
        (1, "项目概览", "1-xiang-mu-gai-lan"),
        (2, "Protobuf协议集成", "2-protobufxie-yi-ji-cheng"),
        (3, "Quick Start", "3-quick-start"),
        (4, "Quick Start", "4-quick-start"),
    ]
    first, second, third, fourth = catalog
    assert (first.section, first.group, first.level) == ("入门指南", "", "Beginner")
    assert (second.section, second.group, second.level) == ("核心框架", "网络通信", "Intermediate")
    assert third.level == "Intermediate" and third.section
    assert fourth.level == "Advanced" and fourth.section and fourth.section != third.section


def test_listed_pages_without_levels_get_them_by_position() -> None:
    specs = [PageSpec(title=f"Page {n}") for n in range(1, 21)]
    levels = [p.level for p in wiki.catalog(0, PROJECT, specs)]
    assert levels == ["Beginner"] * 5 + ["Intermediate"] * 11 + ["Advanced"] * 4


def test_a_projects_listed_pages_from_a_table() -> None:
    project = msgspec.convert(
        {"pages": [{"title": "Overview"}, {"title": "Data", "level": "Advanced"}]}, Project
    )
    catalog = wiki.world_catalog(World(project=project), 0)
    assert [(p.slug, p.level) for p in catalog] == [
        ("1-overview", "Beginner"),
        ("2-data", "Advanced"),
    ]


# -- page markdown --------------------------------------------------------------------------

SOURCES = [("src/app/main.py", 120), ("README.md", 30), ("docs/设计.md", 9), ("one.txt", 1)]
CITATION = re.compile(r"\[([^\]]+)\]\(([^)#]+)#L(\d+)-L(\d+)\)")
LINK = re.compile(r"(?<!\])\[([^\]]+)\]\(([^)#\s]+)\)")


def markdown(index: int, language: wikiwords.Language = "en", seed: int = 0, **kw: object) -> str:
    catalog = wiki.catalog(seed, PROJECT, 16, language=language)
    args: dict[str, object] = {
        "others": [(p.title, p.slug) for p in catalog],
        "sources": SOURCES,
        **kw,
    }
    return wiki.page_markdown(catalog[index], language=language, seed=seed, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("language", wikiwords.LANGUAGES)
@pytest.mark.parametrize("index", range(16))
def test_page_markdown_has_zreads_shape(index: int, language: wikiwords.Language) -> None:
    text = markdown(index, language)
    lines = text.splitlines()
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert not lines[0].startswith("#") and lines[0].strip()
    assert not any(line.startswith("# ") for line in lines)
    assert sum(line.startswith("## ") for line in lines) >= 2
    assert lines[1] == "" and lines[2].startswith("## ")
    sources = dict(SOURCES)
    cited = 0
    for line in lines:
        if line.startswith("Sources: "):
            for match in CITATION.finditer(line):
                text_path, path, start, end = match.groups()
                assert text_path == path and path in sources
                assert 1 <= int(start) <= int(end) <= sources[path]
                cited += 1
            assert CITATION.sub("", line.removeprefix("Sources: ")).strip(", ") == ""
    assert cited
    catalog = wiki.catalog(0, PROJECT, 16, language=language)
    slugs = {p.slug: p.title for p in catalog}
    links = [(t, s) for t, s in LINK.findall(text)]
    assert links
    for title, slug in links:
        assert slugs[slug] == title and slug != catalog[index].slug
        assert not slug.endswith(".md")
    if language == "zh":
        assert CJK.search(text)
    else:
        # English throughout, but for the name of a file it cites.
        assert not CJK.search(text.replace("设计.md", ""))


def test_page_markdown_is_deterministic_and_differs_by_seed_and_page() -> None:
    assert markdown(3) == markdown(3)
    assert markdown(3) != markdown(3, seed=1)
    assert markdown(3) != markdown(4)
    assert markdown(3, "zh") != markdown(3)


def test_most_pages_have_a_mermaid_block_and_all_above_beginner() -> None:
    catalog = wiki.catalog(0, PROJECT, 16)
    texts = [markdown(i) for i in range(16)]
    for page, text in zip(catalog, texts, strict=True):
        if page.level != "Beginner":
            assert "```mermaid\nflowchart " in text
    assert sum("```mermaid" in text for text in texts) > 8
    for text in texts:
        assert text.count("```") % 2 == 0


def test_page_markdown_without_sources_cites_nothing() -> None:
    for index in range(16):
        text = markdown(index, sources=[])
        assert "Sources:" not in text
        assert not CITATION.search(text)


def test_page_markdown_without_others_links_nothing() -> None:
    page = wiki.catalog(0, PROJECT, 16)[5]
    for others in ([], [(page.title, page.slug)]):
        text = markdown(5, others=others)
        assert not LINK.search(CITATION.sub("", text))
        assert "## Related Pages" not in text


def test_page_markdown_of_a_big_wiki_links_and_cites_within_it() -> None:
    catalog = wiki.catalog(1, PROJECT, 3000)
    others = [(p.title, p.slug) for p in catalog]
    sources = [(f"src/m{i}.py", i + 1) for i in range(2000)]
    slugs = {p.slug for p in catalog}
    for page in catalog[::300]:
        text = wiki.page_markdown(page, language="en", seed=1, others=others, sources=sources)
        assert {slug for _, slug in LINK.findall(text)} <= slugs - {page.slug}
        for _, path, start, end in CITATION.findall(text):
            assert 1 <= int(start) <= int(end) <= int(path[5:-3]) + 1


def test_page_markdown_cites_only_what_can_be_cited() -> None:
    bad = [
        ("empty.py", 0),
        ("/abs/path.py", 10),
        ("../outside.py", 10),
        ("a b.py", 10),
        ("a(1).py", 10),
        ("a#b.py", 10),
        ("a%20b.py", 10),
        ("a`b.py", 10),
    ]
    for index in range(16):
        text = markdown(index, sources=[*bad, ("ok.py", 3)])
        paths = {m.group(2) for m in CITATION.finditer(text)}
        assert paths <= {"ok.py"}


def test_page_markdown_refuses_an_unknown_language() -> None:
    with pytest.raises(ValueError, match="language"):
        markdown(0, language="fr")  # type: ignore[arg-type]


def _versions_by_datetime(seed: int, count: int) -> tuple[tuple[str, str], ...]:
    """The drawn versions as datetime and strftime write them (what the draw's own
    arithmetic must equal, byte for byte)."""
    rng = random.Random(f"zread-sim:{seed}:wiki:versions")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    stamps = sorted(start + dt.timedelta(seconds=rng.randrange(300 * 86400)) for _ in range(count))
    drawn: list[tuple[str, str]] = []
    for i, stamp in enumerate(stamps):
        if i and stamp <= stamps[i - 1]:
            stamps[i] = stamp = stamps[i - 1] + dt.timedelta(seconds=1)
        drawn.append((ids.version_id(stamp), stamp.strftime("%Y-%m-%dT%H:%M:%SZ")))
    return tuple(drawn)


@pytest.mark.parametrize("count", [0, 1, 2, 7])
def test_drawn_versions_are_what_datetime_writes(count: int) -> None:
    for seed in range(200):
        assert wiki._drawn_versions(seed, count) == _versions_by_datetime(seed, count)


def test_drawn_versions_on_one_second_are_a_second_apart_as_datetime_has_them() -> None:
    """20,000 draws in 300 days of seconds: some fall on the same second (and on a day's
    last second, the next is the next day's first)."""
    drawn = wiki._drawn_versions(3, 20_000)
    assert drawn == _versions_by_datetime(3, 20_000)
    assert len({version_id for version_id, _ in drawn}) == 20_000
    rng = random.Random("zread-sim:3:wiki:versions")
    raw = {rng.randrange(300 * 86400) for _ in range(20_000)}
    assert len(raw) < 20_000  # the bump was taken


def test_drawn_version_ids_are_zreads() -> None:
    world = World(wikis=[WikiVersion() for _ in range(50)])
    ids = [v.id for v in wiki.versions(world, 0)]
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}-\d{6}", i) for i in ids)
    assert len(set(ids)) == 50


def test_catalogs_of_different_seeds_share_their_titles_and_slugs() -> None:
    """A load test holds thousands of catalogs: one string per drawn title and slug."""
    first, second = wiki.catalog(1, "proj", 50), wiki.catalog(2, "proj", 50)
    assert first != second
    slugs = {page.slug: page.slug for page in first}
    titles = {page.title: page.title for page in first}
    shared = [page for page in second if page.slug in slugs]
    assert shared  # the same page at the same place in both
    assert all(page.slug is slugs[page.slug] for page in shared)
    assert all(page.title is titles[page.title] for page in second if page.title in titles)


_STAMPS = st.sampled_from(
    ["", "2025-01-01T00:00:00Z", "2025-06-01T12:00:00Z", "2026-02-03T04:05:06Z"]
)


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "v-a", "v-b", "2025-01-01-000000"]), _STAMPS, st.booleans()),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 3),
)
def test_the_date_generate_shows_is_the_current_or_newest_versions(
    given_wikis: list[tuple[str, str, bool]], seed: int
) -> None:
    world = World(wikis=[WikiVersion(id=i, timestamp=t, current=c) for i, t, c in given_wikis])
    listed = wiki.versions(world, seed)
    expected = ([v for v in listed if v.is_current] or list(listed))[-1].timestamp
    assert wiki.shown_date(world, seed) == expected
