"""Secrets kept out of what the simulator itself writes or answers.

Owns how an API key is hidden, two ways:

- **By name.** The value of every key whose name, decoded, ends in ``api_key`` in any
  case and any spelling Go's decoder may take for the field, and the ``value`` and
  ``initial`` of a config field whose ``json_key`` names one (what names a key, and
  where its value is, are :mod:`simulator.core.keynames`'). Hidden in decoded JSON
  (:func:`redact`) and in text, JSON or not (a cut line, single quotes, a JSON string
  holding JSON, ``api_key=`` in a URL).
- **By value.** :class:`Secrets`, the keys one session knows (the world's, HOME's
  ``config.yaml``'s, every one a line named), each replaced wherever it occurs in any
  JSON spelling (:mod:`simulator.core.spellings`: raw, ``\\uXXXX`` in either case,
  ``\\/``, escaped again inside a JSON string). A key found by name is added as it is
  found.

A hidden value becomes :data:`REDACTED`; an empty value stays empty, so "is a key
set?" can still be read. A line keeps every other byte as it came (no re-encoding),
except when a short value found by name has to go: then it is re-encoded as the
envelope encodes (compact, Go's escaping).

A value shorter than :data:`MIN_LENGTH` is hidden by name only, never looked for in
free text: one to three characters (``a``, ``42``, ``sk-``) occur by chance in state
names, numbers and other keys' values, so replacing them everywhere would garble every
line written and, by what it garbled, tell the value.

The events a session writes are zread's output and keep what zread shows, and a
virtual session's transcript keeps the lines byte for byte; what goes through here is
what the simulator writes or answers of them (journal, cassette, reports, control
answers, stderr); a recording also hides URL tokens and the user's patterns
(:mod:`simulator.core.redaction`).

Cost: a line holding no ``\\u`` (any backslash, if a key holds what a short escape
spells), no ``_k`` in either case and no known key is let through after a few substring
searches (the journal redacts every line it writes), and the same object again at
once (a session learns from each line before its journal writes it); the regular
expressions are compiled when first needed and run only on lines that hold a mark
(``benchmarks/redaction.py``).

Must not: do I/O.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from simulator.core.eventbytes import encode_vm
from simulator.core.keynames import (
    FIELD_KEYS,
    MARKS_TEXT,
    REDACTED,
    UNDERSCORE_K,
    VALUE_GROUPS,
    hidden,
    holds_name,
    is_key_name,
    key_value,
    named_values,
)
from simulator.core.spellings import levels, spelled, unescape

MIN_LENGTH: Final = 4
"""The shortest value looked for in free text (see the module docstring)."""

_R: Final = REDACTED.encode()
_SHORT_ESCAPED: Final = frozenset('"\\/\b\f\n\r\t')
"""What a short escape spells: a value holding one is marked by any backslash."""
_DECODER: Final = msgspec.json.Decoder()
_ADDING: Final = threading.Lock()
"""Held while a value is added: the recorder's threads share one registry."""


# -- by name -------------------------------------------------------------------------------


def redact(value: Any) -> Any:
    """``value`` (decoded JSON) with the value of every API key it names hidden, a
    string that holds a key and its value as text included; a new object."""
    if isinstance(value, str):
        if not _marked_text(value, MARKS_TEXT):
            return value
        data = value.encode("utf-8", "surrogatepass")
        return redact_line(data).decode("utf-8", "surrogatepass")
    if isinstance(value, list):
        return [redact(item) for item in value]
    if not isinstance(value, dict):
        return value
    field = is_key_name(value.get("json_key"))
    return {
        key: hidden(item) if is_key_name(key) or (field and key in FIELD_KEYS) else redact(item)
        for key, item in value.items()
    }


# -- by value ------------------------------------------------------------------------------


class _Known:
    """What one set of values is looked for with; shared by every registry that holds
    the same values (thousands of sessions of one scenario)."""

    __slots__ = ("_pattern", "escape", "needles_text", "plain", "values")

    def __init__(self, values: frozenset[str]) -> None:
        self.values = tuple(sorted(values, key=lambda value: (-len(value), value)))
        """Longest first: a value inside another is replaced after it."""
        self.plain = tuple(value.encode() for value in self.values)
        self.escape = b"\\" if any(_SHORT_ESCAPED.intersection(v) for v in self.values) else b"\\u"
        """The mark of an escaped value: ``\\u``, or any backslash when a value holds
        what a short escape spells."""
        self.needles_text = (self.escape.decode(), *MARKS_TEXT[1:], *self.values)
        self._pattern: re.Pattern[bytes] | None = None

    def pattern(self) -> re.Pattern[bytes]:
        """Every spelling of every value; compiled when a line holding a backslash
        first needs it (a value takes only a substring search otherwise)."""
        if self._pattern is None:
            spellings = b"|".join(spelled(value) for value in self.values)
            self._pattern = re.compile(spellings or b"(?!)", re.S)
        return self._pattern


@functools.lru_cache(maxsize=16)
def _known(values: frozenset[str]) -> _Known:
    return _Known(values)


MAX_LEARNED: Final = 32
"""The most values a registry learns from lines it reads; past it, the oldest learned
one is forgotten. A client that sends a new key on every line cannot make each line
dearer without end (every value is looked for in every line): the keys given to
:class:`Secrets` and to :meth:`Secrets.add` stay, and so do the last 32 a session saw."""


def _holds(line: bytes, needles: tuple[bytes, ...]) -> bool:
    # find(), not ``in``: bytes.__contains__ first tries its argument as an integer and
    # pays for the exception that fails; a loop, not any(): a generator costs more.
    find = line.find
    for needle in needles:  # noqa: SIM110
        if find(needle) >= 0:
            return True
    return False


def _marked(line: bytes, plain: tuple[bytes, ...] = (), escape: bytes = b"\\u") -> bool:
    """Whether ``line`` holds a mark of a name (:mod:`simulator.core.keynames`' marks),
    of an escaped value (``escape``) or one of ``plain``."""
    if line.find(escape) >= 0 or UNDERSCORE_K.search(line) is not None:
        return True
    return _holds(line, plain)


def _marked_text(text: str, needles: tuple[str, ...]) -> bool:
    for needle in needles:  # noqa: SIM110 (as _marked)
        if needle in text:
            return True
    return False


def _usable(value: str) -> bool:
    """Long enough to look for, and text that can be spelled (no lone surrogate)."""
    if len(value) < MIN_LENGTH or value == REDACTED:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


class Secrets:
    """The API keys one session (or one recording, one report) knows, and what it
    writes or answers redacted with them; see the module docstring.

    Safe to share between threads: a value is added under a lock, and each call reads
    the registry once.
    """

    __slots__ = ("_clean", "_known", "_learned", "_pinned")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._pinned = tuple(value for value in values if _usable(value))
        self._learned: tuple[str, ...] = ()
        self._known = _known(frozenset(self._pinned))
        self._clean: tuple[bytes, _Known] | None = None
        """The last line found to hold nothing, and what was looked for then: a session
        learns from each line and its journal writes the same object next."""

    @property
    def values(self) -> tuple[str, ...]:
        """The values looked for, longest first."""
        return self._known.values

    def add(self, value: str) -> None:
        """Look for ``value`` from now on (unless shorter than :data:`MIN_LENGTH`)."""
        if not _usable(value) or value in self._pinned:
            return
        with _ADDING:
            self._pinned = (*self._pinned, value)
            self._known = _known(frozenset((*self._pinned, *self._learned)))

    def _learn_value(self, value: str) -> None:
        """Look for ``value``, a key a line named, among the last :data:`MAX_LEARNED`."""
        if not _usable(value) or value in self._known.values:
            return
        with _ADDING:
            self._learned = (*self._learned, value)[-MAX_LEARNED:]
            self._known = _known(frozenset((*self._pinned, *self._learned)))

    def learn(self, line: bytes) -> None:
        """Add the keys ``line`` names, as :meth:`redact_line` would."""
        self.redact_line(line)

    def redact_line(self, line: bytes) -> bytes:
        """``line`` with every key hidden, by name and by value (the keys it names are
        added). A line that holds none comes back as it is (the same object)."""
        known, clean = self._known, self._clean
        if clean is not None and clean[0] is line and clean[1] is known:
            return line
        if not _marked(line, known.plain, known.escape):
            self._clean = (line, known)
            return line
        names = values = False
        for level in levels(line):  # the line, then its escapes undone level by level
            names = names or holds_name(level)
            values = values or _holds(level, known.plain)
        out = self._by_name(line) if names else line
        if values or self._known is not known:
            out = self._by_value(out)
        return out

    def redact_text(self, text: str) -> str:
        """``text`` (a stderr line, an error, a path) as :meth:`redact_line` redacts."""
        if not text or not _marked_text(text, self._known.needles_text):
            return text
        data = text.encode("utf-8", "surrogatepass")
        out = self.redact_line(data)
        return text if out is data else out.decode("utf-8", "surrogatepass")

    def redact(self, value: Any) -> Any:
        """``value`` (decoded JSON: an answer) with every key hidden, by name and, in
        every string, by value; a new object."""
        return self._each_string(redact(value))

    def _each_string(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, list):
            return [self._each_string(item) for item in value]
        if isinstance(value, dict):
            return {key: self._each_string(item) for key, item in value.items()}
        return value

    def _by_name(self, line: bytes) -> bytes:
        """The values keys name, hidden: where the text shows them, then what only
        decoded JSON shows (a config field's ``value``, a key whose value is a list)."""
        out, hidden = key_value().subn(self._hide_match, line)
        if not hidden:
            out = line
        found: list[str] = []
        try:
            doc = _DECODER.decode(out)
            named_values(doc, found)
        except (msgspec.DecodeError, RecursionError):
            return out
        short = False
        for value in found:
            if value and value != REDACTED:
                short = short or not _usable(value)
                self._learn_value(value)
        if short:  # too short to look for: only the decoded line tells where it is
            try:
                return encode_vm(redact(doc))
            except RecursionError:
                return out
        return out

    def _hide_match(self, match: re.Match[bytes]) -> bytes:
        group, quote = next(pair for pair in VALUE_GROUPS if match.group(pair[0]) is not None)
        raw = match.group(group)
        if raw == _R:
            return match.group(0)
        value = unescape(raw, match.group(quote) if quote else b"")
        if value is not None:
            self._learn_value(value)
        return match.string[match.start() : match.start(group)] + _R

    def _by_value(self, line: bytes) -> bytes:
        known = self._known
        if not known.values:
            return line
        if b"\\" not in line:
            out = line
            for plain in known.plain:
                if plain in out:
                    out = out.replace(plain, _R)
            return out
        out, count = known.pattern().subn(_R, line)
        return out if count else line


def redact_line(line: bytes) -> bytes:
    """``line`` with the value of every API key it names hidden, wherever in it that
    value occurs. A line without one comes back as it is (the same object)."""
    if not _marked(line):
        return line
    return Secrets().redact_line(line)
