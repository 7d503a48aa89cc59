"""The bounds every decoder of a file keeps, and the error past them.

Owns: :class:`FormatError` (a file that cannot be used: the user's or the
repository's, exit 2), the size limit of each file the simulator reads
(:data:`LIMITS`), :func:`check_size`, :func:`check_json_nesting` and
:func:`decode_json`, the bounded JSON decoding every JSON format shares; and
:func:`explain` and :func:`in_words`, msgspec's validation messages (``Expected
`int`, got `str` - at `$.a```) as the simulator says them (``a: expected an integer,
got a string``), for every reader that validates with msgspec.

A reader asks :data:`LIMITS` how much to read at most (one byte more than the limit,
so a file past it is known to be past it) and hands the bytes to the format's decoder,
which checks them again: the bound holds whoever calls.

Nesting is counted before decoding: msgspec's own guard is Python's recursion limit,
which it reports as a :class:`RecursionError` at a depth that depends on the
interpreter. Counting takes a regular expression (strings out) and a translate (all
but brackets out), both in C, then one pass over what is left.

Must not: do I/O.
"""

from __future__ import annotations

import re
from typing import Final, TypeVar

import msgspec

from simulator.errors import ConfigurationError

T = TypeVar("T")

BOM: Final = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark, which readers of zread's files strip."""

MAX_NESTING: Final = 32
"""The deepest a JSON or YAML document may nest (zread's own files nest 3 deep)."""

LIMITS: Final[dict[str, int]] = {
    "current": 4 << 10,
    "wiki.json": 8 << 20,
    "page": 8 << 20,
    "config.yaml": 64 << 10,
    "login.json": 64 << 10,
    "journal": 256 << 20,
    "cassette": 256 << 20,
    "scenario": 4 << 20,
}
"""The most bytes the simulator reads of each kind of file."""


class FormatError(ConfigurationError, ValueError):
    """A file that cannot be used: the message names it and what is wrong (exit 2 when
    it reaches the command line; nothing is written over it). Also a
    :class:`ValueError`, as any malformed input is."""


def _size(limit: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


def check_size(data: bytes, kind: str, name: str | None = None) -> None:
    """:class:`FormatError` when ``data`` is larger than a ``kind`` file may be."""
    if len(data) > LIMITS[kind]:
        raise too_large(kind, name)


def too_large(kind: str, name: str | None = None) -> FormatError:
    """The error of a ``kind`` file larger than it may be: :func:`check_size`'s, and a
    reader's that counts the bytes as it reads them."""
    return FormatError(f"{name or kind}: larger than {_size(LIMITS[kind])}, the limit for {kind}")


_JSON_STRING: Final = rb'"(?:[^"\\]|\\.?)*"?'
"""A JSON string, or an unterminated one to the end of the data: a match never fails
once it has begun, so the scan stays linear whatever the bytes (a pattern that needed
the closing quote would rescan from every quote of ``"\\"\\"...``). A pattern,
compiled at the first deep document (``re`` caches it)."""
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def check_json_nesting(data: bytes, name: str, limit: int = MAX_NESTING) -> None:
    """:class:`FormatError` when the JSON in ``data`` nests deeper than ``limit``
    (strings are skipped, so a bracket inside one does not count)."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # too few brackets to nest that deep: the common case, no scan
    brackets = re.sub(_JSON_STRING, b"", data, flags=re.DOTALL).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            if depth > limit:
                raise FormatError(f"{name}: nested deeper than {limit} levels")
        else:
            depth -= 1


def decode_json(data: bytes, decoder: msgspec.json.Decoder[T], kind: str, name: str) -> T:
    """``data`` decoded by ``decoder``, bounded: a BOM and white space around allowed,
    at most the size of a ``kind`` file, nested at most :data:`MAX_NESTING` deep;
    :class:`FormatError` naming ``name`` and the problem otherwise."""
    check_size(data, kind, name)
    data = data.removeprefix(BOM)
    check_json_nesting(data, name)
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as err:
        raise FormatError(f"{name}: {in_words(err)}") from None
    except msgspec.DecodeError as err:
        raise FormatError(f"{name}: not JSON: {err}") from None
    except RecursionError:  # pragma: no cover - the nesting check comes first
        raise FormatError(f"{name}: nested deeper than {MAX_NESTING} levels") from None


_TYPE_WORDS: Final = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
}
_AT: Final = " - at `$"


def _type_words(match: re.Match[str]) -> str:
    return " or ".join(_TYPE_WORDS.get(name, name) for name in match[1].split(" | "))


def explain(err: Exception | str) -> tuple[str, str]:
    """msgspec's validation message as (key, reason) in the simulator's words:
    ``Expected `int`, got `str` - at `$.pages[0].level``` is ``("pages[0].level",
    "expected an integer, got a string")``; ``Object contains unknown field `z``` is
    ``("z", "unknown key")``; ``Object missing required field `a``` is ``("a",
    "missing")``. The key is "" when the message names none."""
    reason, _, at = str(err).partition(_AT)
    key = at.removesuffix("`").removeprefix(".").replace("[...]", "[<key>]")
    field = re.fullmatch(r"Object (contains unknown|missing required) field `([^`]*)`", reason)
    if field:
        key = f"{key}.{field[2]}" if key else field[2]
        reason = "unknown key" if field[1] == "contains unknown" else "missing"
    elif reason.startswith("Invalid enum value "):
        value = reason.removeprefix("Invalid enum value ")
        value = value if len(value) <= 40 else value[:39] + "…"
        reason = f"{value} is not one of the allowed values"
    else:
        reason = re.sub(r"`([^`]*)`", _type_words, reason)
        if reason[:2].istitle():  # "Expected ...", not "JSON ..."
            reason = reason[:1].lower() + reason[1:]
    return key, reason


def in_words(err: Exception | str) -> str:
    """:func:`explain` as one text: ``key: reason``, or the reason alone."""
    key, reason = explain(err)
    return f"{key}: {reason}" if key else reason
