"""A reference client: the answer a sensible zread client gives at every gate.

Owns: :class:`ReferenceClient`, whose ``answer`` looks at one event and returns the
command line a client that wants each command to finish would send, or None when the
event asks for nothing (``waiting_for`` without a gate of its own, or done). What to
send at a gate is its command module's ``answer``: generate retries each failed page
once and the catalog once, then gives up (``skip_all``, ``quit``), so a run always
ends; config changes one field, then saves. The load runner drives every session
with one; tests use it to script whole runs.

Must not: do I/O; it reads the events it is given.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

from statecharts import COMMANDS, command_module


def command_line(type: str, **params: Any) -> bytes:
    """One command line, newline included."""
    return json.dumps({"type": type, "params": params}, separators=(",", ":")).encode() + b"\n"


class ReferenceClient:
    """Answers every gate as its command's module says a sensible client does
    (``answer`` in ``statecharts/<command>.py``); it keeps one notebook per run, so it
    retries each failed page and the catalog once."""

    __slots__ = ("_modules", "memory")

    def __init__(self, command: str | None = None) -> None:
        self.memory: dict[str, Any] = {}
        """What the command modules' answers noted so far in this run."""
        self._modules: tuple[ModuleType, ...] = tuple(
            command_module(c) for c in ((command,) if command else COMMANDS)
        )
        """The modules asked, in turn: ``command``'s alone when given (a run of a known
        command, as a load test's), else every command's. A module is asked only when the
        event offers a gate of its ``ANSWERS`` (all of them, without one)."""

    def answer(self, event: Mapping[str, Any]) -> bytes | None:
        """The command for this event's gate, or None when it asks for nothing (an event
        without a gate is most of a run's: it costs a look at three keys; its vm is
        looked up only if a module's answer reads it)."""
        waiting = event.get("waiting_for")
        if not waiting or event.get("done") or event.get("error"):
            return None
        vm: Mapping[str, Any] | None = None
        for module in self._modules:
            gates = getattr(module, "ANSWERS", None)
            if gates is not None and gates.isdisjoint(waiting):
                continue
            if vm is None:  # (not ``vm or``: a Mapping's truth would decode it)
                vm = _Vm(event)
            answer = module.answer(waiting, vm, self.memory)
            if answer is not None:
                kind, params = answer
                return command_line(kind, **params)
        return None


class _Vm(Mapping[str, Any]):
    """An event's vm, taken from the event the first time it is read: a load test's
    event decodes its vm only when looked at (:class:`simulator.locust_user.event.Event`),
    and most gates are answered without it."""

    __slots__ = ("_event", "_vm")

    def __init__(self, event: Mapping[str, Any]) -> None:
        self._event = event
        self._vm: Mapping[str, Any] | None = None

    def _read(self) -> Mapping[str, Any]:
        if self._vm is None:
            self._vm = self._event.get("vm") or {}
        return self._vm

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())
