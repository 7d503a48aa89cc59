"""Tests for tests/forkserver.py: a child is a process of its own, in its own place, and
ends as ``python SCRIPT`` or ``python -m pytest`` would; one past its time limit is
killed with what it started, and the server goes on."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.helpers import process_running
from tests.forkserver import ForkServer

SCRIPT = """
import json, os, sys, tempfile
print(json.dumps({
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "tmp": tempfile.gettempdir(),
    "path0": os.path.abspath(sys.path[0]),
    "pid": os.getpid(),
    "group": os.getpgid(0),
    "stdin": sys.stdin.read(),
}))
print("on stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def place(root: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A working directory and the environment of a child that runs there."""
    work, tmp = root / name / "work", root / name / "tmp"
    work.mkdir(parents=True)
    tmp.mkdir()
    return work, {"PATH": os.environ["PATH"], "TMPDIR": str(tmp), "HOME": str(root / name)}


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ForkServer, Path]]:
    root = tmp_path_factory.mktemp("forks")
    work, env = place(root, "server")
    with ForkServer({**os.environ, **env}, work) as server:
        yield server, root


def test_a_script_runs_in_its_own_place_and_process(forks: tuple[ForkServer, Path]) -> None:
    server, root = forks
    work, env = place(root, "script")
    (work / "show.py").write_text(SCRIPT)
    forked = server.run("script", ["show.py", "3"], work, env, 20, work.parent)
    assert forked.code == 3 and forked.err == "on stderr\n"
    seen = json.loads(forked.out)
    assert seen["cwd"] == seen["path0"] == str(work)
    assert seen["env"] == env and seen["tmp"] == env["TMPDIR"]
    assert seen["pid"] == seen["group"] != os.getpid()  # a process group of its own
    assert seen["stdin"] == ""
    # An uncaught exception: exit 1 and its traceback, as with python SCRIPT.
    (work / "fail.py").write_text("raise ValueError('no')\n")
    forked = server.run("script", ["fail.py"], work, env, 20, work.parent)
    assert forked.code == 1 and forked.err.rstrip().endswith("ValueError: no")


def test_pytest_runs_with_the_plugin_loaded_as_pytest_loads_it(
    forks: tuple[ForkServer, Path],
) -> None:
    server, root = forks
    work, env = place(root, "pytest")
    env |= {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": "simulator.pytest_plugin"}
    (work / "test_it.py").write_text(
        textwrap.dedent(
            """
            def test_passes(zread_sim):
                assert zread_sim.start("version").done

            def test_fails():
                assert 1 == 2
            """
        )
    )
    forked = server.run("pytest", ["-q", "-p", "no:cacheprovider"], work, env, 30, work.parent)
    assert forked.code == 1
    # The plugin was not imported before pytest marked it: no warning that it was.
    assert re.search(r"^1 failed, 1 passed in [0-9.]+s$", forked.out, re.MULTILINE), forked.out
    assert "assert 1 == 2" in forked.out


def test_a_child_past_its_time_is_killed_with_what_it_started(
    forks: tuple[ForkServer, Path],
) -> None:
    server, root = forks
    work, env = place(root, "slow")
    pid_file = work / "pid"
    (work / "slow.py").write_text(
        "import pathlib, subprocess, sys, time\n"
        f"child = subprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    forked = server.run("script", ["slow.py"], work, env, 1.0, work.parent)
    assert forked.code is None
    left = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and process_running(left):
        time.sleep(0.05)
    assert not process_running(left)
    (work / "quick.py").write_text("print('next')\n")
    assert server.run("script", ["quick.py"], work, env, 20, work.parent).out == "next\n"
