"""SIGTERM, SIGINT and SIGHUP are quit from the first moment the program's own code runs.

Each driver is spawned 40 times, as a hub does, and signalled within the 200 ms after
the spawn returned, the three signals in turn: while Python starts, while the simulator
imports, at the first event, while the session runs. The window is cut into 40 slices of
5 ms and each trial falls at a random moment of its own slice, so every run covers the
whole window and, run after run, every moment of it. Every trial must end as ``quit``
does: events on stdout, the last and only ``done:true`` one, exit 0, and no traceback on
stderr; a failure names the signal and the moment.

Before the first line of the program runs, the interpreter's own start-up is a window no
Python program can close (FIDELITY.md §4: "from the first moment the program's own code
runs"). A trial whose moment falls in it waits until the process has caught the signals
(its ``SigCgt`` in ``/proc``), and is signalled then, at the earliest moment the rule
covers.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

TRIALS = 40
SPREAD_S = 0.2
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CAUGHT = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))
"""Both bits set in ``SigCgt`` once the program's first instruction caught the signals
(SIGHUP is caught last; SIGINT is Python's own from its start, so it tells nothing)."""

DRIVERS = {
    "browse": ["--port", "0"],
    "generate": [],
    "config": [],
    "login": [],
    "update": [],
    "version": [],
}

pytestmark = [
    pytest.mark.skipif(
        not Path("/proc/self/status").exists(), reason="needs /proc to see when signals are caught"
    ),
    pytest.mark.cold,  # the start-up is what these tests signal
]


@dataclass
class Trial:
    delay: float
    signum: int
    waited: float = 0.0
    code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""


def _caught(pid: int) -> bool | None:
    """Whether ``pid`` catches SIGTERM and SIGHUP; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    if fields.get("State", "Z").startswith(("Z", "X")):  # exited, not yet waited for
        return None
    return int(fields.get("SigCgt", "0"), 16) & CAUGHT == CAUGHT


def _run(argv: Sequence[str], env: dict[str, str], trial: Trial) -> Trial:
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    spawned = time.monotonic()
    try:
        time.sleep(max(0.0, spawned + trial.delay - time.monotonic()))
        moment = time.monotonic()
        while _caught(proc.pid) is False:
            time.sleep(0.0002)
        trial.waited = time.monotonic() - moment
        proc.send_signal(trial.signum)
        # stdin stays open: the end of input is not what ends these runs.
        trial.stdout = proc.stdout.read() if proc.stdout else b""
        trial.stderr = proc.stderr.read() if proc.stderr else b""
        trial.code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream:
                stream.close()
    return trial


def _verdict(trial: Trial) -> str:
    """What is wrong with a trial's ending, or "" when it ended as quit does."""
    import json

    name = signal.Signals(trial.signum).name
    where = f"{name} at {trial.delay * 1000:.1f} ms"
    if trial.code != 0:
        return f"{where}: exit {trial.code}, stderr {trial.stderr[-300:]!r}"
    if b"Traceback" in trial.stderr or b"KeyboardInterrupt" in trial.stderr:
        return f"{where}: a traceback on stderr: {trial.stderr[-300:]!r}"
    lines = trial.stdout.splitlines()
    if not lines:
        return f"{where}: no event"
    done = [json.loads(line)["done"] for line in lines]
    if done[-1] is not True or done.count(True) != 1:
        return f"{where}: events end {done[-3:]}, not with one done:true"
    return ""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("command", DRIVERS)
def test_a_signal_at_any_moment_of_start_up_is_quit(command: str, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "simulator", command, "--stdio", "--no-files"]
    argv += DRIVERS[command]
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    slice_s = SPREAD_S / TRIALS
    trials = [
        Trial(delay=(i + random.random()) * slice_s, signum=SIGNALS[i % len(SIGNALS)])
        for i in range(TRIALS)
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        ended = list(pool.map(lambda trial: _run(argv, env, trial), trials))
    wrong = [verdict for trial in ended if (verdict := _verdict(trial))]
    assert wrong == [], f"{len(wrong)} of {TRIALS} trials:\n" + "\n".join(wrong[:10])
    # Some trials were signalled at the program's first instruction, long before any
    # event: the start-up was exercised, not only the running session.
    assert any(trial.waited > 0 for trial in ended)


def test_a_tools_ctrl_c_during_start_up_ends_it_with_130_and_no_traceback(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "simulator", "load", "generate", "--sessions", "2"]
    env = {**os.environ, "HOME": str(tmp_path)}
    # At the moment the signals are caught, the tool is still importing: the SIGINT is
    # held, then handed to the tool as its Ctrl-C when it gets its signals back.
    trial = _run(argv, env, Trial(delay=0.0, signum=signal.SIGINT))
    assert (trial.code, trial.stderr) == (130, b"")


# -- a signal while the process waits on something -----------------------------------------


def _simulator(*args: str) -> list[str]:
    return [sys.executable, "-m", "simulator", *args]


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_signal_while_it_waits_for_its_first_command_is_quit(tmp_path: Path, signum: int) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        _simulator("generate", "--stdio", "--no-files"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the first event: now it reads stdin, blocked
        assert b'"waiting_for":["select_action"' in first, first
        proc.send_signal(signum)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert rest.splitlines()[-1].endswith(b'"done":true,"error":""}'), rest
    assert b"Traceback" not in err


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="needs F_SETPIPE_SZ (Linux)")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_it_waits_to_write_to_a_reader_that_never_reads_ends_it(
    tmp_path: Path, signum: int
) -> None:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    os.write(write_end, b"x" * fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ))  # full already
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        _simulator("generate", "--stdio", "--no-files"),
        stdin=subprocess.PIPE,
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(write_end)
    try:
        deadline = time.monotonic() + 30
        while not _writing(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # until its first event waits for room that never comes
        assert _writing(proc.pid), "it never came to write its first event"
        proc.send_signal(signum)
        code = proc.wait(timeout=30)  # generous: a hang fails here
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
        if proc.stdin:
            proc.stdin.close()
    assert code == -signum  # quit cannot write its events: the signal ends it
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
    proc.stderr.close()


def _writing(pid: int) -> bool:
    """Whether ``pid`` waits in a write to a pipe (its ``wchan``)."""
    try:
        return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False
