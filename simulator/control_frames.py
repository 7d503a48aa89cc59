"""The control channel's bytes: a frame as Go writes it, a line as it comes.

Owns: encoding a frame (:func:`encode`: compact, keys in insertion order, non-ASCII as
UTF-8, ``<`` ``>`` ``&`` as \\u003c \\u003e \\u0026 and U+2028/U+2029 escaped, as
Go's encoding/json writes them; refused with :class:`Unencodable` what Go cannot
marshal or JSON cannot hold), decoding a line whatever it holds (:func:`decode`: any
number, any nesting, any bytes) and naming what a decoded frame cannot hold
(:func:`frame_problem`): the error texts of :mod:`simulator.control`.

Decoding never stumbles on the frame's contents: a number of more than 4,300 digits
(where Python's ``int()`` stops) or beyond a float's range is decoded as a marker, a
frame nested deeper than the decoder goes is read to the depth that names it (its
type, its request_id and its request's subtype), bytes that are not UTF-8 are read as
lone surrogates; each is then a problem of the frame, never an exception.

Must not: know about requests, handlers or a transport (that is
:class:`simulator.control.Conn`'s).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, NoReturn

__all__ = [
    "CONTROL_TYPES",
    "INVALID_STRING",
    "MAX_DEPTH",
    "NOT_A_FRAME",
    "NOT_UTF8",
    "NUMBER_OUT_OF_RANGE",
    "TOO_DEEP",
    "Unencodable",
    "decode",
    "encode",
    "error_text",
    "frame_problem",
    "has_surrogate",
    "id_back",
    "kind_of",
]

CONTROL_TYPES = frozenset({"control_request", "control_response", "control_cancel_request"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_GO_ESCAPED = re.compile("[<>&\u2028\u2029]")

INVALID_STRING = "control: invalid string (lone surrogate)"
NOT_UTF8 = "control: invalid string (bytes that are not UTF-8)"
NUMBER_OUT_OF_RANGE = "control: number out of range (beyond a 64-bit float: at most ±1.8e308)"
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a frame may have (the frame itself is 1)."""
TOO_DEEP = f"control: frame nested deeper than {MAX_DEPTH} levels"
NOT_A_FRAME = (
    "control: not a control frame (one JSON object a line, whose type is "
    "control_request, control_response or control_cancel_request)"
)

_FLOAT_MAX = int(sys.float_info.max)
_FLOAT_MAX_DIGITS = len(str(_FLOAT_MAX))
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_SUSPECT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]|\d{300}|\d[eE]")
"""What a line holding a lone surrogate (escaped or not) or a number out of range must
hold somewhere: a run of 300 digits or an exponent."""
_KEPT_LEVELS = 2
"""How deep a frame too deep for the decoder is read to answer it: its type and
request_id (level 1) and its request's subtype (level 2)."""


class Unencodable(Exception):
    """A value the frame encoder refuses; the message says why."""


# -- the encoder ------------------------------------------------------------------


def _go_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _check_keys(value: object) -> None:
    """Refuse object keys Go cannot marshal (only str and int), or int keys whose text
    is another key of the same object. No recursion: the walk goes as deep as needed."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if id(item) in seen:
                continue  # shared or cyclic: json.dumps judges cycles
            seen.add(id(item))
            names: set[str] = set()
            for key in item:
                if isinstance(key, str):
                    name = key
                elif isinstance(key, int) and not isinstance(key, bool):
                    name = int.__repr__(key)
                else:
                    raise Unencodable(f"unsupported object key type {type(key).__name__}")
                if name in names:
                    raise Unencodable(f"duplicate object key {name!r}")
                names.add(name)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(item)


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What :func:`encode` writes with (``json.dumps`` with these makes one every call)."""


def encode(frame: dict[str, Any]) -> bytes:
    """One frame as Go writes it (see the module docstring), or Unencodable."""
    try:
        _check_keys(frame)
        text = _ENCODER.encode(frame)
    except Unencodable:
        raise
    except Exception as exc:  # TypeError, ValueError, RecursionError, a container's own
        raise Unencodable(error_text(exc)) from None
    if "<" in text or ">" in text or "&" in text or not text.isascii():
        text = _GO_ESCAPED.sub(_go_escape, text)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:  # only a lone surrogate is not UTF-8
        raise Unencodable(INVALID_STRING) from None


# -- the decoder ------------------------------------------------------------------


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"not JSON: {name}")


class _OutOfRange:
    """Where a number no 64-bit float holds was (decoding goes on, the frame is refused)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<number out of range>"


_OUT_OF_RANGE = _OutOfRange()


def _parse_int(text: str) -> int | _OutOfRange:
    """An integer of any length: never int()'s limit of 4,300 digits."""
    if len(text.lstrip("-")) > _FLOAT_MAX_DIGITS:
        return _OUT_OF_RANGE
    value = int(text)
    return _OUT_OF_RANGE if abs(value) > _FLOAT_MAX else value


def _parse_float(text: str) -> float | _OutOfRange:
    value = float(text)
    return _OUT_OF_RANGE if value in (float("inf"), float("-inf")) else value


_DECODER = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_int=_parse_int, parse_float=_parse_float
)
"""What :func:`decode` reads with (``json.loads`` with these makes one every call)."""


def _loads(text: str) -> object:
    """The JSON value of ``text``; ValueError("not JSON ...") when it has none."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError:
        raise ValueError("not JSON") from None


def decode(line: object) -> tuple[object, str]:
    """The JSON value of a line and what in it no frame may hold (``""``: nothing;
    :func:`frame_problem`); ValueError when it has none."""
    problem = ""
    if isinstance(line, bytes | bytearray | memoryview):
        # UTF-8 only (json.loads would guess UTF-16 or UTF-32 from the bytes); a byte
        # that is not UTF-8 becomes a lone surrogate, and the frame is refused.
        raw = bytes(line)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line, problem = raw.decode("utf-8", "surrogateescape"), NOT_UTF8
    if not isinstance(line, str):
        raise ValueError(f"not a line: {type(line).__name__}")
    try:
        value = _loads(line)
    except RecursionError:
        # Deeper than the decoder goes: read what names the frame, the rest left out.
        shallow = _shallow(line, _KEPT_LEVELS)
        if shallow is None:
            raise ValueError("not JSON") from None
        return _loads(shallow), problem or TOO_DEEP
    if not problem and _suspect(line):
        problem = frame_problem(value)
    return value, problem


def _suspect(text: str) -> bool:
    """Whether ``text`` may hold what :func:`frame_problem` looks for (most lines do not:
    the walk is left out for them)."""
    return _SUSPECT.search(text) is not None or text.count("[") + text.count("{") > MAX_DEPTH


def _shallow(text: str, levels: int) -> str | None:
    """``text`` with every array and object below ``levels`` of nesting written as
    ``null``; None when its brackets do not balance (it is not JSON)."""
    pieces: list[str] = []
    depth = kept_to = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth == levels + 1:
                pieces.append(text[kept_to : match.start()])
        else:
            if depth == levels + 1:
                pieces.append("null")
                kept_to = match.end()
            depth -= 1
            if depth < 0:
                return None
    if depth:
        return None
    pieces.append(text[kept_to:])
    return "".join(pieces)


def error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails still has a name
        text = ""
    return text or type(exc).__name__


def frame_problem(value: object) -> str:
    """What in decoded JSON a frame cannot hold, as its error text (``""``: nothing),
    in this order: a number out of range, nesting deeper than :data:`MAX_DEPTH` (what
    lies below is not looked at), a lone surrogate in a string or a key."""
    out_of_range = deep = surrogate = False
    search = _SURROGATE.search
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:  # no recursion: json.loads accepts nesting deeper than a walk could take
        item, depth = stack.pop()
        if isinstance(item, str):
            surrogate = surrogate or search(item) is not None
        elif item is _OUT_OF_RANGE:
            out_of_range = True
        elif depth > MAX_DEPTH:
            deep = deep or isinstance(item, dict | list)
        elif isinstance(item, dict):
            for key, child in item.items():
                surrogate = surrogate or search(key) is not None
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend([(child, depth + 1) for child in item])
    if out_of_range:
        return NUMBER_OUT_OF_RANGE
    return TOO_DEEP if deep else INVALID_STRING if surrogate else ""


def id_back(request_id: object) -> object:
    """A request_id as an error response writes it back: a string or a number that
    fits, as sent; anything else (null, missing, a lone surrogate) as null."""
    if isinstance(request_id, str):
        return None if _SURROGATE.search(request_id) else request_id
    if isinstance(request_id, int | float) and not isinstance(request_id, bool):
        return request_id
    return None


def kind_of(value: object) -> str:
    """What a JSON value is, in a sentence: "null", "a number", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | _OutOfRange):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else "a string"


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (it cannot be written as UTF-8)."""
    return _SURROGATE.search(text) is not None
