"""The toy chart the tests of compiling, checking and running charts share: three
states, a gate with params, a repeating timer and a world duration, and variants of it."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import msgspec

from simulator.core.driver import Driver, Flags


class ToyVM(msgspec.Struct):
    state: str = ""
    log: list[str] = msgspec.field(default_factory=list)


class GoParams(msgspec.Struct):
    speed: int = 1


class ToyModel(Driver):
    vm_type = ToyVM
    vm: ToyVM
    not_callable = "just a string"

    def note_go(self, event: Any) -> None:
        self.vm.log.append(f"go:{event.kwargs['params'].speed}")

    def ready(self, _: Any) -> bool:
        return True

    def go_examples(self) -> list[dict[str, Any]]:
        return [{"speed": 1}]

    def check_go(self, params: GoParams) -> None:
        pass

    def entered(self, _: Any) -> None:
        self.vm.log.append("entered")

    def ticked(self, _: Any) -> None:
        self.vm.log.append("tick")


def toy_chart() -> dict[str, Any]:
    return {
        "name": "toy",
        "model": "ToyModel",
        "timing": {"tick": {"fixed": 1.0}},
        "initial": "idle",
        "states": [
            {"name": "idle", "waiting_for": ["go", "quit"]},
            {
                "name": "running",
                "vm_state": "busy",
                "on_enter": "entered",
                "timers": [
                    {"after": "tick", "trigger": "_tick", "repeat": True},
                    {"after": "world.login.auth_timeout", "trigger": "_expire"},
                ],
            },
            {"name": "finished", "terminal": True},
        ],
        "transitions": [
            {
                "trigger": "go",
                "source": "idle",
                "dest": "running",
                "conditions": "ready",
                "before": "note_go",
            },
            {"trigger": "_tick", "source": "running", "dest": None, "after": "ticked"},
            {"trigger": "_expire", "source": "running", "dest": "finished"},
        ],
        "commands": {"go": {"params": "GoParams", "check": "check_go", "examples": "go_examples"}},
    }


def toy_module(
    edit: Callable[[dict[str, Any]], None] | None = None, model: type[Driver] = ToyModel
) -> types.ModuleType:
    module = types.ModuleType("toy_chart")
    chart = toy_chart()
    chart["model"] = model.__name__
    if edit is not None:
        edit(chart)
    module.CHART = chart  # type: ignore[attr-defined]
    setattr(module, model.__name__, model)
    module.GoParams = GoParams  # type: ignore[attr-defined]
    module.NOT_A_TYPE = 3  # type: ignore[attr-defined]
    return module


def state(chart: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in chart["states"] if s["name"] == name)


class Runtime:
    """The smallest stand-in for a session: the toy model only needs ``rt`` to exist,
    with the flags a driver keeps."""

    flags = Flags()


class CountingModel(ToyModel):
    prepared = 0

    def work(self, _: Any) -> None:
        self.prepared += 1

    def never(self, _: Any) -> bool:
        return False

    def prepared_once(self, _: Any) -> bool:
        return self.prepared == 1


def poke(c: dict[str, Any]) -> None:
    """``_poke`` with two candidates from each of idle and running, one from both."""
    c["transitions"] += [
        {
            "trigger": "_poke",
            "source": ["idle", "running"],
            "dest": None,
            "prepare": "work",
            "conditions": "never",
        },
        {
            "trigger": "_poke",
            "source": "running",
            "dest": None,
            "prepare": "work",
            "conditions": "prepared_once",
            "after": "ticked",
        },
        {"trigger": "_poke", "source": "idle", "dest": None, "prepare": "work", "after": "ticked"},
    ]
