"""Tests for simulator.tools.vmshape: a vm Struct's shape, and the fields an event's vm
shows or leaves out against it."""

from __future__ import annotations

import msgspec

from simulator.tools.vmshape import field_deviations, shape_of


class Task(msgspec.Struct):
    id: int
    note: str | msgspec.UnsetType = msgspec.UNSET


class Vm(msgspec.Struct):
    state: str
    tasks: list[Task]
    title: str = msgspec.field(name="Title")


def test_a_shape_has_each_field_by_its_wire_name_nested_and_optional() -> None:
    shape = shape_of(Vm)
    assert shape.struct == "Vm" and list(shape.fields) == ["state", "tasks", "Title"]
    nested, optional = shape.fields["tasks"]
    assert nested is not None and nested.struct == "Task" and optional is False
    assert nested.fields == {"id": (None, False), "note": (None, True)}


def test_a_vm_that_fits_has_no_deviation_and_one_that_does_not_says_where() -> None:
    shape = shape_of(Vm)
    fits = {"state": "x", "tasks": [{"id": 1}, {"id": 2, "note": "n"}], "Title": "t"}
    assert list(field_deviations(fits, shape, "")) == []
    off = {"state": "x", "tasks": [{"id": 1, "extra": 0}, {}], "Title": "t", "more": 1}
    found = list(field_deviations(off, shape, ""))
    assert len(found) == 3
    assert any("tasks.extra" in text and "Task (id, note)" in text for text in found)
    assert any('leave out the vm field "tasks.id"' in text for text in found)
    assert any("more" in text and "Vm (state, tasks, Title)" in text for text in found)
