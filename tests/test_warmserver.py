"""Tests for simulator.warmserver: the loop, with real
processes and a real socket: a bad request, a launcher gone, a stop with a child running,
a server that cannot fork, a spare that dies as its launch comes."""

from __future__ import annotations

import array
import json
import os
import platform
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.launcher import HANDOVER_TIMEOUT, VARIABLE, encode_request
from simulator.tools.serve import ServerProcess
from simulator.warmserver import (
    MAX_RESPAWN_PAUSE,
    REQUEST_TIMEOUT,
    WarmServer,
    _Launch,
    _Spare,
)

ROOT = Path(__file__).resolve().parents[1]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}


def _version(path: str) -> subprocess.CompletedProcess[bytes]:
    """``zread version --stdio`` with the server at ``path``: served, or run cold."""
    return subprocess.run(
        [sys.executable, "-m", "simulator", "version", "--stdio"],
        cwd=ROOT,
        env=_clean_env() | {VARIABLE: path},
        capture_output=True,
        timeout=30,
    )


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_garbage_is_dropped_and_the_server_serves_on() -> None:
    server = ServerProcess()
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(server.path)
            peer.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert _said(peer) == b"go\n"  # then closed, nothing more said
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
        done = subprocess.run(
            [sys.executable, "-m", "simulator", "version", "--stdio"],
            cwd=ROOT,
            env=env | {VARIABLE: server.path},
            capture_output=True,
            timeout=30,
        )
        assert done.returncode == 0 and json.loads(done.stdout)["done"] is True
    finally:
        server.stop()
    assert server.proc.returncode == 0


def test_a_stop_kills_the_children_and_their_launchers_see_it() -> None:
    server = ServerProcess()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "config", "--stdio", "--no-files"],
        cwd=ROOT,
        env=env | {VARIABLE: server.path},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
        server.stop()
        assert proc.wait(30) == -signal.SIGKILL  # killed, as its child was
        assert server.proc.returncode == 0 and not Path(server.path).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_a_peer_that_sends_more_fds_than_a_request_carries_is_dropped() -> None:
    server = ServerProcess()
    try:
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
        deadline = time.monotonic() + 30
        while not children.read_text().split() and time.monotonic() < deadline:
            time.sleep(0.01)  # its spare is forked: from now on the server's fds hold still
        before = _fd_count(server.proc.pid)
        with socket.socket(socket.AF_UNIX) as peer, open(os.devnull, "rb") as null:
            peer.connect(server.path)
            fds = array.array("i", [null.fileno()] * 3).tobytes()
            for _ in range(2):  # a byte of a request, three fds each time
                peer.sendmsg([b"Z"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            assert _said(peer) == b"go\n"  # then closed, its fds not kept:
            assert _fd_count(server.proc.pid) == before  # (dropped before the close)
        assert server.proc.poll() is None  # and the server serves on
    finally:
        server.stop()


def _said(peer: socket.socket) -> bytes:
    """All the server says on ``peer`` until it closes the connection."""
    peer.settimeout(5)
    said = b""
    while chunk := peer.recv(100):
        said += chunk
    return said


# -- under pressure: the loop's own steps, on real sockets, in this process -------------------


def _loop(tmp_path: Path) -> tuple[WarmServer, socket.socket, list[str]]:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "s.sock"))
    listener.listen()
    listener.setblocking(False)
    warned: list[str] = []
    return WarmServer(listener, warned.append), listener, warned


def test_a_connection_that_never_sends_its_request_is_closed_at_its_deadline(
    tmp_path: Path,
) -> None:
    server, listener, _ = _loop(tmp_path)
    with listener, socket.socket(socket.AF_UNIX) as peer:
        peer.connect(str(tmp_path / "s.sock"))
        server._accept()
        timeout = server._timeout()
        assert timeout is not None and 0 < timeout <= REQUEST_TIMEOUT
        server._on_time()
        peer.settimeout(5)
        assert peer.recv(3) == b"go\n"
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):  # before the deadline: still open
            peer.recv(1)
        for launch in server._pending:
            launch.deadline = time.monotonic() - 1
        server._on_time()
        assert _said(peer) == b"" and server._timeout() is None


def test_a_bug_while_a_new_launch_is_read_closes_that_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop's catch-all sees the listener, not the launch its accept made: the launch
    # is closed on the way out, so its launcher runs by itself at once instead of waiting.
    server, listener, _ = _loop(tmp_path)

    def bug(launch: object, data: bytes) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(server, "_take", bug)
    with listener, socket.socket(socket.AF_UNIX) as peer:
        peer.connect(str(tmp_path / "s.sock"))
        peer.sendall(b"zread")
        with pytest.raises(RuntimeError):
            server._accept()
        assert _said(peer) == b"go\n" and not server._pending


def test_out_of_fds_a_connection_is_refused_rather_than_spun_on(tmp_path: Path) -> None:
    code = f"""
import os, resource, select, socket, sys
from simulator.warmserver import WarmServer
listener = socket.socket(socket.AF_UNIX)
listener.bind({str(tmp_path / "s.sock")!r})
listener.listen()
listener.setblocking(False)
server = WarmServer(listener, print)
server._reserve = os.open(os.devnull, os.O_RDONLY)
peer = socket.socket(socket.AF_UNIX)
peer.connect({str(tmp_path / "s.sock")!r})
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
server._accept()
print(peer.recv(1) == b"", select.select([listener], [], [], 0)[0] == [])
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert (done.stdout, done.stderr) == ("True True\n", "")


def test_a_spare_that_keeps_dying_is_forked_again_after_a_growing_pause(tmp_path: Path) -> None:
    server, listener, _ = _loop(tmp_path)
    pauses = []
    with listener:
        for _ in range(4):
            ours, theirs = socket.socketpair()
            theirs.close()
            server._respawn(_Spare(0, -1, ours))  # died as soon as it was forked
            ours.close()
            assert server._spare is None
            pauses.append(server._respawn_pause)
            timeout = server._timeout()
            assert timeout is not None and timeout <= server._respawn_pause
    assert pauses == [0.05, 0.1, 0.2, 0.4]
    assert min(MAX_RESPAWN_PAUSE, 0.05 * 2**10) == MAX_RESPAWN_PAUSE


_NO_FORK = {  # (AUDIT_ARCH_*, clone, clone3, fork, vfork); none: a number no call has
    "x86_64": (0xC000003E, 56, 435, 57, 58),
    "aarch64": (0xC00000B7, 220, 435, 0xFFFFFFFF, 0xFFFFFFFF),
}

NO_FORK_SERVER = """
import ctypes, errno, platform, struct, sys
from simulator import launcher, servecommand

def no_fork():
    # A seccomp filter: from now on fork fails in this process as at the process limit
    # (EAGAIN): clone but a thread's, fork and vfork; clone3 says ENOSYS, so glibc
    # falls back to clone.
    arch, clone, clone3, fork, vfork = TABLE[platform.machine()]
    allow, fail = 0x7FFF0000, 0x00050000
    def op(code, k, jt=0, jf=0):
        return struct.pack("HBBI", code, jt, jf, k)
    program = b"".join([
        op(0x20, 4), op(0x15, arch, 0, 7),
        op(0x20, 0), op(0x15, clone3, 7, 0), op(0x15, fork, 5, 0), op(0x15, vfork, 4, 0),
        op(0x15, clone, 0, 2), op(0x20, 16), op(0x45, 0x10000, 0, 1),
        op(0x06, allow), op(0x06, fail | errno.EAGAIN), op(0x06, fail | errno.ENOSYS),
    ])
    code = ctypes.create_string_buffer(program)
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", 12, ctypes.addressof(code)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, fprog, 0, 0):  # NO_NEW_PRIVS, SECCOMP
        raise OSError(ctypes.get_errno(), "seccomp")

def ready(path):
    no_fork()
    print(f"{launcher.VARIABLE}={path}", flush=True)

def warn(line):
    print(line, file=sys.stderr, flush=True)

sys.exit(servecommand.serve(None, ready=ready, warn=warn))
""".replace("TABLE", repr(_NO_FORK))


@pytest.mark.skipif(
    platform.machine() not in _NO_FORK, reason="a seccomp filter for x86_64, aarch64"
)
def test_when_no_process_can_be_forked_a_launch_runs_by_itself_at_once() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", NO_FORK_SERVER],
        cwd=ROOT,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        path = proc.stdout.readline().decode().strip().partition("=")[2]
        assert path, "the server did not start"
        counts = []
        for _ in range(3):
            started = time.monotonic()
            done = _version(path)
            took = time.monotonic() - started
            assert done.returncode == 0 and json.loads(done.stdout)["done"] is True
            assert took < HANDOVER_TIMEOUT / 2  # refused at once, not timed out
            counts.append(_fd_count(proc.pid))
        deadline = time.monotonic() + 10  # a spare tried again may hold its pair a moment
        while _fd_count(proc.pid) != counts[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _fd_count(proc.pid) == counts[0]  # no failed fork keeps a fd
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text()
        assert proc.poll() is None and children == ""  # it serves on, with no child
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (0, b"")  # nothing said: no internal error


def test_a_spare_that_dies_in_the_turn_of_its_launch_is_buried_once_and_forked_again(
    tmp_path: Path,
) -> None:
    server, listener, _ = _loop(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    pidfd = os.pidfd_open(dead.pid)
    select.select([pidfd], [], [], 30)  # it has ended (not reaped): its pidfd is readable
    ours, theirs = socket.socketpair()
    theirs.close()
    spare = _Spare(dead.pid, pidfd, ours)
    server._selector.register(pidfd, selectors.EVENT_READ, spare)
    server._spare = spare
    conn, peer = socket.socketpair()
    launch = _Launch(conn, os.getpid())
    request = encode_request(0o22, [b"zread", b"version", b"--stdio"], [])
    launch.data += request
    launch.fds = [os.open(os.devnull, os.O_RDWR) for _ in range(4)]
    held: list[int] = []
    try:
        # The turn's order: the launch is read first and handed to the dead spare
        # (EPIPE)...
        server._start(launch, len(request))
        assert peer.recv(1) == b""  # its launcher runs the command itself
        assert spare.pidfd == -1 and server._spare is None
        assert server._respawn_at is not None and server._respawn_pause == 0.05
        while not held or held[-1] < pidfd:  # the buried pidfd's number, another's now
            held.append(os.open(os.devnull, os.O_RDONLY))
        # ...then the spare's own pidfd event, from the same batch.
        server._ready(spare)
        for fd in held:
            os.fstat(fd)  # none closed by a second burial
        assert server._respawn_pause == 0.05  # one pause, not two
        dead.wait(5)  # reaped by the burial already
    finally:
        for fd in held:
            os.close(fd)
        peer.close()
        ours.close()
        listener.close()
        server._selector.close()
