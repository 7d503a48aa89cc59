"""How Go's ``encoding/json`` assigns an object's keys to a struct's fields.

Owns the rules FIDELITY section 3 takes from Go's decoder, for the lines msgspec alone
would decode otherwise (the envelope sends only those here):

- a key names a field when it is the field's JSON name, or else equal to it under Go's
  ``foldName``: ASCII letters in either case, and the only two characters outside
  ASCII whose ``unicode.SimpleFold`` orbit holds an ASCII letter, U+212A KELVIN SIGN
  (``k``) and U+017F LATIN SMALL LETTER LONG S (``s``) (:func:`fold`; field names are
  ASCII). An exact match wins; of two fields that fold alike the first declared does;
- keys are assigned in order: the last of several naming one field wins, and a value
  is decoded into what the field holds (a struct or a map is merged into, a list
  reuses its elements);
- ``null`` leaves a string, number, bool or struct as it is and empties a list, a map
  or an ``Any``; a map keeps its keys as sent, a ``null`` map value is its zero; a
  field left out is its zero value (a required field's zero is filled in; a default
  is a zero in every params struct).

:func:`command_members` gives a command line's ``type`` and ``params`` as Go assigns
them; :func:`normalise` rewrites ``params`` into the object msgspec decodes to what Go
would assign, values kept as their JSON text, so that a value of the wrong type gets
msgspec's reason at the field's own name. :class:`TypePlan` tells the params msgspec
reads as Go would from the others, at the cost of one decode.

Must not: decide what is refused or word an error (the envelope does), hold state
between calls but its plans, or be given a line that is not JSON (the envelope checks).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec
import msgspec.inspect as mi

__all__ = [
    "MISSING",
    "NOT_QUICK",
    "PLANS",
    "Plan",
    "TypePlan",
    "command_keys_exact",
    "command_members",
    "fold",
    "normalise",
    "plan_of",
    "spelled_exactly",
]

_GO_FOLD: Final = str.maketrans({"\u212a": "k", "\u017f": "s"})
"""The characters outside ASCII that Go's ``foldName`` folds into ASCII."""

COMMAND_FIELDS: Final = ("type", "params")


def fold(key: str) -> str | None:
    """``key`` as Go folds it to compare with an ASCII field name (lower case here, where
    Go writes upper; only equality matters); None when it can match no ASCII name."""
    if not key.isascii():
        key = key.translate(_GO_FOLD)
        if not key.isascii():
            return None
    return key.lower()


def match(names: Mapping[str, str], folded: Mapping[str, str], key: str) -> str | None:
    """The field ``key`` names: an exact JSON name first, else the folded one."""
    name = names.get(key)
    if name is None:
        key_folded = fold(key)
        name = folded.get(key_folded) if key_folded is not None else None
    return name


MISSING: Final = object()
"""Nothing assigned: the field is left out of what msgspec decodes (its default)."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as its members, in order, duplicates kept."""


def _number(text: str) -> msgspec.Raw:
    return msgspec.Raw(text.encode())


@functools.cache
def _nodes() -> Any:
    """A parser of JSON into nodes: objects as :class:`_Object`, numbers kept as their
    text. (The json module is imported here, on the first line that needs Go's rules
    applied by hand: the common line never does, and start-up does without it.)"""
    import json

    return json.JSONDecoder(object_pairs_hook=_Object, parse_int=_number, parse_float=_number)


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
    nodes = _nodes()
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


def _plain(node: Any) -> Any:
    """A node as msgspec would read the JSON: an object is a dict (last key wins)."""
    if isinstance(node, _Object):
        return {key: _plain(value) for key, value in node}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    return node


class Plan:
    """How a value of one type takes a node (a scalar: as it is, and null changes
    nothing); subclasses for the types Go decodes into what they already hold."""

    def __init__(self, zero: Any = MISSING) -> None:
        self._zero = zero

    def zero(self) -> Any:
        """The value Go's decoder starts from, fresh; MISSING when the type has none."""
        return self._zero

    def null(self, prev: Any) -> Any:
        return prev

    def assign(self, prev: Any, node: Any) -> Any:
        return self.null(prev) if node is None else _plain(node)


class _Nullable(Plan):
    """A pointer, interface or ``X | None``: null makes it None."""

    def __init__(self, inner: Plan) -> None:
        super().__init__(None)
        self.inner = inner

    def null(self, prev: Any) -> Any:
        return None

    def assign(self, prev: Any, node: Any) -> Any:
        return None if node is None else self.inner.assign(prev, node)


class _List(Plan):
    def __init__(self, item: Plan) -> None:
        super().__init__()
        self.item = item

    def zero(self) -> Any:
        return []

    def null(self, prev: Any) -> Any:
        return []

    def assign(self, prev: Any, node: Any) -> Any:
        if not isinstance(node, list) or isinstance(node, _Object):
            return self.null(prev) if node is None else _plain(node)
        old = prev if isinstance(prev, list) else []
        items = [
            self.item.assign(old[i] if i < len(old) else self.item.zero(), value)
            for i, value in enumerate(node)
        ]
        return [None if item is MISSING else item for item in items]


class _Map(Plan):
    def __init__(self, value: Plan) -> None:
        super().__init__()
        self.value = value

    def zero(self) -> Any:
        return {}

    def null(self, prev: Any) -> Any:
        return {}

    def assign(self, prev: Any, node: Any) -> Any:
        if not isinstance(node, _Object):
            return self.null(prev) if node is None else _plain(node)
        out = dict(prev) if isinstance(prev, dict) else {}
        for key, value in node:  # the key as sent: Go never folds a map's keys
            item = self.value.assign(self.value.zero(), value)
            out[key] = None if item is MISSING else item
        return out


class _Struct(Plan):
    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, Plan] = {}
        self.required: list[str] = []
        self.names: dict[str, str] = {}
        self.folded: dict[str, str] = {}

    def add(self, name: str, plan: Plan, *, required: bool) -> None:
        if not name.isascii():  # pragma: no cover - a struct of the project's own
            raise TypeError(f"field {name!r}: fold() compares with ASCII names only")
        self.fields[name] = plan
        self.names[name] = name
        self.folded.setdefault(name.lower(), name)  # the first declared wins, as in Go
        if required:
            self.required.append(name)

    def zero(self) -> Any:
        out = {}
        for name in self.required:
            value = self.fields[name].zero()
            if value is not MISSING:
                out[name] = value
        return out

    def assign(self, prev: Any, node: Any) -> Any:
        if not isinstance(node, _Object):
            return self.null(prev) if node is None else _plain(node)
        out = dict(prev) if isinstance(prev, dict) else self.zero()
        for key, value in node:
            name = match(self.names, self.folded, key)
            if name is not None:
                item = self.fields[name].assign(out.get(name, MISSING), value)
                if item is not MISSING:
                    out[name] = item
        return out


_ZEROS: Final[dict[type, Any]] = {
    mi.StrType: "",
    mi.IntType: 0,
    mi.FloatType: 0.0,
    mi.BoolType: False,
}


def _build(info: mi.Type, structs: dict[type, _Struct]) -> Plan:
    if isinstance(info, mi.StructType):
        if info.cls in structs:  # a recursive type: the plan being built
            return structs[info.cls]
        plan = structs[info.cls] = _Struct()
        for field in info.fields:
            plan.add(field.encode_name, _build(field.type, structs), required=field.required)
        return plan
    if isinstance(info, mi.UnionType):
        others = [t for t in info.types if not isinstance(t, mi.NoneType)]
        inner = _build(others[0], structs) if len(others) == 1 else Plan()
        return _Nullable(inner) if len(others) < len(info.types) else inner
    if isinstance(info, (mi.AnyType, mi.NoneType)):
        return _Nullable(Plan())
    if isinstance(info, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return _List(_build(info.item_type, structs))
    if isinstance(info, mi.DictType):
        return _Map(_build(info.value_type, structs))
    return Plan(_ZEROS.get(type(info), MISSING))


def _holds_struct(plan: Plan) -> bool:
    """Whether a value of ``plan`` can hold a struct (whose keys are fields too)."""
    if isinstance(plan, _Struct):
        return True
    if isinstance(plan, _Nullable):
        return _holds_struct(plan.inner)
    if isinstance(plan, _List):
        return _holds_struct(plan.item)
    if isinstance(plan, _Map):
        return _holds_struct(plan.value)
    return False


def _merges(plan: Plan) -> bool:
    """Whether Go decodes a second value into what the first left (a list or a map)."""
    return isinstance(plan.inner if isinstance(plan, _Nullable) else plan, (_List, _Map))


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
        self.plan = plan = _build(mi.type_info(params_type), {})
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(params_type)
        fields = plan.fields if isinstance(plan, _Struct) else {}
        # no key names a field: msgspec reads as Go does, a null or a left-out field aside
        self.plain = not _holds_struct(plan) or (isinstance(plan, _Struct) and not fields)
        flat = not self.plain and isinstance(plan, _Struct)
        flat = flat and not any(map(_holds_struct, fields.values()))
        self.strict = _strict(params_type) if flat else None
        self.merged = tuple(f'"{name}"'.encode() for name, f in fields.items() if _merges(f))
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


_encoder: Final = msgspec.json.Encoder()


def normalise(data: bytes, plan: Plan) -> bytes:
    """``data`` (a JSON value) rewritten as Go would assign it to ``plan``'s type: exact
    field names, each once, ``null`` resolved, required fields at their zero values.
    Raises RecursionError when it nests deeper than the stack allows."""
    value = plan.assign(plan.zero(), _nodes().decode(data.decode("utf-8")))
    return _encoder.encode(None if value is MISSING else value)
