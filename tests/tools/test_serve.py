"""Tests for simulator.tools.serve: the server a test session starts, and its switch."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.launcher import VARIABLE
from simulator.tools.serve import ServerProcess, start_for_tests

pytest_plugins = ["pytester"]


def test_a_server_process_says_its_socket_and_stops() -> None:
    server = ServerProcess()
    assert stat.S_ISSOCK(os.stat(server.path).st_mode)
    server.stop()
    server.stop()  # twice is harmless
    assert server.proc.returncode == 0 and not Path(server.path).exists()


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no one has reaped yet does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_a_server_process_ends_with_its_starter_even_killed() -> None:
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from simulator.tools.serve import ServerProcess\n"
            "server = ServerProcess()\n"
            "print(server.proc.pid, server.path, flush=True)\n"
            "time.sleep(600)\n",
        ],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
    )
    try:
        assert starter.stdout is not None
        pid, path = starter.stdout.readline().decode().split()
        assert _running(int(pid)) and os.path.exists(path)
    finally:
        starter.send_signal(signal.SIGKILL)  # a session killed hard: no cleanup runs
        starter.communicate()
    deadline = time.monotonic() + 20
    while (_running(int(pid)) or os.path.exists(path)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _running(int(pid)) and not os.path.exists(path)  # stopped, cleaned up


UNNEEDED = ("-p", "no:faker", "-p", "no:pytest-subprocess", "-p", "no:hypothesispytest")
"""Plugins the inner runs have no use for: each costs every pytest start-up."""


def test_one_server_per_pytest_session_and_none_with_the_option(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        f"""
        import os
        from simulator.tools.serve import start_for_tests

        def test_one(pytestconfig):
            first = start_for_tests(pytestconfig)
            assert start_for_tests(pytestconfig) == first
            os.environ["SEEN"] = first.get({VARIABLE!r}, "none")
            assert os.path.exists(first[{VARIABLE!r}]) if first else True
            print("SOCKET=" + os.environ["SEEN"])
        """
    )
    on = pytester.runpytest_subprocess("-p", "no:cacheprovider", *UNNEEDED, "-s")
    on.assert_outcomes(passed=1)
    (line,) = [line for line in on.outlines if "SOCKET=" in line]
    socket_path = line.split("SOCKET=", 1)[1].strip()
    assert socket_path.endswith("zread.sock") and not os.path.exists(socket_path)  # stopped
    off = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *UNNEEDED, "-s", "--zread-no-server"
    )
    off.assert_outcomes(passed=1)
    assert any("SOCKET=none" in line for line in off.outlines)


def test_start_for_tests_is_given_a_pytest_config(pytestconfig: pytest.Config) -> None:
    assert start_for_tests(pytestconfig) == start_for_tests(pytestconfig)
