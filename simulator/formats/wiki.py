"""A wiki version's files: ``wiki.json``, the ``current`` pointer, the page files.

Owns: :class:`WikiIndex` and :class:`PageEntry` (wiki.json's shape, keys in zread's
order, ``group`` omitted when empty), :func:`encode_wiki` and :func:`decode_wiki`,
:func:`encode_current` and :func:`decode_current`, and :func:`page_file` (a page's file
name, ``<slug>.md``). wiki.json is written as Go's ``json.MarshalIndent(v, "", "  ")``
writes it (:mod:`simulator.formats.gojson`): 2-space indent, non-ASCII raw, no trailing
newline.

A decoded wiki.json is checked whole: its id and every slug a plain name, every page
file ``<slug>.md``, no slug twice, ``generated_at`` RFC 3339, a known level and
language. An encoded one is checked by the types alone: what the simulator writes comes
from a catalog and an id that were checked when the scenario loaded or the id was made.

Must not: do I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Final, Literal, Protocol, cast, runtime_checkable

import msgspec

from simulator.formats import gojson
from simulator.formats.bounds import BOM, FormatError, check_size, decode_json
from simulator.formats.ids import is_plain_name

WIKI_JSON: Final = "wiki.json"
CURRENT_PREFIX: Final = "versions/"

Level = Literal["Beginner", "Intermediate", "Advanced"]
_GO_TIME: Final = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})"
)
"""A pattern, not a compiled one: only a decode needs it (``re`` caches it), and a
command that reads no wiki.json pays nothing for it at start-up."""


class PageEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """One page of wiki.json, its keys in zread's order; ``group`` is omitted when empty."""

    slug: str
    title: str
    file: str
    section: str
    group: str = ""
    level: Level


class WikiIndex(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """wiki.json: a version's id, when it was generated (Go's UTC time), its language
    and its pages in catalog order."""

    id: str
    generated_at: str
    language: Literal["en", "zh"]
    pages: list[PageEntry]


@functools.cache
def _decoder() -> msgspec.json.Decoder[WikiIndex]:
    """Made at the first decode, not at start-up (most commands read no wiki.json)."""
    return msgspec.json.Decoder(WikiIndex)


@runtime_checkable
class WikiPage(Protocol):
    """A page as wiki.json lists it, whatever holds it (a scenario's catalog page, a
    :class:`PageEntry`); ``group`` is empty when the page has none."""

    @property
    def slug(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def section(self) -> str: ...

    @property
    def group(self) -> str: ...

    @property
    def level(self) -> str: ...


def wiki_index(
    wiki_id: str, generated_at: str, language: str, pages: Iterable[WikiPage]
) -> WikiIndex:
    """The wiki.json of a catalog's ``pages`` (levels and language as the scenario
    checked them when it loaded: any other language is ``en``)."""
    return WikiIndex(
        id=wiki_id,
        generated_at=generated_at,
        language="zh" if language == "zh" else "en",
        pages=[
            PageEntry(
                slug=page.slug,
                title=page.title,
                file=page_file(page.slug),
                section=page.section,
                group=page.group,
                level=cast(Level, page.level),
            )
            for page in pages
        ],
    )


def page_file(page_slug: str) -> str:
    """The file name of a page: ``<slug>.md``, beside wiki.json."""
    return f"{page_slug}.md"


def encode_wiki(index: WikiIndex) -> bytes:
    """wiki.json's bytes: keys in zread's order, 2-space indent, non-ASCII raw, no
    trailing newline."""
    return gojson.encode(index)


def decode_wiki(data: bytes, name: str = WIKI_JSON) -> WikiIndex:
    """A wiki.json (a UTF-8 BOM and surrounding white space allowed), or
    :class:`FormatError` naming ``name`` and what is wrong: too large or too deep, not
    JSON, a missing or unknown key, a wrong type, an unknown level or language, an id
    or slug that is not a plain name, a page file that is not ``<slug>.md``, two pages
    with one slug."""
    index = decode_json(data, _decoder(), "wiki.json", name)
    if not is_plain_name(index.id):
        raise FormatError(f"{name}: id {index.id!r} is not a directory name")
    if not re.fullmatch(_GO_TIME, index.generated_at):
        raise FormatError(f"{name}: generated_at {index.generated_at!r} is not RFC 3339")
    seen: set[str] = set()
    for i, page in enumerate(index.pages):
        where = f"{name}: pages[{i}]"
        if not is_plain_name(page.slug):
            raise FormatError(f"{where}: slug {page.slug!r} is not a file name")
        if page.file != page_file(page.slug):
            raise FormatError(f"{where}: file {page.file!r} is not {page_file(page.slug)!r}")
        if page.slug in seen:
            raise FormatError(f"{where}: slug {page.slug!r} is listed twice")
        seen.add(page.slug)
    return index


def encode_current(wiki_id: str) -> bytes:
    """The bytes of ``current``: ``versions/<id>``, no trailing newline, no BOM."""
    if not is_plain_name(wiki_id):
        raise ValueError(f"not a version id: {wiki_id!r}")
    return f"{CURRENT_PREFIX}{wiki_id}".encode()


def decode_current(data: bytes, name: str = "current") -> str | None:
    """The id ``current`` points at, or None when it is empty or not a pointer;
    :class:`FormatError` when it is larger than a pointer may be.

    Accepts what readers accept: a UTF-8 BOM, white space around, ``versions/<id>`` or
    a bare ``<id>``.
    """
    check_size(data, "current", name)
    try:
        text = data.removeprefix(BOM).decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    wiki_id = text.removeprefix(CURRENT_PREFIX)
    return wiki_id if is_plain_name(wiki_id) else None
