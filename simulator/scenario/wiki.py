"""The simulated wiki: page titles, slugs, bodies, version ids and dates, from the seed.

Owns: drawing a code wiki that reads like one ("Architecture Overview", "Request
Lifecycle", ...), the same for a given seed, project and version whichever command
asks, so generate's catalog is the one browse serves.

Fake data comes from faker, seeded, with a small provider of code-wiki vocabulary.
faker costs ~150 ms to import and ~15 MB, so only page bodies use it (browse serving a
page), imported on the first draw; one instance is kept per process, re-seeded before
every use so no draw depends on an earlier one. Titles, ids and dates come from
``random`` seeded the same way.
Results are cached: thousands of sessions with one seed draw the wiki once.

Must not: do I/O or read the clock (dates are drawn, never "now").
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.scenario.world import World

__all__ = ["Page", "Version", "catalog", "page_body", "versions"]

_TOPICS = (
    "Overview",
    "Getting Started",
    "Architecture Overview",
    "Project Structure",
    "Configuration",
    "Request Lifecycle",
    "Data Model",
    "Authentication",
    "Error Handling",
    "Command-Line Interface",
    "Plugin System",
    "Caching Layer",
    "Concurrency Model",
    "Storage Backends",
    "Event Bus",
    "Scheduler",
    "Logging and Observability",
    "Testing Strategy",
    "Build and Release",
    "Deployment",
    "Security Model",
    "Performance Tuning",
    "API Reference",
    "Database Migrations",
    "Internationalization",
    "Troubleshooting",
    "Contributing",
    "Glossary",
)
_PATTERNS = (
    "The {Noun} Module",
    "{Noun} Service",
    "How {Noun}s Are Resolved",
    "{Noun} Pipeline",
    "Working with {Noun}s",
    "{Noun} Internals",
)
_NOUNS = (
    "Router",
    "Parser",
    "Session",
    "Worker",
    "Index",
    "Renderer",
    "Adapter",
    "Registry",
    "Transport",
    "Queue",
    "Manifest",
    "Resolver",
    "Snapshot",
    "Gateway",
    "Codec",
)


@dataclass(frozen=True, slots=True)
class Page:
    """One catalog entry: a page of the wiki."""

    id: int
    title: str
    slug: str


@dataclass(frozen=True, slots=True)
class Version:
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


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


@functools.lru_cache(maxsize=256)
def catalog(seed: int, project: str, pages: int, version: int = 0) -> tuple[Page, ...]:
    """The pages of ``project``'s wiki, ids 1..pages in catalog order."""
    rng = _rng(seed, project, version)
    topics = list(_TOPICS)
    rng.shuffle(topics)
    titles: list[str] = ["Overview"] if pages else []
    seen = set(titles)
    for topic in topics:
        if len(titles) == pages:
            break
        if topic not in seen:
            titles.append(topic)
            seen.add(topic)
    while len(titles) < pages:
        title = rng.choice(_PATTERNS).format(Noun=rng.choice(_NOUNS))
        if title in seen:
            title = f"{title} {len(titles) + 1}"
        titles.append(title)
        seen.add(title)
    return tuple(Page(i, title, _slug(title)) for i, title in enumerate(titles, start=1))


@functools.lru_cache(maxsize=4096)
def page_body(seed: int, project: str, page: Page, version: int = 0) -> tuple[str, ...]:
    """The paragraphs of a page, drawn from the seed (plain text, not markup)."""
    fake = _faker()
    fake.seed_instance(_rng(seed, project, version, page.id).getrandbits(64))
    module = page.slug.replace("-", "_")
    paragraphs = [
        f"This page describes {page.title.lower()} in {project}. " + " ".join(fake.sentences(nb=3)),
        f"The code lives in `src/{module}/` and is exercised by `tests/test_{module}.py`. "
        + fake.paragraph(nb_sentences=4),
        fake.paragraph(nb_sentences=5),
    ]
    return tuple(paragraphs)


@functools.lru_cache(maxsize=256)
def _drawn_versions(seed: int, count: int) -> tuple[tuple[str, str], ...]:
    """Ids and dates of ``count`` versions, drawn with ``random`` (faker is not needed)."""
    rng = _rng(seed, "versions")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    stamps = sorted(start + dt.timedelta(seconds=rng.randrange(300 * 86400)) for _ in range(count))
    return tuple(
        (f"{stamp:%Y%m%d-%H%M%S}-{rng.getrandbits(24):06x}", stamp.strftime("%Y-%m-%dT%H:%M:%SZ"))
        for stamp in stamps
    )


def versions(world: World, seed: int) -> tuple[Version, ...]:
    """The world's wiki versions, oldest first, with drawn ids and dates where empty."""
    drawn = _drawn_versions(seed, len(world.wikis))
    listed = [
        Version(wiki.id or drawn_id, wiki.timestamp or drawn_stamp, wiki.current)
        for wiki, (drawn_id, drawn_stamp) in zip(world.wikis, drawn, strict=True)
    ]
    return tuple(sorted(listed, key=lambda v: v.timestamp))
