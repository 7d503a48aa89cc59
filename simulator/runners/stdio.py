"""The process runner: one session on stdin and stdout, with or without ``--control``.

Owns: :class:`ProcessRunner`, what ``python -m simulator <command> --stdio`` runs,
:class:`ProcessEndpoint`, the process's stdout and stderr as a session's endpoint
(shared by both loops), and the small fd helpers it and the command line use. The
lifecycle rules (first event, end of input, signals, reader gone, done, exit, hang)
are :class:`~simulator.runners.live.LiveSession`'s; this module only moves bytes and
time into it. Without ``--control`` the loop is a selector on stdin (no asyncio to
import); with it, :mod:`simulator.runners.controlled` runs the same live session on
asyncio beside the control peers.

Must not: decide anything about the protocol or the lifecycle.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from simulator.core.interface import SessionLike
from simulator.hosts.effects import EffectHost
from simulator.runners.hooks import Live, Observer, observers
from simulator.runners.live import READ_SIZE, SIGNALS, LiveSession
from simulator.runners.output import OutputStage

if TYPE_CHECKING:
    from simulator.core.secrets import Secrets
    from simulator.hosts.journal import JournalWriter
    from simulator.scenario import Scenario


def write_all(fd: int, data: bytes) -> None:
    """Hand ``data`` to the OS, looping only if it takes part of it; BrokenPipeError or
    ConnectionResetError when the reader went away. A non-blocking ``fd`` (a parent that
    shares its own non-blocking pipe, as Node does) is waited on until the reader makes
    room, as Go's runtime poller waits for zread: the reader's pace, never an error."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            _wait_writable(fd)


def _wait_writable(fd: int) -> None:
    poller = select.poll()  # not select(): a descriptor may be numbered past 1023
    poller.register(fd, select.POLLOUT)
    poller.poll()


def write_line(fd: int, line: str) -> None:
    """One human-readable line (stderr); nothing if it cannot be written."""
    with contextlib.suppress(OSError):
        os.write(fd, line.encode("utf-8") + b"\n")


def point_at_devnull(fd: int) -> None:
    """Make ``fd`` /dev/null: the other end of its pipe sees it closed, later writes
    vanish and reads find the end."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, fd, inheritable=False)
    os.close(devnull)


class _Killed(BaseException):
    """Raised on a runner's thread by :meth:`ProcessRunner.kill`, at its next write or
    wake-up: it unwinds the run at once, as SIGKILL ends a process (a BaseException, so
    no ``except Exception`` on the way takes it for an error of the run)."""


MAX_WAIT = 3600.0
"""The longest one wait of the selector lasts; a later deadline (a delay of years, an
``auth_timeout`` meaning never) is waited for an hour at a time."""


class ProcessEndpoint:
    """A process's stdout and stderr, where its session's actions go; a stderr line
    goes through ``secrets`` (no API key on stderr)."""

    __slots__ = ("err_fd", "gone", "killed", "out_fd", "secrets")

    def __init__(self, out_fd: int, err_fd: int = 2, secrets: Secrets | None = None) -> None:
        self.out_fd = out_fd
        self.err_fd = err_fd
        self.secrets = secrets
        self.gone = False
        """stdout's reader went away: nothing more is written."""
        self.killed = False
        """The run was killed (:meth:`ProcessRunner.kill`): a write raises :class:`_Killed`."""

    def write(self, data: bytes) -> bool:
        if not self.gone:
            try:
                write_all(self.out_fd, data)
            except (BrokenPipeError, ConnectionResetError):
                self.gone = True
            except OSError as error:  # a full disk, say: the message names the stream
                raise OSError(error.errno, error.strerror, "stdout") from None
            if not self.gone:
                return True
        if self.killed:  # killed before or during this write
            raise _Killed
        return False

    def stderr(self, line: str) -> None:
        if self.killed:
            raise _Killed
        write_line(self.err_fd, line if self.secrets is None else self.secrets.redact_text(line))

    def close_stdout(self) -> None:
        point_at_devnull(self.out_fd)


class ProcessRunner:
    """Runs one session between a readable and a writable binary stream; the transport
    faults are ``scenario``'s (none without one), drawn from ``seed``, and so are its
    wiki server's HTTP faults unless ``effects`` are given."""

    def __init__(
        self,
        session: SessionLike,
        stdin: BinaryIO,
        stdout: BinaryIO,
        *,
        scenario: Scenario | None = None,
        seed: int = 0,
        stderr_fd: int = 2,
        clock: Callable[[], float] = time.monotonic,
        effects: EffectHost | None = None,
        frame: bool = False,
        control: str = "",
        journal: JournalWriter | None = None,
        lateness_file: str = "",
        secrets: Secrets | None = None,
        quit_at_eof: bool = False,
    ) -> None:
        self.session = session
        self._quit_at_eof = quit_at_eof
        """``--eof quit``: the end of stdin is a quit once an answer is awaited."""
        self._journal = journal
        """``--journal``: what happens is appended there (a Journaling observer writes it)."""
        self._lateness_file = lateness_file
        """Where to write, at the end, how late each timer fired (``load``'s children)."""
        self._in_fd = stdin.fileno()
        self._endpoint = ProcessEndpoint(stdout.fileno(), stderr_fd, secrets)
        self._stage = OutputStage.for_scenario(
            scenario, seed=seed, speed=session.speed, frame=frame
        )
        self._host = effects or EffectHost.for_scenario(scenario, seed=seed)
        self._clock = clock
        self._control = control
        """``--control``: "" (none), ``stdio`` or ``unix:PATH``."""
        self._signalled = False
        self._killed = False
        self._terminated = False  # terminate() was called (a thread's SIGTERM)
        self._hanging = False
        self._wake: int | None = None
        self._quit_soon: Callable[[], None] | None = None  # under --control: quits the loop
        self._released = threading.Event()

    def run(self) -> int:
        """Run the session to its end; the process's exit code."""
        if self._control:
            import asyncio

            from simulator.runners.controlled import serve

            return asyncio.run(
                serve(
                    self.session,
                    self._control,
                    stage=self._stage,
                    endpoint=self._endpoint,
                    host=self._host,
                    in_fd=self._in_fd,
                    journal=self._journal,
                    started=self._quits_with,
                    quit_at_eof=self._quit_at_eof,
                )
            )
        lateness = _Lateness(self._clock) if self._lateness_file else None
        journaling = None
        if self._journal is not None:
            from simulator.runners.journaling import Journaling

            journaling = Journaling(self._journal, self.session, self._clock)
        live = LiveSession(
            self.session,
            self._stage,
            self._endpoint,
            clock=self._clock,
            host=self._host,
            observer=observers(journaling, lateness),
            quit_at_eof=self._quit_at_eof,
        )
        if self._journal is not None:  # the wiki server's faults, at session time
            self._host.http_journal = self._journal.http_faults_at(live.now)
        try:
            with self._signals_as_quit() as wakeup:
                self._loop(live, wakeup)
            return self._hang() if live.hung else live.code or 0
        except _Killed:
            return -signal.SIGKILL
        finally:
            if self._killed and not live.finished:
                self._host.close()  # what a killed process's descriptors held; no record
            else:
                live.close()
            if lateness is not None:
                _write_lateness(self._lateness_file, lateness.samples)

    def _loop(self, live: LiveSession, wakeup: int | None) -> None:
        try:
            self._turns(live, wakeup)
        finally:
            if self._journal is not None:
                self._journal.release()  # ended, hung or killed: what it did is in the file

    def _turns(self, live: LiveSession, wakeup: int | None) -> None:
        # poll, not epoll: epoll refuses regular files, and stdin may be one.
        with selectors.PollSelector() as selector:
            selector.register(self._in_fd, selectors.EVENT_READ, "stdin")
            if wakeup is not None:
                selector.register(wakeup, selectors.EVENT_READ, "signal")
            watching = True
            journal = self._journal
            if journal is not None:
                journal.hold()
            # 1. The first event, before anything is read.
            live.start()
            while not live.finished and not live.hung:
                if watching and not live.reading:
                    selector.unregister(self._in_fd)
                    watching = False
                # 2. Sleep until input arrives or the next wake-up is due.
                wake = live.next_wakeup()
                timeout = None if wake is None else min(MAX_WAIT, max(0.0, wake - self._clock()))
                if self._signalled:
                    timeout = 0.0  # terminate() came before the selector could hear it
                if journal is not None:
                    journal.release()  # whole whenever the process waits
                ready = selector.select(timeout)
                if self._killed:
                    raise _Killed
                if journal is not None:
                    journal.hold()
                # 3. Fire what is due by now, writing each event as it comes.
                live.tick()
                if self._signalled:
                    live.quit()
                # 4. Feed what was read; end of input is quit.
                for key, _ in ready:
                    if key.data == "signal":
                        with contextlib.suppress(OSError):
                            os.read(key.fd, READ_SIZE)
                    elif live.reading:
                        live.received(os.read(self._in_fd, READ_SIZE))

    def _hang(self) -> int:
        """Write nothing, read nothing, never exit; signals act as on any stuck process."""
        for signum in SIGNALS:
            with contextlib.suppress(ValueError):
                signal.signal(signum, signal.SIG_DFL)
        self._hanging = True
        if self._terminated and not self._killed:
            return -signal.SIGTERM  # terminate() came as the hang began: it ends it
        self._released.wait()  # forever in a process; release() ends it on a thread
        if self._killed:
            raise _Killed
        return -signal.SIGTERM

    def release(self) -> None:
        """End a ``hang`` (for a runner on a thread, which no signal reaches)."""
        self._released.set()

    def terminate(self) -> None:
        """Quit as a signal would, from any thread (a runner on a thread, which no
        signal reaches, is ended this way); a run in a ``hang`` ends as a stuck process
        ends on SIGTERM (code -15)."""
        self._signalled = self._terminated = True
        if self._hanging:
            self._released.set()
        if self._quit_soon is not None:
            self._quit_soon()
        self._wake_up()

    def _quits_with(self, quit_soon: Callable[[], None]) -> None:
        """Under ``--control``: the asyncio run's own quit, for :meth:`terminate`."""
        self._quit_soon = quit_soon
        if self._signalled:  # terminate() came before the run had begun
            quit_soon()

    def kill(self) -> None:
        """End the run at once, from any thread, as SIGKILL ends the process: nothing
        more is written (no event, no stderr line, no journal record: the next write
        raises :class:`_Killed`), the loop stops, what the run held is let go (its
        descriptors: a draft stays on disk as a killed zread leaves it, locks free), and
        :meth:`run` returns -9. Under ``--control`` (an asyncio loop) it quits instead."""
        if self._control:
            self.terminate()
            self.release()
            return
        self._killed = True
        self._endpoint.killed = self._endpoint.gone = True
        self._released.set()
        self._wake_up()

    def _wake_up(self) -> None:
        if self._wake is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake, b"\0")

    @contextlib.contextmanager
    def _signals_as_quit(self) -> Iterator[int | None]:
        """SIGTERM, SIGINT and SIGHUP (main thread only) and :meth:`terminate` set a
        flag and wake the selector."""
        try:
            read_end, write_end = os.pipe()
        except OSError:
            yield None
            return
        os.set_blocking(write_end, False)
        self._wake = write_end
        previous: dict[signal.Signals, Any] = {}
        old_fd: int | None = None

        from simulator import signals

        def on_signal(signum: int, frame: object) -> None:
            self._signalled = True
            signals.end_if_stuck(signum)  # a write nobody reads would hold the quit

        try:
            old_fd = signal.set_wakeup_fd(write_end)
            for signum in SIGNALS:
                previous[signum] = signal.signal(signum, on_signal)
        except ValueError:  # not the main thread: signals stay as they are
            pass
        else:
            held = signals.take_all()  # one that came while the program started
            if held:
                self._signalled = True
                signals.end_if_stuck(held[0])
        try:
            yield read_end
        finally:
            signals.disarm()
            self._wake = None
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if old_fd is not None:
                signal.set_wakeup_fd(old_fd)
            os.close(read_end)
            os.close(write_end)


LATENESS_FILE = "ZREAD_SIM_LATENESS_FILE"
"""Set by ``load``'s process mode for each child: the file the child writes how late
each of its timers fired (``simulator.locust_user.drive.read_lateness``)."""


class _Lateness(Observer):
    """How late each timer fired, on ``clock`` (``load``'s children measure it)."""

    __slots__ = ("clock", "samples")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.samples: list[float] = []

    def fired(self, live: Live, due: float) -> None:
        self.samples.append(self.clock() - due)


def _write_lateness(path: str, samples: list[float]) -> None:
    """``{"lateness_s": [...]}`` into ``path``; a file that cannot be written is left
    unwritten (the load test then says lateness was not measured)."""
    import json

    with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as file:
        json.dump({"lateness_s": samples}, file)
