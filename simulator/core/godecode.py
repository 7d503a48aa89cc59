"""Which lines need Go's rules applied by hand, and a command line's members as Go reads them.

Owns, for the envelope (which sends only the lines msgspec alone would decode
otherwise): :func:`command_members`, a command line's ``type`` and ``params`` as Go
assigns them; :func:`spelled_exactly` and :func:`command_keys_exact`, which tell the
lines whose keys need no rule of Go's; and :class:`TypePlan`, kept per params type
(:func:`plan_of`, :data:`PLANS`), which tells the params msgspec reads as Go would from
the others, at the cost of one decode. The rules themselves (folding, assigning, nulls,
zeros; :func:`normalise`, :func:`fold`, :data:`MISSING`, :class:`Plan`) are
:mod:`simulator.core.goassign`'s, re-exported here.

Must not: decide what is refused or word an error (the envelope does), hold state
between calls but its plans, or be given a line that is not JSON (the envelope checks).
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Final

import msgspec

from simulator.core.goassign import (
    StructPlan,
    holds_struct,
    json_nodes,
    match,
    merges,
    plan_for,
)

COMMAND_FIELDS: Final = ("type", "params")
_WS: Final = re.compile(r"[ \t\n\r]*")


def _skip(text: str, at: int) -> int:
    found = _WS.match(text, at)
    assert found is not None  # the pattern matches the empty string
    return found.end()


def command_members(line: str) -> tuple[str, str]:
    """The JSON text of a command line's ``type`` and ``params`` ("" when left out), as
    Go assigns them: keys matched as fields are, the last one wins, and a ``null`` type
    leaves the type as it was (``params`` is JSON text to Go: ``null`` is kept)."""
    names = {name: name for name in COMMAND_FIELDS}
    nodes = json_nodes()
    scanstring = nodes.parse_string  # json's own string scanner, C where it can be
    at = _skip(line, _skip(line, 0) + 1)  # past the "{"
    found = {"type": "", "params": ""}
    while line[at] != "}":
        key, at = scanstring(line, at + 1)
        at = _skip(line, _skip(line, at) + 1)  # past the ":"
        _, end = nodes.scan_once(line, at)
        name = match(names, names, key)
        if name is not None and (name == "params" or line[at:end] != "null"):
            found[name] = line[at:end]
        at = _skip(line, end)
        if line[at] == ",":
            at = _skip(line, at + 1)
    return found["type"], found["params"]


def spelled_exactly(data: bytes, quoted: tuple[bytes, ...]) -> bool:
    """True when every key of ``data`` that names one of the ``quoted`` field names
    (``b'"type"'``) spells it exactly, once. Looked for in the bytes: a name in a value
    costs the slower way (False), never a wrong answer."""
    # bytes.find: "in" costs twice as much for a needle of more than one byte
    if 92 in data and data.find(b"\\u") >= 0:  # an escape can spell a name
        return False
    if not data.isascii() and (data.find(b"\xe2\x84\xaa") >= 0 or data.find(b"\xc5\xbf") >= 0):
        return False  # U+212A or U+017F: a k or an s
    lower = data.lower()
    for name in quoted:
        seen = lower.count(name)
        if seen > 1 or (seen and data.find(name) < 0):
            return False
    return True


_COMMAND_QUOTED: Final = tuple(f'"{name}"'.encode() for name in COMMAND_FIELDS)


def command_keys_exact(line: bytes) -> bool:
    """:func:`spelled_exactly` for a command line's ``type`` and ``params``."""
    return spelled_exactly(line, _COMMAND_QUOTED)


NOT_QUICK: Final = object()
"""What :meth:`TypePlan.quick` answers when Go's rules must be applied by hand."""


def _strict(params_type: type[msgspec.Struct]) -> msgspec.json.Decoder[Any]:
    """A decoder of ``params_type``'s fields that refuses any other key: what it decodes,
    every key spelled as its field is, msgspec reads as Go would."""
    strict = msgspec.defstruct(
        params_type.__name__, [], bases=(params_type,), forbid_unknown_fields=True
    )
    return msgspec.json.Decoder(strict)


class TypePlan:
    """What the envelope keeps per params type: how Go assigns a value of it
    (:attr:`plan`), its decoder, and the quick way for params whose keys need no rule
    of Go's (:meth:`quick`)."""

    def __init__(self, params_type: Any) -> None:
        self.params_type = params_type
        self.plan = plan = plan_for(params_type)
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(params_type)
        fields = plan.fields if isinstance(plan, StructPlan) else {}
        # no key names a field: msgspec reads as Go does, a null or a left-out field aside
        self.plain = not holds_struct(plan) or (isinstance(plan, StructPlan) and not fields)
        flat = not self.plain and isinstance(plan, StructPlan)
        flat = flat and not any(map(holds_struct, fields.values()))
        self.strict = _strict(params_type) if flat else None
        self.merged = tuple(f'"{name}"'.encode() for name, f in fields.items() if merges(f))
        self.positional = flat and all(
            p.kind is p.POSITIONAL_OR_KEYWORD
            for p in inspect.signature(params_type).parameters.values()
        )

    def quick(self, data: bytes) -> Any:
        """``data`` decoded by msgspec alone when that is what Go would assign, else
        :data:`NOT_QUICK`: a key in another spelling, an unknown key, a null or a left-out
        field, a value of the wrong type, a field that merges named twice; and any
        params of a type whose structs hold structs (none of zread's).

        A struct of plain fields is decoded once by a decoder that refuses any key but
        its fields' (and then built as ``params_type``, not the decoder's subclass)."""
        if self.plain:
            try:
                return self.decoder.decode(data)
            except msgspec.ValidationError:
                return NOT_QUICK
        if self.strict is not None:
            try:
                value = self.strict.decode(data)
            except msgspec.ValidationError:
                return NOT_QUICK
            for name in self.merged:
                if data.count(name) > 1:
                    return NOT_QUICK
            if self.positional:
                return self.params_type(*_astuple(value))
            return self.params_type(**_asdict(value))
        return NOT_QUICK


PLANS: Final[dict[Any, TypePlan]] = {}
"""The plans made so far, by type: where a caller looks first (a dict's ``get`` costs
less than a call of :func:`plan_of`)."""
_astuple: Final = msgspec.structs.astuple
_asdict: Final = msgspec.structs.asdict


def plan_of(params_type: Any) -> TypePlan:
    """The :class:`TypePlan` of a params type, made once (the types are the charts')."""
    plan = PLANS.get(params_type)
    if plan is None:
        plan = PLANS[params_type] = TypePlan(params_type)
    return plan
