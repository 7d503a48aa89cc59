"""simulator.signals: signals caught first, held for the session, given back to a tool.

Each case runs in a process of its own: signal handlers are the process's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


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
