"""The shape of a chart's vm Struct, and what of an event's vm does not fit it.

Owns: :class:`VmShape` (each field of a vm Struct: its nested shape, and whether it may
be left out), :func:`shape_of` (read from the Struct's fields, once per chart) and
:func:`field_deviations` (the fields an event's vm shows that the Struct has not, or
leaves out that it must show), for :mod:`simulator.tools.conformance`.

Must not: decode a line, or judge anything but the vm's fields.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from simulator.tools.cassette import compact


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """``tp`` without ``| UnsetType``, and whether it had it (the field may be left out)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not msgspec.UnsetType]
        optional = len(args) < len(typing.get_args(tp))
        return (args[0] if len(args) == 1 else tp), optional
    return tp, False


@dataclass(frozen=True, slots=True)
class VmShape:
    """The fields of one vm Struct: name -> (nested shape or None, may be left out)."""

    struct: str
    fields: dict[str, tuple[VmShape | None, bool]]


def shape_of(struct: type[Any]) -> VmShape:
    fields: dict[str, tuple[VmShape | None, bool]] = {}
    for info in msgspec.structs.fields(struct):
        tp, optional = _unwrap(info.type)
        if typing.get_origin(tp) is list and typing.get_args(tp):
            tp = typing.get_args(tp)[0]
        nested = shape_of(tp) if isinstance(tp, type) and issubclass(tp, msgspec.Struct) else None
        fields[info.encode_name] = (nested, optional)
    return VmShape(struct.__name__, fields)


def field_deviations(value: Any, shape: VmShape, path: str) -> Iterator[str]:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, dict):
            continue
        for key in item:
            if key not in shape.fields:
                known = ", ".join(shape.fields)
                yield (
                    f"zread did show the vm field {compact(path + key)} where the chart expects "
                    f"only the fields of {shape.struct} ({known})"
                )
        for key, (nested, optional) in shape.fields.items():
            if key not in item:
                if not optional:
                    yield (
                        f"zread did leave out the vm field {compact(path + key)} where the chart "
                        "expects it in every event"
                    )
            elif nested is not None:
                yield from field_deviations(item[key], nested, f"{path}{key}.")
