"""Tests for simulator.warmpeer: which launchers a server's child can stand in for, and
what the child takes on of theirs, on real processes."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator import warmpeer

pytestmark = pytest.mark.skipif(not Path("/proc/self/ns").exists(), reason="needs /proc")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_process_in_this_world_is_served_with_its_limits(
    sleeper: subprocess.Popen[bytes],
) -> None:
    data = warmpeer.settings(sleeper.pid)
    assert data is not None and warmpeer.size(data) == len(data)


def test_a_pid_this_namespace_cannot_see_or_one_gone_is_not_served() -> None:
    assert warmpeer.settings(0) is None
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert warmpeer.settings(gone.pid) is None


def test_a_hard_limit_above_this_processs_is_not_served() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 64:
        pytest.skip("needs room under the hard limit of open files")
    lower = hard - 1
    code = (
        "import resource, sys; from simulator import warmpeer; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({lower}, {lower})); "
        "print(warmpeer.settings(int(sys.argv[1])) is None)"
    )
    with subprocess.Popen(["sleep", "60"]) as peer:
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, str(peer.pid)],
                capture_output=True,
                text=True,
                timeout=30,
                cwd=Path(__file__).resolve().parents[1],
            )
        finally:
            peer.kill()
    assert done.stdout.strip() == "True", done.stderr


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare")
@pytest.mark.parametrize("flag", ["--uts", "--mount", "--net", "--ipc"])
def test_a_process_in_another_namespace_is_not_served(flag: str) -> None:
    proc = subprocess.Popen(
        ["unshare", flag, "sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        try:
            proc.wait(0.3)
        except subprocess.TimeoutExpired:
            pass
        else:
            pytest.skip(f"unshare {flag} is not permitted here")
        # unshare execs sleep in the new namespace: the pid is the sleeper's
        deadline = 100
        while os.readlink(f"/proc/{proc.pid}/exe").endswith("unshare") and deadline:
            deadline -= 1
            os.sched_yield()
        assert warmpeer.settings(proc.pid) is None
    finally:
        proc.kill()
        proc.wait()


def test_a_child_takes_on_what_the_settings_say(sleeper: subprocess.Popen[bytes]) -> None:
    cpus = sorted(os.sched_getaffinity(0))[:1]
    code = (
        "import os, resource, sys; from simulator import warmpeer; "
        "data = warmpeer.settings(int(sys.argv[1])); "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100)); "
        f"os.sched_setaffinity(0, {{{cpus[0]}}}); os.setpriority(os.PRIO_PROCESS, 0, 1); "
        "warmpeer.apply(data); "
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], "
        "resource.getrlimit(resource.RLIMIT_FSIZE)[0], "
        "os.getpriority(os.PRIO_PROCESS, 0), len(os.sched_getaffinity(0)))"
    )
    peer = subprocess.Popen(
        ["bash", "-c", "ulimit -n 50 && ulimit -f 100 && exec nice -n 2 sleep 60"]
    )
    try:
        for _ in range(1000):  # bash execs sleep: wait for it
            if os.readlink(f"/proc/{peer.pid}/exe").endswith("sleep"):
                break
            os.sched_yield()
        done = subprocess.run(
            [sys.executable, "-c", code, str(peer.pid)],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=Path(__file__).resolve().parents[1],
        )
    finally:
        peer.kill()
        peer.wait()
    assert done.stdout.split() == ["50", str(100 * 1024), "2", str(len(os.sched_getaffinity(0)))]
