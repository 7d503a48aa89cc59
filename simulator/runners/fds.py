"""The process's file descriptors: writing stdout and stderr, and the endpoint on them.

Owns: :class:`ProcessEndpoint` (stdout and stderr as a session's
:class:`~simulator.runners.live.Endpoint`, shared by both process loops), the small fd
helpers it and the command line use, and the constants both loops read with.

Must not: decide anything; a write that fails because the reader went away is
reported, never raised.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = [
    "READ_SIZE",
    "SIGNALS",
    "ProcessEndpoint",
    "point_at_devnull",
    "write_all",
    "write_line",
]

READ_SIZE = 1 << 16
"""How much of stdin one read takes."""

SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""The signals a running session answers as ``quit``."""


def write_all(fd: int, data: bytes) -> None:
    """Hand ``data`` to the OS, looping only if it takes part of it; BrokenPipeError or
    ConnectionResetError when the reader went away."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_line(fd: int, line: str) -> None:
    """One human-readable line (stderr); nothing if it cannot be written."""
    with contextlib.suppress(OSError):
        os.write(fd, line.encode("utf-8") + b"\n")


def point_at_devnull(fd: int) -> None:
    """Make ``fd`` write to /dev/null: its reader sees the end, later writes vanish."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class ProcessEndpoint:
    """A process's stdout and stderr, where its session's actions go."""

    __slots__ = ("err_fd", "gone", "out_fd")

    def __init__(self, out_fd: int, err_fd: int = 2) -> None:
        self.out_fd = out_fd
        self.err_fd = err_fd
        self.gone = False
        """stdout's reader went away: nothing more is written."""

    def write(self, data: bytes) -> bool:
        if self.gone:
            return False
        try:
            write_all(self.out_fd, data)
        except (BrokenPipeError, ConnectionResetError):
            self.gone = True
        return not self.gone

    def stderr(self, line: str) -> None:
        write_line(self.err_fd, line)

    def close_output(self) -> None:
        point_at_devnull(self.out_fd)
