"""The names zread gives things: version ids, page slugs, levels, Go's timestamps.

Owns: the reading levels a page may have (:data:`LEVELS`), :func:`is_plain_name` (one
safe path component: what every id and slug must be before it names a file), zread's
version ids (local time ``YYYY-MM-DD-HHMMSS``:
:func:`version_id`, :func:`next_version_id`), page slugs (:func:`slug`), and times as
Go writes them (:func:`go_time`).

Slugs come from python-slugify (``lowercase=True``, ``regex_pattern=r'[^-a-z0-9_]+'``),
which reproduces every slug seen in zread's output: Chinese becomes pinyin through
text-unidecode, ASCII letters run into the first syllable, underscores stay. It costs
~30 ms to import (with the patterns it compiles), so it is imported on the first title
that needs it: a title of printable ASCII without ``&``, ``'`` or ``,`` (what its entity,
quote and number rules act on) is slugged here by the rest of its pipeline, which for
such a title is lowercase, each run of other characters one ``-``, and ``-`` stripped
(a test holds the two to the same slug for every such title).

Must not: do I/O or read the clock (a caller hands in the time).
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Callable, Container
from typing import Final

LEVELS: Final = ("Beginner", "Intermediate", "Advanced")
"""The reading levels a wiki page may have (wiki.json's ``level``), by name."""

_VERSION_ID_FORMAT: Final = "%Y-%m-%d-%H%M%S"
_TWO_DIGITS: Final = tuple(f"{n:02d}" for n in range(60))
_MAX_NAME: Final = 200


def is_plain_name(name: str) -> bool:
    """Whether ``name`` is one plain path component: not empty, not ``.``/``..``, no
    separator, space or control character, at most 200 bytes in UTF-8 (a file name may
    have 255, and a temporary file's name adds to it)."""
    # (a printable character that is a space is " " alone: the others are not printable)
    return (
        name.isprintable()
        and " " not in name
        and "/" not in name
        and "\\" not in name
        and name not in ("", ".", "..")
        and len(name.encode("utf-8", "surrogatepass")) <= _MAX_NAME
    )


def version_id(local: dt.datetime) -> str:
    """zread's id of a wiki version made at ``local`` (wall-clock time, kept as given):
    ``YYYY-MM-DD-HHMMSS``."""
    return local.strftime(_VERSION_ID_FORMAT)


def local_zone() -> tuple[int, int, tuple[str, str]]:
    """The local time zone in effect (as the last ``time.tzset`` read ``TZ``): the key
    of what is kept of a local time's conversion."""
    return time.timezone, time.altzone, time.tzname


def version_time(name: str) -> str | None:
    """The UTC time a version id names (its local time), as Go writes it to the second;
    None when ``name`` is not a version id. Kept, by zone: each start of a session in a
    project dates the same versions again."""
    return _version_time(name, local_zone())


@functools.lru_cache(maxsize=8192)
def _version_time(name: str, zone: tuple[int, int, tuple[str, str]]) -> str | None:
    digits = name[:4] + name[5:7] + name[8:10] + name[11:]
    if len(name) != 17 or name[4] + name[7] + name[10] != "---" or not digits.isascii():
        return None
    if not digits.isdigit() or int(name[15:]) > 59:
        return None
    minute = _minute_utc(name[:15])
    return None if minute is None else f"{minute}:{name[15:]}Z"


def _minute_utc(prefix: str) -> str | None:
    """``YYYY-MM-DD-HHMM`` of local time as UTC's ``YYYY-MM-DDTHH:MM``."""
    try:
        local = dt.datetime(
            int(prefix[:4]),
            int(prefix[5:7]),
            int(prefix[8:10]),
            int(prefix[11:13]),
            int(prefix[13:]),
        )
        return f"{local.astimezone(dt.UTC):%Y-%m-%dT%H:%M}"
    except (ValueError, OverflowError, OSError):  # not a date, or past what the platform converts
        return None


def next_version_id(local: dt.datetime, taken: Container[str], skip: int = 0) -> str:
    """The id of the first whole second at or after ``local`` that ``taken`` does not
    hold, passing over ``skip`` free ones (a claim that lost a race tries the next)."""
    moment = local.replace(second=0, microsecond=0)
    second = local.second
    while True:  # a minute at a time: the seconds are two digits on the minute's id
        minute = version_id(moment)[:-2]
        for ss in range(second, 60):
            candidate = minute + _TWO_DIGITS[ss]
            if candidate not in taken:
                if skip <= 0:
                    return candidate
                skip -= 1
        moment += dt.timedelta(minutes=1)
        second = 0


def slug(n: int, title: str) -> str:
    """zread's slug of the ``n``-th page (1-based) titled ``title``.

    ``项目概览`` at 1 is ``1-xiang-mu-gai-lan``; ``Quick Start`` at 2 is
    ``2-quick-start``. Two pages of one wiki never share a slug, whatever their titles:
    their ``n`` differ. A title with nothing to keep (``"!!!"``) gives ``"<n>-"``, the
    formula applied as it stands. A slug is always a plain name.
    """
    if n < 1:
        raise ValueError(f"page numbers start at 1, not {n}")
    return f"{n}-" + _title_slug(title)


@functools.cache
def _slugify() -> Callable[..., str]:
    import importlib.util

    from slugify import slugify

    if "backend" not in slugify.__code__.co_varnames:  # an older one: no choice to make
        return slugify
    # Its "auto" backend looks for unidecode again on every title that is not ASCII
    # (~0.15 ms when it is absent): the same choice, made once.
    found = importlib.util.find_spec("unidecode") is not None
    return functools.partial(slugify, backend="unidecode" if found else "text-unidecode")


_SLUG_MAX: Final = 150
_LIBRARY_ONLY: Final = frozenset("&',")
"""What python-slugify's entity, quote and number rules act on in an ASCII title."""


@functools.lru_cache(maxsize=4096)
def _title_slug(title: str) -> str:
    """The slug of a title (without its number): drawn titles come from a few hundred,
    and python-slugify takes ~15 us for one; a load run makes thousands of catalogs.
    At most 150 characters, so a page's file name stays a plain name."""
    if title.isascii() and title.isprintable() and _LIBRARY_ONLY.isdisjoint(title):
        return _ascii_slug(title)
    return str(
        _slugify()(title, lowercase=True, regex_pattern=r"[^-a-z0-9_]+", max_length=_SLUG_MAX)
    )


def _ascii_slug(title: str) -> str:
    """python-slugify's slug of a printable ASCII title without ``&``, ``'`` or ``,``."""
    import re

    text = re.sub(r"-{2,}", "-", re.sub(r"[^-a-z0-9_]+", "-", title.lower())).strip("-")
    return text if len(text) < _SLUG_MAX else text[:_SLUG_MAX].strip("-")


def go_time(utc: dt.datetime, nanos: int | None = None) -> str:
    """``utc`` as Go's ``time.RFC3339Nano`` writes a UTC time (``time.Time``'s JSON).

    ``nanos`` is the nanoseconds within the second (0..999999999) and replaces the
    datetime's microseconds; None takes them from the datetime. The fraction is
    written with its trailing zeros removed and left out when it is zero, as Go does:
    ``...T19:02:13.183259466Z``, ``...T19:02:13.5Z``, ``...T19:02:13Z``. A naive
    datetime is taken as UTC; an aware one is converted.
    """
    if utc.tzinfo is not None:
        utc = utc.astimezone(dt.UTC)
    if nanos is None:
        nanos = utc.microsecond * 1000
    if not 0 <= nanos <= 999_999_999:
        raise ValueError(f"nanos must be 0-999999999, not {nanos}")
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{utc:%Y-%m-%dT%H:%M:%S}{fraction}Z"
