"""``zread update --stdio``: check, offer, download with progress, confirm the restart.

Owns: the update vm and its flow: checking, then error, or up_to_date when nothing
newer is released (whatever installed zread), or package_manager when a newer version
exists and a package manager installed zread (showing ``latest_version``, the version
to upgrade to), else has_update; downloading in ``download_steps`` progress events
whose bytes and percent never decrease and end at 100 (or break at a scenario's
``at_percent``), the last ``downloading`` event showing 100; confirm_restart; done.
The simulator never replaces a binary.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

from simulator.core.command import Answer, Examples
from simulator.core.driver import Driver
from simulator.core.eventbytes import go_float
from statecharts.version import go_arch, go_os

if TYPE_CHECKING:
    from collections.abc import Mapping

    from transitions import EventData


SUMMARY = "Update Zread to the latest version"
HELP = "Update Zread to the latest version."
ABOUT = (
    "Updates zread: the release check runs on a timer, `download` starts the "
    "download, which steps on a timer, and `restart` or `skip_restart` ends it."
)

EXAMPLES = Examples(
    scenarios={
        "check-fails": '[[failures]]\npoint = "check"\nerror = "check for updates: network down"\n',
    },
)


ANSWERS = frozenset({"download", "restart"})
"""The gates :func:`answer` answers: it is asked only when an event offers one."""


def answer(waiting: list[str], vm: Mapping[str, Any], memory: dict[str, Any]) -> Answer:
    """A sensible client: download the update, then restart into it."""
    if "download" in waiting:
        return ("download", {})
    if "restart" in waiting:
        return ("restart", {})
    return None


_SEMVER = re.compile(r"v?(\d+(?:\.\d+)*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?")


def _version_key(version: str) -> tuple[Any, ...] | None:
    """A sort key for a release version (semver's order: ``1.0.0-rc.1`` < ``1.0.0``, a
    numeric part by its value), or None when ``version`` is not one."""
    match = _SEMVER.fullmatch(version.strip())
    if match is None:
        return None
    core = tuple(int(part) for part in match.group(1).split("."))
    core += (0,) * (3 - len(core))
    pre = match.group(2)
    if pre is None:
        return (core, 1, ())
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (core, 0, parts)


def is_newer(latest: str, current: str) -> bool:
    """True when release ``latest`` is newer than the installed ``current`` (semver
    order, a leading ``v`` ignored). When either does not parse as semver, any
    difference counts as newer."""
    new, old = _version_key(latest), _version_key(current)
    if new is None or old is None:
        return latest.strip().removeprefix("v") != current.strip().removeprefix("v")
    return new > old


class UpdateVM(msgspec.Struct):
    state: str = ""
    current_version: str = ""
    latest_version: str | msgspec.UnsetType = msgspec.UNSET
    download_url: str = ""
    package_manager: str | msgspec.UnsetType = msgspec.UNSET
    downloaded_bytes: int = 0
    total_bytes: int = 0
    download_percent: float = 0
    error: str = ""


class UpdateModel(Driver):
    vm_type = UpdateVM
    vm: UpdateVM
    _step = 0
    _break_at: float | None = None
    _break_error = ""
    _verified = False

    def begin(self, _: EventData) -> None:
        self.vm.current_version = self.rt.scenario.world.release.current_version

    # -- checking ------------------------------------------------------------------

    def check_release(self, _: EventData) -> None:
        failure = self.rt.failure("check")
        if failure is not None:
            self.vm.error = failure.error or "check for updates: connection refused"

    def check_failed(self, _: EventData) -> bool:
        return bool(self.vm.error)

    def managed(self, _: EventData) -> bool:
        return bool(self.rt.scenario.world.release.package_manager)

    def is_latest(self, _: EventData) -> bool:
        """Nothing newer is released: up to date, whoever installed zread."""
        release = self.rt.scenario.world.release
        return not is_newer(release.latest_version, release.current_version)

    def show_package_manager(self, _: EventData) -> None:
        """A newer version exists; the package manager that installed zread upgrades it."""
        release = self.rt.scenario.world.release
        self.vm.latest_version = release.latest_version
        self.vm.package_manager = release.package_manager

    def offer_update(self, _: EventData) -> None:
        release = self.rt.scenario.world.release
        self.vm.latest_version = release.latest_version
        self.vm.download_url = release.download_url.format(
            version=release.latest_version, os=go_os(), arch=go_arch()
        )

    # -- downloading ---------------------------------------------------------------

    def start_download(self, _: EventData) -> None:
        self.vm.total_bytes = self.rt.scenario.world.release.download_bytes
        failure = self.rt.failure("download")
        if failure is not None:
            self._break_at = failure.at_percent
            self._break_error = failure.error or "download failed: connection reset by peer"

    def step_download(self, _: EventData) -> None:
        if self.vm.downloaded_bytes >= self.vm.total_bytes:
            self._verified = True  # the step after 100%: the download is checked, done
            return
        self._step += 1
        percent = 100.0 * self._step / self.rt.scenario.world.release.download_steps
        if self._break_at is not None and percent >= self._break_at:
            percent = self._break_at
            self.vm.error = self._break_error
        total = self.vm.total_bytes
        self.vm.downloaded_bytes = total if percent >= 100.0 else int(total * percent / 100.0)
        self.vm.download_percent = go_float(min(percent, 100.0))

    def download_broken(self, _: EventData) -> bool:
        return bool(self.vm.error)

    def download_complete(self, _: EventData) -> bool:
        return self._verified


CHART = {
    "name": "update",
    "model": "UpdateModel",
    "timing": {
        "check": {"uniform": [0.3, 0.6]},
        "download_step": {"uniform": [0.1, 0.15]},
    },
    "failures": ["check", "download"],
    "initial": "starting",
    "states": [
        {"name": "starting"},
        {"name": "checking", "timers": [{"after": "check", "trigger": "_checked"}]},
        {"name": "has_update", "waiting_for": ["download", "quit"]},
        {
            "name": "downloading",
            "timers": [{"after": "download_step", "trigger": "_step", "repeat": True}],
        },
        {"name": "confirm_restart", "waiting_for": ["restart", "skip_restart", "quit"]},
        {"name": "up_to_date", "terminal": True},
        {"name": "package_manager", "terminal": True},
        {"name": "error", "terminal": True},
        {"name": "done", "terminal": True},
    ],
    "transitions": [
        {"trigger": "_start", "source": "starting", "dest": "checking", "before": "begin"},
        {
            "trigger": "_checked",
            "source": "checking",
            "dest": "error",
            "prepare": "check_release",
            "conditions": "check_failed",
        },
        {
            "trigger": "_checked",
            "source": "checking",
            "dest": "up_to_date",
            "prepare": "check_release",
            "conditions": "is_latest",
        },
        {
            "trigger": "_checked",
            "source": "checking",
            "dest": "package_manager",
            "prepare": "check_release",
            "conditions": "managed",
            "before": "show_package_manager",
        },
        {
            "trigger": "_checked",
            "source": "checking",
            "dest": "has_update",
            "prepare": "check_release",
            "before": "offer_update",
        },
        {
            "trigger": "download",
            "source": "has_update",
            "dest": "downloading",
            "before": "start_download",
        },
        {
            "trigger": "_step",
            "source": "downloading",
            "dest": "error",
            "prepare": "step_download",
            "conditions": "download_broken",
        },
        {
            "trigger": "_step",
            "source": "downloading",
            "dest": "confirm_restart",
            "prepare": "step_download",
            "conditions": "download_complete",
        },
        {"trigger": "_step", "source": "downloading", "dest": None, "prepare": "step_download"},
        {"trigger": "restart", "source": "confirm_restart", "dest": "done"},
        {"trigger": "skip_restart", "source": "confirm_restart", "dest": "done"},
    ],
    "commands": {"download": {}, "restart": {}, "skip_restart": {}},
}
