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
from pathlib import Path

from simulator.launcher import VARIABLE
from simulator.tools.serve import ServerProcess

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
