"""Tests for simulator.warmchild: a served child is the process its client started, in its
working directory, environment and streams, holding nothing of the server's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.launcher import VARIABLE
from simulator.tools.serve import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    started = ServerProcess()
    assert started.path
    yield started
    started.stop()


def served(server: ServerProcess, cwd: Path, *argv: str, **env: str) -> subprocess.Popen[bytes]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    return subprocess.Popen(
        [sys.executable, "-m", "simulator", *argv],
        cwd=cwd,
        env=base | {VARIABLE: server.path, "PYTHONPATH": str(ROOT)} | env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def child_of(server: ServerProcess, proc: subprocess.Popen[bytes]) -> int:
    """The server's child writing ``proc``'s stdout."""
    assert proc.stdout is not None
    pipe = f"pipe:[{os.fstat(proc.stdout.fileno()).st_ino}]"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != proc.pid:
                try:
                    if os.readlink(entry / "fd" / "1") == pipe:
                        return int(entry.name)
                except OSError:
                    continue
        time.sleep(0.01)
    raise AssertionError("no served child")


def test_the_child_has_the_launchers_cwd_environment_and_streams_only(
    server: ServerProcess, tmp_path: Path
) -> None:
    proc = served(server, tmp_path, "config", "--stdio", "--no-files")
    assert proc.stdout is not None and proc.stdin is not None
    json.loads(proc.stdout.readline())
    child = child_of(server, proc)
    proc_dir = Path(f"/proc/{child}")
    assert os.readlink(proc_dir / "cwd") == str(tmp_path)
    fds = {int(fd.name): os.readlink(fd) for fd in (proc_dir / "fd").iterdir()}
    assert fds[0].startswith("pipe:") and fds[2].startswith("pipe:")
    assert fds[3].startswith("socket:")  # the launcher's connection, for the exit code
    others = [target for fd, target in fds.items() if fd > 3]
    assert not [t for t in others if t.startswith(("socket:", "anon_inode:"))], others
    status = (proc_dir / "status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("SigCgt"))
    caught = int(line.split()[1], 16)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        assert caught & (1 << (signum - 1))
    proc.stdin.write(b'{"type":"quit"}\n')
    proc.stdin.close()
    assert proc.wait(30) == 0


def test_the_child_runs_with_the_launchers_environment(
    server: ServerProcess, tmp_path: Path
) -> None:
    argv = ("generate", "--stdio", "-y", "--no-files")
    outputs = []
    for seed, socket_path in (("7", server.path), ("7", ""), ("0", server.path)):
        env = {"ZREAD_SIM_SEED": seed, "ZREAD_SIM_SPEED": "0", VARIABLE: socket_path}
        proc = served(server, tmp_path, *argv, **env)  # "" : run cold, for comparison
        out, _ = proc.communicate(timeout=30)
        outputs.append(out)
    assert outputs[0] == outputs[1] != outputs[2]


def test_a_working_directory_gone_is_exit_2_in_zreads_words(
    server: ServerProcess, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os, sys, runpy\n"
        f"os.rmdir({str(gone)!r})\n"
        "sys.argv = ['zread', 'version', '--stdio']\n"
        "from simulator import launcher\n"
        f"sys.exit(launcher.hand_over({server.path!r}))\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=gone,
        env=base | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=30,
    )
    # The launcher cannot even say where it is: it runs the command itself (here: the
    # script exits with None, 0); a child that cannot enter it says so and exits 2.
    assert done.returncode in (0, 2)
    if done.returncode == 2:
        assert done.stderr.startswith(b"zread: cannot enter the working directory")


def test_sigusr1_is_relayed_and_ends_the_launcher_as_it_ended_the_child(
    server: ServerProcess, tmp_path: Path
) -> None:
    proc = served(server, tmp_path, "config", "--stdio", "--no-files")
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    child = child_of(server, proc)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(30) == -signal.SIGUSR1
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not Path(f"/proc/{child}").exists()
