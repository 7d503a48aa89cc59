"""A ``zread`` launch served in this process: the program run on a thread, on real fds.

Owns: :class:`ServedCall`, one launch of ``zread`` that runs
:func:`simulator.cli.main` (``prog="zread"``) on a thread, on three file descriptors
that play the process's stdin, stdout and stderr, with the environment and working
directory the launch gave it, so help, usage errors, exit codes, the journal, HOME, the
project's files, scenarios and faults are exactly the process's. It owns those
descriptors and closes them when the run ends, as a process's exit closes its own: the
reader of its stdout then sees the end (after a kill, at once: /dev/null takes their
place before the thread has stopped). Its signals: :meth:`ServedCall.signal` does to
the run what the signal does to the process (SIGTERM, SIGINT and SIGHUP quit, SIGKILL
and the other deadly ones end it at once, its locks let go by the time it counts as
exited, the rest are ignored), through the
:class:`~simulator.runners.stdio.ProcessRunner` the session hands over
(:data:`simulator.cli.session.IN_PROCESS`). What a ``Popen`` makes of it is
:mod:`simulator.popen`'s.

Must not: touch the process's signals, its working directory or ``os.environ``; write
to the process's own stdout or stderr (only to the descriptors it is given).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.runners.stdio import ProcessRunner

QUITS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
"""The signals a zread session answers with ``quit``."""

IGNORED = frozenset(
    {
        0,  # "is it there?": nothing is delivered
        signal.SIGCHLD,
        signal.SIGCONT,
        signal.SIGURG,
        signal.SIGWINCH,
        signal.SIGSTOP,  # a stop is not modelled: the run goes on
        signal.SIGTSTP,
        signal.SIGTTIN,
        signal.SIGTTOU,
    }
)
"""Signals whose default action does not end a process; a served run ignores them."""
KILL_GRACE = 2.0
"""Seconds a killed run's thread has to stop (it stops at its next step, within ms)
before the run counts as exited all the same."""


class ServedCall:
    """``zread argv[1:]`` running on a thread on ``fds`` (stdin, stdout, stderr), which
    it owns from now on, as the process ``pid``."""

    def __init__(
        self,
        argv: Sequence[str],
        environ: Mapping[str, str],
        cwd: str,
        fds: tuple[int, int, int],
        pid: int,
    ) -> None:
        self.argv = list(argv)
        self.pid = pid
        self.returncode: int | None = None
        self._environ, self._cwd, self._fds = environ, cwd, fds
        self._on_exit: list[Callable[[int], None]] = []
        self._runner: ProcessRunner | None = None
        self._pending: int | None = None  # a signal that came before the runner existed
        self._lock = threading.Lock()
        self._closed = False  # the run let its descriptors go (under _lock)
        self._killed = 0  # -signum once a deadly signal came: the exit code whatever happens
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"zread {pid}", daemon=True)
        self._thread.start()

    # -- the run --------------------------------------------------------------------------

    def _serve(self) -> None:
        from simulator.cli import main
        from simulator.cli.session import IN_PROCESS, InProcess

        in_fd, out_fd, err_fd = self._fds
        IN_PROCESS.set(InProcess(self.pid, self._cwd, err_fd, self._started))
        code = 70
        try:
            with (
                open(in_fd, "rb", buffering=0, closefd=False) as stdin,
                _Quiet(out_fd) as stdout,
                io.TextIOWrapper(
                    _Quiet(err_fd), encoding="utf-8", errors="backslashreplace", write_through=True
                ) as stderr,
            ):
                code = main(
                    self.argv[1:],
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                    environ=self._environ,
                    prog="zread",
                )
        except BaseException as error:  # a thread has no one to raise it to
            from simulator.runners.stdio import write_line

            write_line(err_fd, f"zread: internal error: {type(error).__name__}")
        finally:
            with self._lock:  # never while signal() puts /dev/null in their place
                for fd in {in_fd, out_fd, err_fd}:  # the process's end: readers see EOF
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._closed = True
            self._exited(code)

    def _started(self, runner: ProcessRunner) -> None:
        with self._lock:
            self._runner = runner
            pending, self._pending = self._pending, None
        if pending is not None:
            _deliver(runner, pending)

    def _exited(self, code: int) -> None:
        with self._lock:
            first = self.returncode is None
            if first:
                # A killed run that ends first (its stdin at the end) was killed all the same.
                code = self._killed or int(code)  # an exit status, not the program's enum
                self.returncode = code
            told, self._on_exit = self._on_exit, []
        self._ended.set()
        if first:
            for callback in told:
                callback(code)

    # -- what the caller does -------------------------------------------------------------

    def when_exited(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(code)`` once the run has exited (killed: at once, -9); at
        once if it has."""
        with self._lock:
            if self.returncode is None:
                self._on_exit.append(callback)
                return
        callback(self.returncode)

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the run has ended (or was killed); None after ``timeout``."""
        self._ended.wait(timeout)
        return self.returncode

    def signal(self, signum: int) -> None:
        """Do what ``signum`` does to a zread process: quit, end at once, or nothing."""
        if signum in IGNORED or self.returncode is not None:
            return
        deadly = signum not in QUITS
        if deadly:
            self._cut_off(signum)  # first: nothing the run writes from now on reaches anyone
        with self._lock:
            runner = self._runner
            if runner is None:  # still starting: the session takes it once it exists
                self._pending = signum
        if runner is not None:
            _deliver(runner, signum)
        if deadly:
            # A killed process has let go of what it held (its descriptors, and so its
            # locks: a draft it held is stale to the next run) before its parent can wait
            # for it: the thread is given KILL_GRACE to stop, then it is dead to its
            # parent whatever it still does.
            if threading.current_thread() is not self._thread:
                self._thread.join(KILL_GRACE)
            self._exited(-signum)

    def _cut_off(self, signum: int) -> None:
        """Put /dev/null in place of the run's descriptors, as a killed process's are
        closed before its parent can wait for it: the reader of its stdout sees the end
        at once, and what the thread still writes before it stops (a final event under
        ``--control``, which quits) reaches no one. A writer to its stdin gets EPIPE once
        the thread has left its wait on it (the wait holds the pipe open), at once."""
        from simulator.runners.stdio import point_at_devnull

        with self._lock:
            self._killed = self._killed or -signum
            if self._closed:
                return
            for fd in set(self._fds):
                with contextlib.suppress(OSError):  # out of descriptors: at the thread's end
                    point_at_devnull(fd)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread itself (after a kill it may finish a write first)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _deliver(runner: ProcessRunner, signum: int) -> None:
    if signum in QUITS:
        runner.terminate()
    else:
        runner.kill()


class _Quiet(io.FileIO):
    """A stream of the run (not closing its descriptor): a write whose reader is gone
    vanishes, as once a process pointed its stdout at /dev/null. The program never sees
    the broken pipe, so it never redirects this process's own stdout."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd, "w", closefd=False)

    def write(self, data: Any, /) -> int:
        from simulator.runners.stdio import write_all

        chunk = bytes(data)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            write_all(self.fileno(), chunk)
        return len(chunk)
