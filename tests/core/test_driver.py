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
    """Stands in for a session; a Driver only stores it."""


def test_flags_defaults() -> None:
    flags = Flags()
    assert flags.yes is False
    assert flags.draft_action == ""
    assert flags.skip_failed is False
    assert flags.custom is False


def test_flags_are_frozen_and_comparable() -> None:
    flags = Flags(yes=True, draft_action="resume")
    with pytest.raises(AttributeError):
        flags.yes = False  # type: ignore[misc]
    assert flags == Flags(yes=True, draft_action="resume")
    assert flags != Flags()
    assert hash(flags) == hash(Flags(yes=True, draft_action="resume"))  # a cache key
    assert msgspec.structs.replace(flags, custom=True).custom is True


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
