"""How Go's ``encoding/json`` assigns a JSON value to a value of a type.

Owns the rules FIDELITY section 3 takes from Go's decoder, as plans built from a type
(:func:`plan_for`) that rewrite a JSON value into the one msgspec decodes to what Go
would assign (:func:`normalise`):

- a key names a field when it is the field's JSON name, or else equal to it under Go's
  ``foldName``: ASCII letters in either case, and the only two characters outside
  ASCII whose ``unicode.SimpleFold`` orbit holds an ASCII letter, U+212A KELVIN SIGN
  (``k``) and U+017F LATIN SMALL LETTER LONG S (``s``) (:func:`fold`; field names are
  ASCII). An exact match wins; of two fields that fold alike the first declared does
  (:func:`match`);
- keys are assigned in order: the last of several naming one field wins, and a value
  is decoded into what the field holds (a struct or a map is merged into, a list
  reuses its elements);
- ``null`` leaves a string, number, bool or struct as it is and empties a list, a map
  or an ``Any``; a map keeps its keys as sent, a ``null`` map value is its zero; a
  field left out is its zero value (a required field's zero is filled in; a default
  is a zero in every params struct).

Values are kept as their JSON text, so that a value of the wrong type gets msgspec's
reason at the field's own name.

Must not: decide what is refused or word an error (the envelope does), hold state, or
know which lines come here (:mod:`simulator.core.godecode` decides, and keeps the
plans).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import msgspec
import msgspec.inspect as mi

_GO_FOLD: Final = str.maketrans({"\u212a": "k", "\u017f": "s"})
"""The characters outside ASCII that Go's ``foldName`` folds into ASCII."""


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
def json_nodes() -> Any:
    """A parser of JSON into nodes: objects as :class:`_Object`, numbers kept as their
    text. (The json module is imported here, on the first line that needs Go's rules
    applied by hand: the common line never does, and start-up does without it.)"""
    import json

    return json.JSONDecoder(object_pairs_hook=_Object, parse_int=_number, parse_float=_number)


def _plain(node: Any) -> Any:
    """A node as msgspec would read the JSON: an object is a dict (last key wins, at
    the place of the first). Iterative: a node nests as deep as its line, and the
    decoder's own limit (the recursion limit) is the one the line meets."""
    if not isinstance(node, list):  # (an _Object is a list too)
        return node
    pending: list[tuple[list[Any], Any]] = []
    top = _shell(node, pending)
    while pending:
        source, made = pending.pop()
        if isinstance(made, dict):
            for key, value in source:
                made[key] = _shell(value, pending)
        else:
            made.extend([_shell(item, pending) for item in source])
    return top


def _shell(node: Any, pending: list[tuple[list[Any], Any]]) -> Any:
    """``node`` if a scalar; else the empty dict or list it becomes, to be filled from
    ``node`` once taken from ``pending``."""
    if not isinstance(node, list):
        return node
    made: dict[str, Any] | list[Any] = {} if isinstance(node, _Object) else []
    pending.append((node, made))
    return made


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


class StructPlan(Plan):
    """A struct: its fields' plans, by JSON name, and how keys name them."""

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


def _build(info: mi.Type, structs: dict[type, StructPlan]) -> Plan:
    if isinstance(info, mi.StructType):
        if info.cls in structs:  # a recursive type: the plan being built
            return structs[info.cls]
        plan = structs[info.cls] = StructPlan()
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


def holds_struct(plan: Plan) -> bool:
    """Whether a value of ``plan`` can hold a struct (whose keys are fields too)."""
    if isinstance(plan, StructPlan):
        return True
    if isinstance(plan, _Nullable):
        return holds_struct(plan.inner)
    if isinstance(plan, _List):
        return holds_struct(plan.item)
    if isinstance(plan, _Map):
        return holds_struct(plan.value)
    return False


def merges(plan: Plan) -> bool:
    """Whether Go decodes a second value into what the first left (a list or a map)."""
    return isinstance(plan.inner if isinstance(plan, _Nullable) else plan, (_List, _Map))


_encoder: Final = msgspec.json.Encoder()


def normalise(data: bytes, plan: Plan) -> bytes:
    """``data`` (a JSON value) rewritten as Go would assign it to ``plan``'s type: exact
    field names, each once, ``null`` resolved, required fields at their zero values.
    Raises RecursionError when it nests deeper than the stack allows."""
    value = plan.assign(plan.zero(), json_nodes().decode(data.decode("utf-8")))
    return _encoder.encode(None if value is MISSING else value)


def plan_for(value_type: Any) -> Plan:
    """The plan of how Go assigns a JSON value to ``value_type`` (a msgspec type)."""
    return _build(mi.type_info(value_type), {})
