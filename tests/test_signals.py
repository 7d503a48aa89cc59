"""simulator.signals: signals caught first, held for the session, given back to a tool.

Each case runs in a process of its own: signal handlers are the process's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from simulator import signals


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_signal_after_catch_is_held_until_taken_once() -> None:
    done = python(
        """
        import signal
        from simulator import signals
        signals.catch()
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGINT)
        print(signals.take(), signals.take())
        """
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True False\n", "")


def test_release_delivers_a_held_sigterm_as_the_default_would() -> None:
    done = python(
        """
        import signal
        from simulator import signals
        signals.catch()
        signal.raise_signal(signal.SIGTERM)
        print("held", flush=True)
        signals.release()
        print("not reached")
        """
    )
    assert done.returncode == -15
    assert done.stdout == "held\n"


def test_release_delivers_a_held_sigint_as_keyboardinterrupt() -> None:
    done = python(
        """
        import signal
        from simulator import signals
        signals.catch()
        signal.raise_signal(signal.SIGINT)
        try:
            signals.release()
        except KeyboardInterrupt:
            print("interrupted")
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        """
    )
    assert (done.returncode, done.stdout) == (0, "interrupted\nTrue\n")


def test_release_without_catch_changes_nothing() -> None:
    done = python(
        """
        import signal
        def mine(signum, frame): pass
        signal.signal(signal.SIGTERM, mine)
        from simulator import signals
        signals.release()
        print(signal.getsignal(signal.SIGTERM) is mine)
        """
    )
    assert (done.returncode, done.stdout) == (0, "True\n")


@pytest.mark.parametrize(
    ("argv", "session"),
    [
        (["version", "--stdio"], True),
        (["version"], False),
        (["--help"], False),
        (["scenarios"], False),
        (["generate"], False),  # refused without --stdio
        (["charts", "--help"], False),
    ],
)
def test_only_a_session_keeps_the_signals_caught(argv: list[str], session: bool) -> None:
    done = python(
        f"""
        import io, signal, sys
        from simulator import signals
        from simulator.cli import main
        signals.catch()
        sys.stdout = io.TextIOWrapper(io.BytesIO())
        main({argv!r}, stdin=io.BytesIO(), stdout=io.BytesIO(), stderr=io.StringIO())
        sys.stdout = sys.__stdout__
        print(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)
        """
    )
    assert done.stdout.splitlines()[-1] == str(session), done.stderr


# -- a signal is never held for ever -------------------------------------------------------

STUCK = """
import os, sys
from simulator import signals
signals.catch()
print("caught", flush=True)
os.open(sys.argv[1], os.O_RDONLY)  # a FIFO nobody writes to: waits, retried after a signal
print("opened")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_held_signal_ends_a_start_up_stuck_in_a_call(tmp_path: Path, signum: int) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK, str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"caught\n"
        time.sleep(0.2)  # in the open by now, or about to be: either way it must end
        proc.send_signal(signum)
        code = proc.wait(timeout=signals.GRACE_S + 30)  # generous: a hang fails here
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == -signum  # ended as by default: the shell says 128+N
    assert proc.stdout.read() == b"" and proc.stderr is not None and proc.stderr.read() == b""
    proc.stdout.close()
    proc.stderr.close()


def test_a_held_signal_taken_in_time_ends_nothing() -> None:
    done = python(
        f"""
        import signal, time
        from simulator import signals
        signals.catch()
        signal.raise_signal(signal.SIGTERM)
        print(signals.take(), flush=True)
        time.sleep({signals.GRACE_S} + 0.5)  # past the timer it disarmed
        print("alive")
        """
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\nalive\n", "")


def test_a_timer_disarmed_ends_nothing_and_one_left_armed_ends_the_process() -> None:
    code = f"""
        import signal, sys, time
        from simulator import signals
        signal.signal(signal.SIGHUP, lambda *_: None)  # a handler of the program's own
        signals.end_if_stuck(signal.SIGHUP)
        if sys.argv[1] == "disarm":
            signals.disarm()
        print("armed", flush=True)
        time.sleep({signals.GRACE_S} + 0.5)
        print("alive")
        """
    disarmed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), "disarm"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (disarmed.returncode, disarmed.stdout) == (0, "armed\nalive\n")
    armed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), "keep"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (armed.returncode, armed.stdout) == (-signal.SIGHUP, "armed\n")
