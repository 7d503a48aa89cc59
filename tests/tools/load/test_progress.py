"""Tests for simulator.tools.load.progress: the tqdm bar, on a real terminal or none.

A terminal is a real pseudo-terminal (:func:`os.openpty`, 160 columns); no terminal is
a file.
"""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios

import pytest

from simulator.tools.load.progress import ProgressBar

POINT = {"t": 1.0, "live": 1234, "events_per_s": 5678.0, "p99_ms": 12.5}


def on_a_terminal(**options: object) -> str:
    """What a bar drawn on a real terminal wrote."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    try:
        with open(follower, "w", encoding="utf-8", closefd=False) as stream:
            bar = ProgressBar(stream, **options)  # type: ignore[arg-type]
            assert bar.enabled
            bar.show(3, POINT)
            bar.show(10, {**POINT, "t": 2.0, "p99_ms": None})
            bar.close()
            stream.flush()
        os.set_blocking(leader, False)
        data = b""
        while True:
            try:
                chunk = os.read(leader, 1 << 16)
            except BlockingIOError:
                break
            data += chunk
    finally:
        os.close(leader)
        os.close(follower)
    return data.decode()


def test_the_bar_is_quiet_when_its_stream_is_no_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, sessions=10, duration=None)
    assert not bar.enabled
    bar.show(3, POINT)
    bar.close()
    assert stream.getvalue() == ""


def test_nothing_is_written_before_the_first_tick() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, sessions=10, duration=None, enabled=True)
    bar.close()
    assert stream.getvalue() == ""


def test_on_a_terminal_the_bar_counts_sessions_to_their_total() -> None:
    text = on_a_terminal(sessions=10, duration=None)
    assert "sessions done" in text and "3/10" in text and "10/10" in text and "100%" in text
    assert "1,234 live, 5,678 events/s, p99 12.5 ms" in text
    assert text.rstrip(" ").endswith("\n") and text.count("\n") == 1  # one line, redrawn


def test_with_only_a_duration_the_bar_runs_over_its_seconds() -> None:
    text = on_a_terminal(sessions=None, duration=4.0)
    assert "3 sessions done" in text and "10 sessions done" in text
    assert "1/4 s" in text and "2/4 s" in text and "50%" in text


@pytest.mark.parametrize("enabled", [True, False])
def test_being_told_overrides_the_terminal_check(enabled: bool) -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream, sessions=5, duration=None, enabled=enabled)
    bar.show(5, POINT)
    bar.close()
    assert bool(stream.getvalue()) is enabled
