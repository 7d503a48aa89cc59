"""Tests for simulator.warmchild: a served child is the process its client started, in its
working directory, environment and streams, holding nothing of the server's."""

from __future__ import annotations

import json
import os
import shutil
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


@pytest.mark.parametrize("zone", ["UTC-9", "UTC+5"])
def test_the_child_keeps_the_launchers_local_time(
    server: ServerProcess, tmp_path: Path, zone: str
) -> None:
    """A version is named by local time: the launcher's zone, not the server's."""
    import datetime as dt

    hours = -int(zone[3:])  # POSIX: UTC-9 is nine hours ahead of UTC
    proc = served(server, tmp_path, "generate", "--stdio", "-y", TZ=zone, ZREAD_SIM_SPEED="0")
    proc.communicate(timeout=30)
    assert proc.returncode == 0
    (name,) = os.listdir(tmp_path / ".zread" / "wiki" / "versions")
    named = dt.datetime.strptime(name, "%Y-%m-%d-%H%M%S")
    local = dt.datetime.now(dt.timezone(dt.timedelta(hours=hours))).replace(tzinfo=None)
    assert abs((local - named).total_seconds()) < 120


def test_a_working_directory_gone_is_the_same_served_or_cold(
    server: ServerProcess, tmp_path: Path
) -> None:
    results = []
    for run in (f"launcher.hand_over({server.path!r})", "main()"):
        gone = tmp_path / f"gone{len(results)}"
        gone.mkdir()
        code = (
            "import os, sys\n"
            f"os.rmdir({str(gone)!r})\n"
            "sys.argv = ['zread', 'version', '--stdio']\n"
            "from simulator import launcher\n"
            "from simulator.cli import main\n"
            f"sys.exit({run})\n"
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=gone,
            env=base | {"PYTHONPATH": str(ROOT)},
            capture_output=True,
            timeout=30,
        )
        results.append((done.returncode, done.stdout, done.stderr))
    # The child enters the very folder (a descriptor), deleted as it is: what the
    # command makes of it is what it makes of it in a process of its own.
    assert results[0] == results[1]
    assert results[0][0] == 2


def _limited(server: ServerProcess, cwd: Path, shell: str, *argv: str) -> subprocess.Popen[bytes]:
    """A launcher started by ``bash -c '<shell> && exec python -m simulator ARGV'``."""
    command = " ".join([shell, "&& exec", sys.executable, "-m", "simulator", *argv])
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    return subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=base | {VARIABLE: server.path, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _served_by(server: ServerProcess, proc: subprocess.Popen[bytes]) -> int | None:
    """The server's child running ``proc``'s command; None when ``proc`` runs it itself.
    Asked once its first event came: a served child writes it, so it is there by then."""
    assert proc.stdout is not None
    pipe = f"pipe:[{os.fstat(proc.stdout.fileno()).st_ino}]"
    pid = server.proc.pid
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            if os.readlink(f"/proc/{child}/fd/1") == pipe:
                return int(child)
        except OSError:  # a spare that ended meanwhile
            continue
    return None


def _limits(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    return {line[:26].strip(): " ".join(line[26:].split()) for line in lines}


def _quit(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b'{"type":"quit"}\n')
    proc.stdin.close()
    assert proc.wait(30) == 0


def test_the_child_has_the_launchers_limits_nice_value_and_cpus(
    server: ServerProcess, tmp_path: Path
) -> None:
    cpus = sorted(os.sched_getaffinity(0))[:1]
    shell = (
        "ulimit -n 40 && ulimit -f 2048 && ulimit -v 4000000 && ulimit -c 0"
        f" && renice -n 3 -p $$ >/dev/null && taskset -pc {cpus[0]} $$ >/dev/null"
    )
    proc = _limited(server, tmp_path, shell, "config", "--stdio", "--no-files")
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    child = _served_by(server, proc)
    assert child is not None, "the launch was not served"
    mine = _limits(proc.pid)
    assert _limits(child) == mine
    assert mine["Max open files"].startswith("40 40")
    assert mine["Max file size"].startswith("2097152 2097152")
    assert mine["Max address space"].startswith("4096000000 4096000000")
    assert os.getpriority(os.PRIO_PROCESS, child) == os.getpriority(os.PRIO_PROCESS, proc.pid)
    assert os.sched_getaffinity(child) == set(cpus)
    _quit(proc)


class _LimitedServer(ServerProcess):
    """A server whose hard limit of open files is ``files``."""

    def __init__(self, files: int) -> None:
        import resource

        env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "simulator", "serve", "--stop-at-eof"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (files, files)),
        )
        self.path = self._ready_line()


def _server_limited_to(files: int) -> ServerProcess:
    return _LimitedServer(files)


def test_a_limit_above_the_servers_runs_cold(tmp_path: Path) -> None:
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 512:
        pytest.skip("needs room under the hard limit of open files")
    started = _server_limited_to(256)
    try:
        proc = _limited(started, tmp_path, "ulimit -n 300", "config", "--stdio", "--no-files")
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
        assert _served_by(started, proc) is None  # the child could not have it: cold
        _quit(proc)
        proc = _limited(started, tmp_path, "ulimit -n 200", "config", "--stdio", "--no-files")
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
        assert _served_by(started, proc) is not None  # under the server's: served
        _quit(proc)
    finally:
        started.stop()


def _can_unshare() -> bool:
    return (
        subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False).returncode
        == 0
    )


@pytest.mark.skipif(
    not shutil.which("unshare") or not _can_unshare(), reason="needs unshare --mount"
)
def test_a_launcher_in_another_mount_namespace_writes_the_wiki_it_sees(
    server: ServerProcess, tmp_path: Path
) -> None:
    project, hidden = tmp_path / "project", tmp_path / "sandbox"
    project.mkdir()
    hidden.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    # The client's sandbox: its own view of the project folder, a bind mount of another.
    shell = (
        f"unshare --mount --propagation private sh -c 'mount --bind {hidden} {project}"
        f" && cd {project} && exec {sys.executable} -m simulator generate --stdio -y"
        f" --speed 0 --home {home}'"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    done = subprocess.run(
        ["sh", "-c", shell],
        env=base | {VARIABLE: server.path, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["done"] is True
    assert (hidden / ".zread" / "wiki" / "current").exists()  # the folder the client saw
    assert not (project / ".zread").exists()  # not the one its sandbox hid


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
