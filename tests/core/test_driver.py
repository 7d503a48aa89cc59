"""Tests for simulator.core.driver: the base of every chart's model, and the zread flags."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from simulator.core.driver import Driver, Flags, InvalidParams


class CounterVM(msgspec.Struct):
    count: int = 0
    names: list[str] = msgspec.field(default_factory=list)


class CounterModel(Driver):
    vm_type = CounterVM
    vm: CounterVM


class _Runtime:
    """Stands in for a session; a Driver stores it and keeps its flags."""

    flags = Flags()


class _OwnFlags(Flags, frozen=True):
    yes: bool = False
    draft_action: str = ""


def test_the_base_flags_have_no_field() -> None:
    assert Flags.__struct_fields__ == ()  # a command's own flags are its module's
    assert Flags() == Flags()


def test_flags_are_frozen_and_comparable() -> None:
    flags = _OwnFlags(yes=True, draft_action="resume")
    with pytest.raises(AttributeError):
        flags.yes = False  # type: ignore[misc]
    assert flags == _OwnFlags(yes=True, draft_action="resume")
    assert flags != _OwnFlags()
    assert hash(flags) == hash(_OwnFlags(yes=True, draft_action="resume"))  # a cache key
    assert msgspec.structs.replace(flags, yes=False).yes is False


def test_a_driver_keeps_its_sessions_flags() -> None:
    rt = _Runtime()
    assert CounterModel(rt).flags is rt.flags  # type: ignore[arg-type]


def test_driver_gets_a_fresh_vm_of_its_type() -> None:
    rt = _Runtime()
    a = CounterModel(rt)  # type: ignore[arg-type]
    b = CounterModel(rt)  # type: ignore[arg-type]
    assert isinstance(a.vm, CounterVM)
    assert a.vm == CounterVM()
    assert a.vm is not b.vm
    a.vm.names.append("x")
    assert b.vm.names == []


def test_driver_keeps_its_runtime() -> None:
    rt: Any = _Runtime()
    assert CounterModel(rt).rt is rt


def test_on_quit_default_is_a_no_op() -> None:
    model = CounterModel(_Runtime())  # type: ignore[arg-type]
    before = msgspec.to_builtins(model.vm)
    model.on_quit()
    model.on_quit()  # safe to call again
    assert msgspec.to_builtins(model.vm) == before


def test_on_quit_can_be_overridden() -> None:
    class Releasing(CounterModel):
        def on_quit(self) -> None:
            self.vm.count = -1

    model = Releasing(_Runtime())  # type: ignore[arg-type]
    model.on_quit()
    assert model.vm.count == -1


def test_invalid_params_carries_its_reason() -> None:
    err = InvalidParams("unknown model 'x'")
    assert isinstance(err, Exception)
    assert str(err) == "unknown model 'x'"
