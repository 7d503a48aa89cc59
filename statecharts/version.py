"""``zread version --stdio``: one event, ``done:true``, describing the installed zread.

Owns: the version vm and the host's OS and CPU in Go's names. Nothing is accepted.
"""

from __future__ import annotations

import platform
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from simulator.core.command import Answer
from simulator.core.driver import Driver

if TYPE_CHECKING:
    from collections.abc import Mapping

    from transitions import EventData

SUMMARY = "Print the version of Zread"
HELP = "Print the version of Zread."
ABOUT = "Prints the version: one internal transition from start-up to done."


ANSWERS: frozenset[str] = frozenset()
"""The gates :func:`answer` answers: it is asked only when an event offers one."""


def answer(waiting: list[str], vm: Mapping[str, Any], memory: dict[str, Any]) -> Answer:
    """Nothing to answer: the first event is the last."""
    return None


_GO_OS = {"linux": "linux", "darwin": "darwin", "win32": "windows", "cygwin": "windows"}
_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def go_os() -> str:
    """This host's OS as Go's ``runtime.GOOS`` names it."""
    return _GO_OS.get(sys.platform, sys.platform)


def go_arch() -> str:
    """This host's CPU as Go's ``runtime.GOARCH`` names it."""
    machine = platform.machine().lower()
    return _GO_ARCH.get(machine, machine)


class VersionVM(msgspec.Struct):
    version: str = ""
    channel: str = ""
    go_version: str = ""
    os: str = ""
    arch: str = ""


class VersionModel(Driver):
    vm_type = VersionVM
    vm: VersionVM

    def describe(self, _: EventData) -> None:
        release = self.rt.scenario.world.release
        self.vm.version = release.current_version
        self.vm.channel = release.channel
        self.vm.go_version = release.go_version
        self.vm.os = go_os()
        self.vm.arch = go_arch()


CHART = {
    "name": "version",
    "model": "VersionModel",
    "failures": [],
    "initial": "starting",
    "states": [
        {"name": "starting"},
        {"name": "done", "terminal": True},
    ],
    "transitions": [
        {"trigger": "_start", "source": "starting", "dest": "done", "before": "describe"},
    ],
    "commands": {},
}
