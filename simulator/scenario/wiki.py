"""The simulated wiki: its catalog, slugs, page markdown, version ids and dates, from the seed.

Owns: drawing a code wiki that reads like one ("Architecture Overview", "Request
Lifecycle", ... or, in Chinese, "项目概览", "Protobuf协议集成", ...), the same for a
given seed, project, version and language whichever command asks, so generate's
catalog is the one browse serves; the pages a scenario lists by hand
(``[[world.project.pages]]``) or a draft on disk lists (with its own slugs); each
page's slug (zread's: ``<n>-`` and the slugified title, which the vm's
``tasks[].slug``, the page file and wiki.json all use); the
markdown of a page as zread writes it; and the ids and dates of the scenario's earlier
wikis. Slugs are :mod:`simulator.formats.ids`' (re-exported here); a drawn version id
is written in its format (:func:`~simulator.formats.ids.version_id`'s text).

The wiki's language is the config's ``language`` (:func:`wiki_language`: ``zh...`` is
Chinese, anything else English), as zread takes it from ``config.yaml``. A Chinese wiki
has Chinese titles; its section and group names are Chinese too, except in about one
wiki in three (drawn), where they are English, as zread's often are. The languages and
the words of both are :mod:`simulator.scenario.wikiwords`' (its ``Language``,
``LANGUAGES`` and ``wiki_language`` re-exported here).

Page bodies for the browse server (:func:`page_body`) come from faker, seeded, with a
small provider of code-wiki vocabulary. faker costs ~150 ms to import and ~15 MB, so
only those bodies use it, imported on the first draw; one instance is kept per process,
re-seeded before every use so no draw depends on an earlier one. Everything else
(titles, markdown, ids, dates) comes from ``random`` seeded the same way, from those
words (faker's sentences are English only). Catalogs and bodies are cached: thousands
of sessions with one seed draw the wiki once.

Over 400 lines, for a reason: the catalog, the markdown and the version draw share one
seeded stream and one cache per wiki; apart, each would have to derive them again.

Must not: do I/O or read the clock (dates are drawn, never "now").
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from simulator.formats.ids import LEVELS, slug
from simulator.scenario.wikiwords import (
    GROUPS,
    LANGUAGES,
    NOUNS,
    OVERVIEW,
    PATTERNS,
    SECTIONS,
    TEXT,
    TOPICS,
    Language,
    wiki_language,
)
from simulator.scenario.world import PageSpec

if TYPE_CHECKING:
    from simulator.scenario.world import World


class Page(msgspec.Struct, frozen=True, gc=False):  # strings and ints: no cycles
    """One catalog entry: a page of the wiki, as wiki.json lists it.

    ``id`` is the 1-based catalog order (the ``n`` of the slug), ``group`` is ``""``
    when the page has none, ``level`` one of ``Beginner``, ``Intermediate``,
    ``Advanced``.
    """

    id: int
    title: str
    slug: str
    section: str = ""
    group: str = ""
    level: str = "Beginner"


class DraftPageSpec(PageSpec, frozen=True, kw_only=True):
    """A page of a draft read from disk: listed as a scenario lists it, with the slug
    the draft already gave it. zread's slugs are not always the formula's (a longer
    cut, another slugifier), and a resumed page keeps its file and its slug."""

    slug: str


class Version(msgspec.Struct, frozen=True, gc=False):
    """A wiki version as browse lists it."""

    id: str
    timestamp: str
    is_current: bool


_FAKER_LOCK = threading.Lock()
"""Held while the shared faker instance is seeded and drawn from: the browse server
draws page bodies from its own threads."""


@functools.cache
def _faker() -> Any:
    from faker import Faker

    return Faker("en_US")


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(":".join(map(str, ("zread-sim", seed, "wiki", *parts))))


# -- the catalog ---------------------------------------------------------------------------


def catalog(
    seed: int,
    project: str,
    pages: int | Sequence[PageSpec],
    version: int = 0,
    language: Language = "en",
) -> tuple[Page, ...]:
    """The pages of ``project``'s wiki, ids 1..N in catalog order.

    ``pages`` is a count (titles drawn from the seed, ``Overview`` first, the Beginner
    section, then the Intermediate one with its pages by group, then the Advanced one)
    or the pages themselves (a section or level left empty is filled in by position).
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    return _catalog(
        seed, project, pages if isinstance(pages, int) else tuple(pages), version, language
    )


def world_catalog(world: World, seed: int, version: int = 0) -> tuple[Page, ...]:
    """The catalog of ``world``'s project, in the language of its config."""
    project = world.project
    return catalog(seed, project.name, project.pages, version, wiki_language(world.config.language))


@functools.lru_cache(maxsize=256)
def _catalog(
    seed: int, project: str, pages: int | tuple[PageSpec, ...], version: int, language: Language
) -> tuple[Page, ...]:
    rng = _rng(seed, project, version)
    sections, groups, rank = _names(rng, language)
    if not isinstance(pages, int):
        count = len(pages)
        return tuple(_listed_page(n, spec, count, sections) for n, spec in enumerate(pages, 1))
    chosen = _drawn_titles(rng, pages, 0 if language == "en" else 1)
    ordered = sorted(chosen, key=lambda c: (c[1], rank.get(c[2], 0)))
    # Titles and slugs are interned: the catalogs of thousands of sessions (a load test)
    # hold the same few thousand, ~5 KB a 50-page catalog.
    return tuple(
        Page(n, title, sys.intern(slug(n, title)), sections[tier], groups[key], LEVELS[tier])
        for n, (title, tier, key) in enumerate(ordered, start=1)
    )


def _names(
    rng: random.Random, language: Language
) -> tuple[tuple[str, ...], dict[str, str], dict[str, int]]:
    """The name of each tier's section, the name of each group (``""`` for none) and
    the rank of each group in its section.

    Whether a Chinese wiki names its sections and groups in English is the wiki's draw,
    and so are the section names and the order of the groups: drawn before anything
    else, so every catalog of one seed, project and version agrees on them whatever
    its size.
    """
    english_sections = rng.random() < 1 / 3
    section_choice = [rng.randrange(len(options)) for options in SECTIONS]
    group_order = list(GROUPS)
    rng.shuffle(group_order)
    lang = 0 if language == "en" or english_sections else 1
    sections = tuple(
        options[choice][lang] for options, choice in zip(SECTIONS, section_choice, strict=True)
    )
    groups = {key: GROUPS[key][lang] if key else "" for key in ("", *GROUPS)}
    rank = {key: i + 1 for i, key in enumerate(group_order)}
    return sections, groups, rank


def _drawn_titles(rng: random.Random, pages: int, text: int) -> list[tuple[str, int, str]]:
    """(title, tier, group key) of each of ``pages`` pages in language ``text`` (0 for
    English, 1 for Chinese): ``Overview``, then topics, then titles made of a pattern
    and a noun. Drawn in a language-free way, so the English and the Chinese catalog of
    one seed are translations of each other."""
    chosen: list[tuple[str, int, str]] = [(OVERVIEW[text], 0, "")] if pages else []
    topics = list(TOPICS)
    rng.shuffle(topics)
    for en, zh, tier, key in topics:
        if len(chosen) == pages:
            break
        chosen.append((zh if text else en, tier, key))
    seen: set[tuple[int, int]] = set()
    while len(chosen) < pages:
        pattern, noun = rng.randrange(len(PATTERNS)), rng.randrange(len(NOUNS))
        title = PATTERNS[pattern][text].format(Noun=NOUNS[noun][text])
        if (pattern, noun) in seen:
            title = f"{title} {len(chosen) + 1}"
        seen.add((pattern, noun))
        chosen.append((sys.intern(title), 1, NOUNS[noun][2]))
    return chosen


def _listed_page(n: int, spec: PageSpec, count: int, sections: Sequence[str]) -> Page:
    """A page a scenario listed; its tier, when it gives no level, from its position."""
    if spec.level:
        tier = LEVELS.index(spec.level)
    elif n == 1 or n <= count // 4:
        tier = 0
    elif n > count - count // 5:
        tier = 2
    else:
        tier = 1
    page_slug = spec.slug if isinstance(spec, DraftPageSpec) else slug(n, spec.title)
    return Page(n, spec.title, page_slug, spec.section or sections[tier], spec.group, LEVELS[tier])


# -- page text -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def page_body(seed: int, project: str, page: Page, version: int = 0) -> tuple[str, ...]:
    """The paragraphs of a page, drawn from the seed (plain text, not markup)."""
    fake = _faker()
    with _FAKER_LOCK:
        fake.seed_instance(_rng(seed, project, version, page.id).getrandbits(64))
        module = re.sub(r"^\d+-", "", page.slug).replace("-", "_") or "core"
        paragraphs = [
            f"This page describes {page.title.lower()} in {project}. "
            + " ".join(fake.sentences(nb=3)),
            f"The code lives in `src/{module}/` and is exercised by `tests/test_{module}.py`. "
            + fake.paragraph(nb_sentences=4),
            fake.paragraph(nb_sentences=5),
        ]
    return tuple(paragraphs)


_CITABLE = re.compile(r"[^\s()\[\]<>#%\\`\"]+")
"""A path a markdown link can carry as it is: a reader takes the path between ``(`` and
``#`` literally, so nothing that would need escaping is cited."""


def page_markdown(
    page: Page,
    *,
    language: Language,
    seed: int,
    others: Sequence[tuple[str, str]],
    sources: Sequence[tuple[str, int]],
) -> str:
    """The markdown of ``page`` as zread writes it into ``<slug>.md``.

    No leading ``# `` heading: a paragraph, then ``## `` sections, a mermaid block in
    most pages (every page above Beginner), links to other pages as ``[Title](slug)``
    (``others`` are ``(title, slug)``; the page's own slug is never linked) and
    ``Sources: [path](path#L<a>-L<b>)`` lines citing files of ``sources``
    (``(relative path, line count)``) with ``1 <= a <= b <= line count``. A source that
    cannot be cited is left out: an empty file, an absolute path, one with a ``..``
    part, or one with a character a markdown link or code span would need escaped
    (white space, parentheses, brackets, ``<>``, ``#``, ``%``, backslash, backtick,
    double quote). No sources, no ``Sources:`` lines. The same arguments give the
    same text; ``language`` picks English or Chinese.
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    words = TEXT[language]
    rng = random.Random(f"zread-sim:{seed}:markdown:{language}:{page.id}:{page.slug}")
    citable = _citable_sources(tuple(sources))

    def pick_links(count: int) -> list[tuple[str, str]]:
        """Up to ``count`` of ``others`` but the page itself, in their order (sampled
        by index: a wiki of thousands of pages is not copied for every page)."""
        picked = rng.sample(range(len(others)), min(len(others), count + 1))
        chosen = [i for i in picked if others[i][1] != page.slug][:count]
        return [others[i] for i in sorted(chosen)]

    def cite() -> list[tuple[str, int, int]]:
        if not citable:
            return []
        picked = rng.sample(range(len(citable)), min(len(citable), rng.randint(1, 2)))
        cited = []
        for index in sorted(picked):
            path, lines = citable[index]
            start = 1 if rng.random() < 0.4 else rng.randint(1, lines)
            end = min(lines, start + rng.randint(4, 80))
            cited.append((path, start, end))
        return cited

    plain = [s for s in words["sentences"] if "{file}" not in s]
    unused: list[str] = []

    def paragraph(cited: list[tuple[str, int, int]]) -> str:
        # Sentences are drawn without replacement across the page, so none repeats
        # before all have been used.
        chosen: list[str] = []
        for _ in range(rng.randint(2, 3)):
            if not unused:
                unused.extend(rng.sample(plain, len(plain)))
            chosen.append(unused.pop())
        if cited:
            with_file = [s for s in words["sentences"] if "{file}" in s]
            chosen.insert(rng.randrange(len(chosen) + 1), rng.choice(with_file))
        sep = "" if language == "zh" else " "
        return sep.join(s.format(file=cited[0][0]) if "{file}" in s else s for s in chosen)

    def sources_line(cited: list[tuple[str, int, int]]) -> str:
        return "Sources: " + ", ".join(f"[{p}]({p}#L{a}-L{b})" for p, a, b in cited)

    blocks = [rng.choice(words["intro"]).format(title=page.title)]
    headings = rng.sample(words["headings"], rng.randint(2, 4))
    diagram_at = (
        rng.randrange(len(headings)) if page.level != "Beginner" or rng.random() < 0.6 else None
    )
    for index, heading in enumerate(headings):
        blocks.append(f"## {heading}")
        cited = cite()
        text = paragraph(cited)
        see = pick_links(1) if rng.random() < 0.5 else []
        for link_title, target in see:
            sep = "" if language == "zh" else " "
            text += sep + rng.choice(words["see"]).format(link=f"[{link_title}]({target})")
        blocks.append(text)
        if index == diagram_at:
            blocks.append(words["diagram"][0])
            blocks.append(_mermaid(rng, words["nodes"], page.title, cited))
        if cited:
            blocks.append(sources_line(cited))
    related = pick_links(3)
    if related:
        blocks.append(f"## {words['related'][0]}")
        blocks.append("\n".join(f"- [{title}]({target})" for title, target in related))
    return "\n\n".join(blocks) + "\n"


@functools.lru_cache(maxsize=16)
def _citable_sources(sources: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The sources a page may cite (kept: every page of a wiki is given the same list)."""
    return tuple(
        (path, lines)
        for path, lines in sources
        if lines >= 1
        and _CITABLE.fullmatch(path) is not None
        and not path.startswith("/")
        and ".." not in path.split("/")
    )


def _mermaid(
    rng: random.Random, nodes: tuple[str, ...], title: str, cited: list[tuple[str, int, int]]
) -> str:
    """A small flowchart: the page's subject between a caller and a result, with the
    files cited nearby as its parts."""
    labels = [nodes[0], title, *(path.rsplit("/", 1)[-1] for path, _, _ in cited)]
    labels += [*nodes[2 : 2 + max(0, 4 - len(labels))], nodes[-1]]
    quoted = [label.replace('"', "#quot;") for label in labels]
    direction = rng.choice(("TD", "LR"))
    lines = [f"```mermaid\nflowchart {direction}"]
    lines += [f'    N{i}["{label}"]' for i, label in enumerate(quoted)]
    lines += [f"    N{i} --> N{i + 1}" for i in range(len(quoted) - 1)]
    return "\n".join(lines) + "\n```"


# -- versions ------------------------------------------------------------------------------


_VERSIONS_FROM: Final = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
_VERSIONS_SPAN: Final = 300 * 86400  # seconds after _VERSIONS_FROM a version is drawn within
_TWO_DIGITS: Final = tuple(f"{n:02d}" for n in range(60))


@functools.lru_cache(maxsize=1024)
def _version_day(days: int) -> str:
    """``YYYY-MM-DD`` of the day ``days`` after :data:`_VERSIONS_FROM` (~300 of them)."""
    return (_VERSIONS_FROM + dt.timedelta(days=days)).strftime("%Y-%m-%d")


@functools.lru_cache(maxsize=256)
def _drawn_versions(seed: int, count: int) -> tuple[tuple[str, str], ...]:
    """Ids and dates of ``count`` versions, drawn with ``random`` (faker is not needed).

    The ids are zread's (``YYYY-MM-DD-HHMMSS``, here of the UTC date), a second later
    when two draws fall on the same second, so they stay unique. Each session of a load
    test has a seed of its own and draws here as it starts: the texts are put together
    from the day's (one string a day) and two-digit strings, not by ``strftime``."""
    if not count:
        return ()
    rng = random.Random(f"zread-sim:{seed}:wiki:versions")  # _rng(seed, "versions")
    drawn: list[tuple[str, str]] = []
    last = -1
    two = _TWO_DIGITS
    offsets = [rng.randrange(_VERSIONS_SPAN) for _ in range(count)]
    offsets.sort()
    for offset in offsets:
        last = offset = offset if offset > last else last + 1
        days, moment = divmod(offset, 86400)
        hours, moment = divmod(moment, 3600)
        minutes, seconds = divmod(moment, 60)
        day, hh, mm, ss = _version_day(days), two[hours], two[minutes], two[seconds]
        drawn.append((f"{day}-{hh}{mm}{ss}", f"{day}T{hh}:{mm}:{ss}Z"))
    return tuple(drawn)


def shown_date(world: World, seed: int) -> str:
    """The date of the wiki generate's first event shows: the current version's (the
    newest current one), else the newest version's. Versions on disk are not made
    into :class:`Version` objects for it: a start reads a date from each."""
    wikis = world.wikis
    if all(wiki.id and wiki.timestamp for wiki in wikis):
        return max([w.timestamp for w in wikis if w.current] or [w.timestamp for w in wikis])
    listed = versions(world, seed)
    return ([v for v in listed if v.is_current] or list(listed))[-1].timestamp


def versions(world: World, seed: int) -> tuple[Version, ...]:
    """The world's wiki versions, oldest first, with drawn ids and dates where empty."""
    if all(wiki.id and wiki.timestamp for wiki in world.wikis):  # on disk: nothing to draw
        listed = [Version(wiki.id, wiki.timestamp, wiki.current) for wiki in world.wikis]
    else:
        drawn = _drawn_versions(seed, len(world.wikis))
        listed = [
            Version(wiki.id or drawn_id, wiki.timestamp or drawn_stamp, wiki.current)
            for wiki, (drawn_id, drawn_stamp) in zip(world.wikis, drawn, strict=True)
        ]
    if len(listed) > 1:  # (one, the common world, is in order)
        listed.sort(key=lambda v: v.timestamp)
    return tuple(listed)
