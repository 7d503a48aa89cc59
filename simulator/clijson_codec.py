"""The JSON of :mod:`simulator.clijson`, spelled as Go's ``encoding/json`` spells it.

Owns: turning a value into compact JSON text as Go writes it (:func:`marshal`) and JSON
text into a value as Go reads it (:func:`decode`), so a payload reads the same
whichever binary wrote it, and the two errors writing can raise: the root of clijson's
errors, :class:`ClijsonError`, and :class:`PayloadEncodeError` (they live here, below
:mod:`simulator.clijson`, which re-exports them, so that this module can raise them).

- Writing: compact; floats in Go's notation (``2``, ``1e-7``, ``1e+21``, ``-0``); lists
  and tuples as arrays; dict keys in insertion order (a dict stands for a Go struct),
  str or int keys only; a lone surrogate, which UTF-8 cannot carry, is written
  ``\\ufffd`` as Go writes invalid UTF-8. NaN, infinities, cycles and values JSON has
  no type for raise :class:`PayloadEncodeError`; nesting has no limit.
- Reading: invalid UTF-8 and an escaped lone surrogate are U+FFFD; NaN, Infinity and
  numbers beyond a float are refused with a ValueError, nesting deeper than Python's
  recursion limit with a RecursionError (:mod:`simulator.clijson` words both).

Must not: know about markers, frames or writers (that is :mod:`simulator.clijson`'s),
escape for HTML (every framing path does that once), do I/O, or import anything else
from the package: with :mod:`simulator.clijson` it is usable alone.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Final, NoReturn

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_GO_E_EXPONENT_LO, _GO_E_EXPONENT_HI = 1e-6, 1e21
_FLOAT_MAX_DIGITS = len(str(int(sys.float_info.max)))
"""The digits of the largest integer a float holds: a longer one is out of range."""
_SHOWN_MAX = 40
"""The characters of a refused number its error shows (a number may be megabytes)."""


class ClijsonError(Exception):
    """The root of this module's errors."""


class PayloadEncodeError(ClijsonError, TypeError, ValueError):
    """A value JSON cannot carry, as Go's ``UnsupportedTypeError`` (a type JSON has
    no form for, a dict key neither str nor int) or ``UnsupportedValueError`` (NaN,
    an infinity, a cycle). Nothing was written. Also a TypeError and a ValueError, so
    code that caught what ``json.dumps`` raises still catches it."""


# -- writing -----------------------------------------------------------------------------


def _unencodable(reason: str) -> NoReturn:
    raise PayloadEncodeError(f"clijson: payload does not encode: {reason}")


def _go_float(value: float) -> str:
    """A float as Go's encoding/json writes a float64.

    The shortest digits that read back as the same float (``repr``'s), in fixed
    notation, or in exponent notation when ``abs(value)`` is below 1e-6 or at least
    1e21, with Go's exponent: ``e-7``, ``e-10``, ``e+21``.
    """
    value = float(value)
    if not math.isfinite(value):
        go_name = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        _unencodable(f"unsupported value: {go_name}")
    text = repr(value)
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < _GO_E_EXPONENT_LO or magnitude >= _GO_E_EXPONENT_HI):
        # repr is in exponent form here ("1e-07", "1.5e+300"); Go drops the leading
        # zero of a two-digit negative exponent only.
        mantissa, _, exponent = text.partition("e")
        if exponent.startswith("-0"):
            exponent = "-" + exponent[2:]
        return f"{mantissa}e{exponent}"
    if "e" in text:  # 1e16 <= |value| < 1e21 or 1e-6 <= |value| < 1e-4
        return format(Decimal(text), "f")
    return text.removesuffix(".0")


def _string(text: str) -> str:
    # The C encoder escapes as Go does ("\"", "\\", \b \f \n \r \t, other controls
    # as \u00XX, lowercase) when non-ASCII is left alone; HTML escaping comes later.
    return json.dumps(text, ensure_ascii=False)


def _integer(value: int) -> str:
    try:
        return int.__repr__(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        _unencodable(f"unsupported value: an integer of {value.bit_length()} bits")


def _key(key: object) -> str:
    if isinstance(key, str):
        return _string(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return f'"{_integer(key)}"'  # Go writes an integer map key as a string
    _unencodable(f"unsupported map key type: {type(key).__name__}")


def _scalar(value: object) -> str | None:
    """``value`` as JSON if it is a string, null, a boolean or a number, else None."""
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _integer(value)
    if isinstance(value, float):
        return _go_float(value)
    return None


class _Open:
    """A list or dict being written: what is left of it."""

    __slots__ = ("ident", "is_object", "items", "started")

    def __init__(self, items: Iterator[Any], is_object: bool, ident: int) -> None:
        self.items, self.is_object, self.ident, self.started = items, is_object, ident, False


def _opened(value: object, on_path: set[int]) -> _Open:
    """``value``, a list, tuple or dict, as one being written, its identity now on the
    path from the top; a cycle or a value JSON has no type for is refused."""
    if not isinstance(value, dict | list | tuple):
        _unencodable(f"unsupported type: {type(value).__name__}")
    ident = id(value)
    if ident in on_path:
        _unencodable(f"unsupported value: encountered a cycle via {type(value).__name__}")
    on_path.add(ident)
    if isinstance(value, dict):
        return _Open(iter(value.items()), True, ident)
    return _Open(iter(value), False, ident)


_FINISHED: Final = object()
"""What :func:`_following` gives when the outermost value is written."""


def _following(stack: list[_Open], on_path: set[int], out: list[str]) -> object:
    """The next value to write, with the comma and key before it written; each list or
    dict that ends on the way closed; :data:`_FINISHED` when nothing is left open."""
    while stack:
        top = stack[-1]
        try:
            item = next(top.items)
        except StopIteration:
            stack.pop()
            on_path.discard(top.ident)
            out.append("}" if top.is_object else "]")
            continue
        if top.started:
            out.append(",")
        top.started = True
        if not top.is_object:
            return item
        key, value = item
        out.append(_key(key))
        out.append(":")
        return value
    return _FINISHED


def marshal(obj: Any) -> bytes:
    """``obj`` as compact JSON the way Go's encoding/json writes it (HTML escaping
    aside: :mod:`simulator.clijson` does that for every path).

    Iterative, so nesting is limited by memory only, as in Go.
    """
    out: list[str] = []
    stack: list[_Open] = []
    on_path: set[int] = set()
    value: object = obj
    while value is not _FINISHED:
        scalar = _scalar(value)
        if scalar is None:
            opened = _opened(value, on_path)
            out.append("{" if opened.is_object else "[")
            stack.append(opened)
        else:
            out.append(scalar)
        value = _following(stack, on_path, out)
    text = "".join(out)
    if _SURROGATE.search(text):  # only inside strings; UTF-8 cannot carry them
        text = _SURROGATE.sub(lambda _: "\\ufffd", text)
    return text.encode("utf-8")


# -- reading -----------------------------------------------------------------------------


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"invalid literal {name}: JSON has no NaN or Infinity")


def _out_of_range(text: str) -> NoReturn:
    shown = text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 3] + "..."
    raise ValueError(f"number {shown} is out of the range of a float")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        _out_of_range(text)
    return value


def _float_int(text: str) -> int:
    """An integer, refused as Go refuses it when a float64 cannot hold it (it rounds to
    an infinity); never int()'s own refusal past 4,300 digits."""
    if len(text.lstrip("-")) <= _FLOAT_MAX_DIGITS:
        value = int(text)
        try:
            float(value)
        except OverflowError:
            pass
        else:
            return value
    _out_of_range(text)


def _replace_surrogates(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _without_surrogates(value: Any) -> Any:
    """``value`` (fresh from json.loads) with each surrogate in its strings, keys
    included, as U+FFFD; changed in place, iteratively (it may nest deeply)."""
    if isinstance(value, str):
        return _replace_surrogates(value)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            for index, element in enumerate(item):
                if isinstance(element, str):
                    item[index] = _replace_surrogates(element)
                elif isinstance(element, list | dict):
                    stack.append(element)
        elif isinstance(item, dict):
            if any(_SURROGATE.search(key) for key in item):
                pairs = list(item.items())
                item.clear()
                item.update((_replace_surrogates(key), element) for key, element in pairs)
            for key, element in item.items():
                if isinstance(element, str):
                    item[key] = _replace_surrogates(element)
                elif isinstance(element, list | dict):
                    stack.append(element)
    return value


_DECODER: Final = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_int=_float_int, parse_float=_finite_float
)
"""What :func:`decode` reads with (``json.loads`` with these makes one every call)."""


def decode(payload: bytes) -> Any:
    """``payload`` decoded as Go's decoder reads it: each invalid UTF-8 byte and each
    escaped lone surrogate in a string is U+FFFD; NaN, Infinity and numbers beyond a
    float are refused (ValueError), and so is nesting beyond the recursion limit
    (RecursionError)."""
    text = payload.decode("utf-8", "surrogateescape")  # an invalid byte: one surrogate
    value = _DECODER.decode(text)
    if _SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text):
        value = _without_surrogates(value)
    return value
