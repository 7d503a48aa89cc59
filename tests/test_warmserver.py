"""Tests for simulator.warmserver: the command line of ``serve`` and the loop, with real
processes and a real socket: a bad request, a launcher gone, a stop with a child running."""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.launcher import VARIABLE
from simulator.tools.serve import ServerProcess
from simulator.warmserver import MAX_RESPAWN_PAUSE, REQUEST_TIMEOUT, WarmServer, _Spare

ROOT = Path(__file__).resolve().parents[1]


def test_serve_in_a_folder_open_to_others_is_one_line_and_exit_2(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "serve", "--socket", str(tmp_path / "z.sock")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("zread-sim serve: --socket folder ")
    assert done.stderr.count("\n") == 1


def test_garbage_is_dropped_and_the_server_serves_on() -> None:
    server = ServerProcess()
    try:
        with socket.socket(socket.AF_UNIX) as peer:
            peer.connect(server.path)
            peer.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert peer.recv(100) == b""  # closed, nothing said
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


def test_a_peer_that_sends_more_than_three_fds_is_dropped() -> None:
    server = ServerProcess()
    try:
        with socket.socket(socket.AF_UNIX) as peer, open(os.devnull, "rb") as null:
            peer.connect(server.path)
            fds = array.array("i", [null.fileno()] * 3).tobytes()
            for _ in range(2):  # a byte of a request, three fds each time
                peer.sendmsg([b"Z"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            assert peer.recv(100) == b""  # closed, its fds not kept
        assert server.proc.poll() is None  # and the server serves on
    finally:
        server.stop()


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
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):  # before the deadline: still open
            peer.recv(1)
        for launch in server._pending:
            launch.deadline = time.monotonic() - 1
        server._on_time()
        peer.settimeout(5)
        assert peer.recv(1) == b"" and server._timeout() is None


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


def test_a_stop_during_the_warm_up_stops_the_server() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        term = 1 << (signal.SIGTERM - 1)
        status = Path(f"/proc/{proc.pid}/status")
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
            if int(fields["SigBlk"], 16) & term:  # held off: the warm-up's runs are on
                break
        else:
            pytest.fail("the server never held SIGTERM off while it warmed up")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, err) == (0, b"")
    path = out.decode().strip().partition("=")[2]
    assert not path or not Path(path).exists()
