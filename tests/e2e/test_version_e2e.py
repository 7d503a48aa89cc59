"""``version --stdio`` end to end: one event, done, exit 0, stdin never read."""

from __future__ import annotations

import contextlib
import platform
import sys

import pytest

from .helpers import Proc

GO_OS = {"linux": "linux", "darwin": "darwin", "win32": "windows"}
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@pytest.mark.parametrize(("scenario", "version"), [("default", "0.2.13"), ("up-to-date", "0.2.13")])
def test_one_event_then_exit_without_reading_stdin(scenario: str, version: str) -> None:
    with Proc("version", scenario=scenario, speed=None) as p:
        event = p.read_event()
        assert event["done"] is True
        assert event["waiting_for"] == []
        assert event["error"] == ""
        vm = event["vm"]
        assert list(vm) == ["version", "channel", "go_version", "os", "arch"]
        assert all(isinstance(value, str) for value in vm.values())
        assert vm["version"] == version
        assert vm["channel"] == "stable"
        assert vm["go_version"].startswith("go1.")
        assert vm["os"] == GO_OS[sys.platform]
        assert vm["arch"] == GO_ARCH[platform.machine().lower()]
        # stdin is still open and nothing was written to it: the process ends anyway.
        p.finish()


def test_lines_on_stdin_get_no_answer() -> None:
    with Proc("version") as p:
        p.read_event()
        with contextlib.suppress(BrokenPipeError):  # the process may already be gone
            p.send({"type": "quit"})
        p.finish()
        assert len(p.raw) == 1
