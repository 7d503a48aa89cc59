"""Tests for simulator.tools.serve: the server a test session starts, and its switch."""

from __future__ import annotations

import os
import stat
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
