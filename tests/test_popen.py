"""Tests for simulator.popen: which launches are served, and installing it, without pytest's
fixture (tests/e2e/test_popen_e2e.py runs clients under ``zread_popen``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import pytest

from simulator.hosts.executable import write_zread_executable
from simulator.popen import REAL_POPEN, Launches, ServedPopen, pid_floor


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``zread`` on PATH, and no journal."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = write_zread_executable(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
    monkeypatch.delenv("ZREAD_SIM_JOURNAL", raising=False)
    return script


def test_which_launches_are_served(on_path: Path, tmp_path: Path) -> None:
    launches = Launches()
    assert launches.serves(["zread", "version"], None, False, None, None)
    assert launches.serves(str(on_path), None, False, None, None)
    assert launches.serves(["anything"], str(on_path), False, None, None)
    assert launches.serves([os.fsencode(on_path)], None, False, None, None)
    assert not launches.serves("zread version", None, True, None, None)  # a shell
    assert not launches.serves(["echo", "zread"], None, False, None, None)
    assert not launches.serves(["zread"], None, False, {"PATH": str(tmp_path)}, None)
    assert not launches.serves(["zread"], None, False, None, tmp_path / "missing")
    assert not launches.serves(["zread-sim"], None, False, None, None)


def test_installing_rebinds_and_uninstalling_restores(on_path: Path) -> None:
    kill, exec_ = os.kill, asyncio.BaseEventLoop.subprocess_exec
    with Launches() as launches:
        assert subprocess.Popen is launches.popen
        zread = subprocess.Popen(["zread", "version", "--stdio"], stdout=subprocess.PIPE)
        assert isinstance(zread, ServedPopen)
        assert isinstance(zread, subprocess.Popen) and isinstance(zread, REAL_POPEN)
        assert zread.pid >= pid_floor() and launches.served[zread.pid] is zread
        assert zread.communicate(timeout=10)[0].startswith(b'{"vm":{"version"')
        echo = subprocess.Popen(["echo"], stdout=subprocess.DEVNULL)  # positional too
        assert type(echo) is launches.popen and isinstance(echo, subprocess.Popen)
        assert echo.wait(10) == 0
    assert subprocess.Popen is REAL_POPEN
    assert os.kill is kill and asyncio.BaseEventLoop.subprocess_exec is exec_


def test_os_kill_routes_a_served_pid_and_passes_any_other_on(on_path: Path) -> None:
    with Launches() as launches:
        zread = subprocess.Popen(
            ["zread", "generate", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert zread.stdout is not None
        zread.stdout.readline()
        os.kill(zread.pid, signal.SIGKILL)
        assert zread.wait(5) == -signal.SIGKILL
        with pytest.raises(ProcessLookupError):  # a pid no process has, not served
            launches.kill(pid_floor() + 10_000, 0)
        zread.stdout.close()
        assert zread.stdin is not None
        zread.stdin.close()


def test_a_launch_that_would_fail_fails_as_popen_says(on_path: Path, tmp_path: Path) -> None:
    with Launches(), pytest.raises(FileNotFoundError):
        subprocess.Popen(["zread", "version"], cwd=tmp_path / "missing")
