"""What names an API key, in text and in decoded JSON, for :mod:`simulator.core.secrets`.

Owns: what counts as the name of an API key (every key whose name, decoded, ends in
``api_key`` in any case: ``llm_api_key``, ``LLM_API_KEY``, ``llm_\\u0061pi_key``,
``llm_api_\\u212aey`` with the Kelvin sign Go folds into ``k``: every spelling Go's
decoder may take for the field; and a config field whose ``json_key`` names one, whose
``value`` and ``initial`` are the key's), and where such a name's value is: in text,
JSON or not (:func:`key_value`: a cut line, single quotes, a JSON string holding JSON,
``api_key=`` in a URL), and in decoded JSON (:func:`is_key_name`, :func:`named_values`,
:func:`hidden`); and the marks a line that may hold a name shows (:data:`MARKS_TEXT`,
:data:`UNDERSCORE_K`, :func:`holds_name`), so that most lines are let through after a
few substring searches.

Must not: hide anything in a line or keep the keys it found (that is
:class:`simulator.core.secrets.Secrets`'s), or do I/O.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from simulator.core.spellings import spelling

REDACTED: Final = "***"
"""What a hidden value becomes."""

FIELD_KEYS: Final = ("value", "initial")
"""The members of a config field whose ``json_key`` names a key that hold the key."""
_NAME: Final = "api_key"
_KELVIN: Final = "\u212a".encode()
"""Go folds the Kelvin sign into ``k`` when it matches a key to a field."""
_MARKS: Final = (b"\\u", b"_k", b"_K", b"_" + _KELVIN)
"""A name that ends in ``api_key`` holds one of these however it is spelled (no short
escape spells one of its letters: ``\\"`` in an error text is no mark)."""
MARKS_TEXT: Final = tuple(mark.decode() for mark in _MARKS)
"""The marks of a name (an escape, ``_k`` in either case or with the Kelvin sign), as text."""
UNDERSCORE_K: Final = re.compile(b"_(?:[kK]|" + re.escape(_KELVIN) + b")")
"""The marks but ``\\u``, in one search (it skips from ``_`` to ``_``)."""


# -- in text -----------------------------------------------------------------------------

_QUOTE: Final = rb"""\\*["']"""


def _quoted(prefix: str) -> bytes:
    """A quoted value: its quote (``"``, ``'``, behind backslashes inside a JSON
    string) and what follows up to the same quote, or to the end of a cut line."""
    q, v = f"{prefix}q".encode(), f"{prefix}v".encode()
    return b"(?P<" + q + b">" + _QUOTE + b")(?P<" + v + rb">(?:(?!(?P=" + q + rb"))(?:[^\\]|\\.))+)"


def _bare(prefix: str) -> bytes:
    """A bare word, not null, true or false."""
    group = f"{prefix}b".encode()
    return b"(?P<" + group + rb""">(?!(?:null|true|false)\b)[^\s"',;:{}\[\]&#\\]+)"""


@functools.cache
def key_value() -> re.Pattern[bytes]:
    """A name that ends in ``api_key`` (any case, any spelling), its closing quote,
    ``:`` or ``=``, and its value: quoted, or a bare word. A name without quotes takes
    a bare word only after ``=`` (``?api_key=...``): after ``:`` it is prose
    (``llm_api_key: expected ...``)."""
    forms = {char: [char, char.upper()] if char.isalpha() else [char] for char in _NAME}
    forms["k"].append(_KELVIN.decode())
    name = b"".join(spelling(*forms[char]) for char in _NAME)
    return re.compile(
        name
        + b"(?:"
        + (_QUOTE + rb"\s*[:=]\s*(?:" + _quoted("") + b"|" + _bare("") + b")")
        + (rb"|\s*=\s*(?:" + _quoted("e") + b"|" + _bare("e") + b")")
        + (rb"|\s*:\s*" + _quoted("c"))
        + b")",
        re.S,
    )


VALUE_GROUPS: Final = (("v", "q"), ("b", ""), ("ev", "eq"), ("eb", ""), ("cv", "cq"))
"""The groups of :func:`key_value` a value may be in, each with its quote's."""


def holds_name(flat: bytes) -> bool:
    """Whether ``flat`` (a level of its escapes undone) may hold a name ending in
    ``api_key``."""
    if b"_k" not in flat and b"_K" not in flat and _KELVIN not in flat:
        return False
    return _NAME.encode() in flat.lower().replace(_KELVIN, b"k")


# -- in decoded JSON ---------------------------------------------------------------------


def is_key_name(key: object) -> bool:
    """Whether ``key``, a decoded object's key, names an API key."""
    return isinstance(key, str) and key.lower().endswith(_NAME)


def hidden(value: Any) -> Any:
    """``value`` (a key's) with every non-empty string in it hidden."""
    if isinstance(value, str):
        return REDACTED if value else value
    if isinstance(value, list):
        return [hidden(item) for item in value]
    if isinstance(value, dict):
        return {key: hidden(item) for key, item in value.items()}
    return value


def named_values(value: Any, found: list[str]) -> None:
    """Into ``found``: the strings ``value`` (decoded JSON) holds under a key's name."""
    if isinstance(value, list):
        for item in value:
            named_values(item, found)
    elif isinstance(value, dict):
        field = is_key_name(value.get("json_key"))
        for key, item in value.items():
            if is_key_name(key) or (field and key in FIELD_KEYS):
                _strings(item, found)
            else:
                named_values(item, found)


def _strings(value: Any, found: list[str]) -> None:
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            _strings(item, found)
