"""The ways a JSON text may spell a string, for finding one however it is written.

Owns: regular expressions (bytes) that match every spelling of a given string in JSON
text, whether the text is valid JSON or not: each character raw (UTF-8), as a
``\\uXXXX`` escape with its hex digits in either case (a surrogate pair above U+FFFF),
or as its short escape (``\\"``, ``\\\\``, ``\\/``, ``\\n`` ...), behind any number of
backslashes (a JSON string holding JSON escapes its escapes again, level by level);
and the tolerant undoing of those escapes, level by level (:func:`flatten`,
:func:`levels`, :func:`unescape`). :mod:`simulator.core.secrets`
finds API keys with them.

Must not: do I/O, or know what a secret is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Final

_SHORT_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "\b": "b",
    "\f": "f",
    "\n": "n",
    "\r": "r",
    "\t": "t",
}
_UNESCAPED: Final = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t"}


def _hex(code: int) -> bytes:
    """``code`` as four hex digits, each letter in either case."""
    return b"".join(
        f"[{d}{d.upper()}]".encode() if d.isalpha() else d.encode() for d in f"{code:04x}"
    )


def _escaped(char: str) -> bytes:
    """``\\uXXXX`` (a surrogate pair above U+FFFF) behind any number of backslashes."""
    code = ord(char)
    if code > 0xFFFF:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        return rb"\\+u" + _hex(high) + rb"\\+u" + _hex(low)
    return rb"\\+u" + _hex(code)


def spelling(*forms: str) -> bytes:
    """A regular expression (bytes) for every JSON spelling of one character, any of
    ``forms`` (a letter and its other cases)."""
    spellings = [re.escape(form.encode()) for form in forms]
    spellings += [_escaped(form) for form in forms]
    spellings += [
        rb"\\+" + re.escape(_SHORT_ESCAPES[form].encode())
        for form in forms
        if form in _SHORT_ESCAPES
    ]
    return b"(?:" + b"|".join(spellings) + b")"


def spelled(text: str) -> bytes:
    """A regular expression (bytes) for every JSON spelling of ``text``, exactly (no
    other case); ``text`` must encode to UTF-8 (no lone surrogate)."""
    return b"".join(spelling(char) for char in text)


@functools.cache
def _escapes() -> re.Pattern[bytes]:
    """One level of JSON escapes (a surrogate pair as one). Compiled when first needed:
    most processes never undo one."""
    return re.compile(
        rb"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
        rb"|\\u([0-9a-fA-F]{4})|\\(.)",
        re.S,
    )


def _undo(match: re.Match[bytes]) -> bytes:
    high, low, code, char = match.groups()
    if high is not None:
        pair = chr(int(high, 16)) + chr(int(low, 16))
        return pair.encode("utf-16", "surrogatepass").decode("utf-16").encode()
    if code is not None:
        return chr(int(code, 16)).encode("utf-8", "surrogatepass")
    return _UNESCAPED.get(char, char)


def flatten(data: bytes, rounds: int = 1) -> bytes:
    """``data`` with ``rounds`` levels of escapes undone (a JSON string holding JSON
    holds two). Tolerant: what is not an escape stays as it is."""
    for _ in range(rounds):
        if b"\\" not in data:
            break
        data = _escapes().sub(_undo, data)
    return data


def levels(data: bytes, rounds: int = 4) -> Iterator[bytes]:
    """``data``, then ``data`` with one level of escapes undone, then two ... up to
    ``rounds``, while there is a backslash left: what a spelling in it may read as."""
    yield data
    for _ in range(rounds):
        if b"\\" not in data:
            return
        data = _escapes().sub(_undo, data)
        yield data


def unescape(raw: bytes, quote: bytes) -> str | None:
    """A string as a JSON text spelled it between ``quote``\\ s, its escapes undone as
    deep as the quote says (``"`` one level, ``\\"`` two, ``\\\\\\"`` three); None
    when it is not UTF-8."""
    rounds = (quote.count(b"\\") + 1).bit_length()
    try:
        return flatten(raw, rounds).decode()
    except UnicodeDecodeError:
        return None
