"""The process runner: one session on stdin and stdout, in real time.

Owns the lifecycle of FIDELITY section 4: the first event before anything is read;
timers on the monotonic clock; end of stdin, SIGTERM and SIGINT as ``quit``; a reader
that went away as a quiet exit; return once ``done:true`` is written. What it writes
comes from :class:`simulator.wire.Wire` (effects, ``--frame`` framing, transport
faults); it carries out the actions.

Must not: decide anything about the protocol. It reads, feeds, drains, writes and
sleeps until the next deadline; the session decides the rest.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from simulator.core.lines import LineBuffer
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.runners.output import Wire
from simulator.scenario import faults

__all__ = ["StdioRunner", "point_at_devnull", "write_all", "write_line"]

READ_SIZE = 1 << 16
"""How much of stdin one read takes."""


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


class _ReaderGone(Exception):
    """stdout was closed by the reader."""


class _Exit(Exception):
    """A transport fault ends the process with this code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class StdioRunner:
    """Runs one session between a readable and a writable binary stream."""

    def __init__(
        self,
        session: Session,
        stdin: BinaryIO,
        stdout: BinaryIO,
        *,
        stderr_fd: int = 2,
        clock: Callable[[], float] = time.monotonic,
        effects: EffectHost | None = None,
        frame: bool = False,
    ) -> None:
        self.session = session
        self._in_fd = stdin.fileno()
        self._out_fd = stdout.fileno()
        self._err_fd = stderr_fd
        self._clock = clock
        self._wire = Wire(session, effects=effects, frame=frame)
        self._signalled = False
        self._released = threading.Event()
        self._reading = True
        self._selector: selectors.BaseSelector | None = None

    def run(self) -> int:
        """Run the session to its end; the process's exit code."""
        try:
            with self._signals_as_quit() as wakeup:
                self._loop(wakeup)
        except _ReaderGone:
            pass
        except _Exit as stop:
            return stop.code
        finally:
            self._wire.close()
        return 0

    def _loop(self, wakeup: int | None) -> None:
        session = self.session
        origin = self._clock()
        lines = LineBuffer()
        # poll, not epoll: epoll refuses regular files, and stdin may be one.
        self._selector = selector = selectors.PollSelector()
        selector.register(self._in_fd, selectors.EVENT_READ, "stdin")
        if wakeup is not None:
            selector.register(wakeup, selectors.EVENT_READ, "signal")
        # 1. The first event, before anything is read.
        self._write(session.start())
        while not session.done:
            # 2. Sleep until input arrives or the next timer is due.
            deadline = session.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - (self._clock() - origin))
            ready = selector.select(timeout)
            # 3. Fire what is due by now, writing each event as it comes.
            now = self._clock() - origin
            while batch := session.advance(now, limit=1):
                self._write(batch)
            if self._signalled and not session.done:
                self._write([session.quit()])
            for key, _ in ready:
                if session.done:
                    break
                if key.data == "signal":
                    with contextlib.suppress(OSError):
                        os.read(key.fd, READ_SIZE)
                    continue
                if not self._reading:
                    continue
                # 4. Feed every complete line; end of input is quit.
                data = os.read(self._in_fd, READ_SIZE)
                batch = lines.push(data) if data else lines.finish()
                for line in batch:
                    self._write(session.feed(line))
                    if session.done:
                        break
                if not data and not session.done:
                    self._write([session.quit()])
        selector.close()

    def _write(self, events: list[bytes]) -> None:
        for action in self._wire.render(events):
            self._act(action)

    def _act(self, action: faults.Action) -> None:
        if isinstance(action, faults.Write):
            self._write_bytes(action.data)
        elif isinstance(action, faults.Pause):
            time.sleep(action.seconds)
        elif isinstance(action, faults.Stderr):
            write_line(self._err_fd, action.line)
        elif isinstance(action, faults.Exit):
            raise _Exit(action.code)
        elif isinstance(action, faults.Hang):
            self._hang()
        elif isinstance(action, faults.CloseStdout):
            point_at_devnull(self._out_fd)
        elif isinstance(action, faults.StopReading) and self._reading:
            self._reading = False
            if self._selector is not None:
                self._selector.unregister(self._in_fd)

    def _hang(self) -> None:
        """Write nothing, read nothing, never exit; signals act as on any stuck process."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):
                signal.signal(signum, signal.SIG_DFL)
        self._released.wait()  # forever in a process; release() ends it on a thread
        raise _Exit(-signal.SIGTERM)

    def release(self) -> None:
        """End a ``hang`` (for a runner on a thread, which no signal reaches)."""
        self._released.set()

    def _write_bytes(self, data: bytes) -> None:
        try:
            write_all(self._out_fd, data)
        except (BrokenPipeError, ConnectionResetError):
            raise _ReaderGone from None

    @contextlib.contextmanager
    def _signals_as_quit(self) -> Iterator[int | None]:
        """SIGTERM and SIGINT set a flag and wake the selector (main thread only)."""
        try:
            read_end, write_end = os.pipe()
        except OSError:
            yield None
            return
        os.set_blocking(write_end, False)
        previous: dict[signal.Signals, Any] = {}

        def on_signal(signum: int, frame: object) -> None:
            self._signalled = True

        try:
            old_fd = signal.set_wakeup_fd(write_end)
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, on_signal)
        except ValueError:  # not the main thread: signals stay as they are
            os.close(read_end)
            os.close(write_end)
            yield None
            return
        try:
            yield read_end
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            signal.set_wakeup_fd(old_fd)
            os.close(read_end)
            os.close(write_end)
