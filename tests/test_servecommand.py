"""Tests for simulator.servecommand: ``zread-sim serve``'s command line and a server's
life, with real processes: a bad place or flag is one line and exit 2 before any
warm-up, a stop during the warm-up stops it, ``--idle`` and ``--until-changed`` end it
by itself, its socket appears only once it is warm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.launcher import VARIABLE

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


def test_stop_at_eof_without_a_pipe_on_stdin_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "serve", "--stop-at-eof"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,  # at its end at once: never what a starter means
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "zread-sim serve: --stop-at-eof needs a pipe or a socket on stdin\n"


def test_without_stop_at_eof_the_end_of_stdin_is_not_a_stop() -> None:
    stdin, starter = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "serve"],
        cwd=ROOT,
        env=_clean_env(),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        os.close(stdin)
        assert proc.stdout is not None
        path = proc.stdout.readline().decode().strip().partition("=")[2]
        os.close(starter)  # its stdin ends (a user's terminal closed, say): it serves on
        done = _version(path)
        assert done.returncode == 0 and json.loads(done.stdout)["done"] is True
        assert proc.poll() is None and Path(path).exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (0, b"")


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
