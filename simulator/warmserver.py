"""The warm server: one process with everything imported, forking a child per ``zread``.

Owns: the loop (:class:`WarmServer`), one thread on a selector. ``zread-sim serve``
and a server's life (warm up, listen, serve until stopped) are
:mod:`simulator.servecommand`'s, its own ends (idle, package changed) are
:mod:`simulator.warmwatch`'s. Its socket is
:mod:`simulator.warmsocket`'s, its warm-up :mod:`simulator.warmup`'s, the launcher's
side and the wire format :mod:`simulator.launcher`'s, what a child does
:mod:`simulator.warmchild`'s; starting a server for a test session is
:mod:`simulator.tools.serve`'s. It sits beside the command line, not in ``hosts/``: it
runs the command line, in itself to warm up and in each child.

Over 400 lines, for a reason: the loop's steps (accept, read, start, relay, reap, shed,
respawn) share the selector and the tables of launches and spares; apart, each would
take the loop's whole state as arguments.

- **Spares**: a child is forked ahead, once the server is idle (at the start, and after
  each status it sends); it rehearses a run (the pages a run writes are copied then,
  not while a client waits) and waits on a socket pair for its launch. A launch that
  finds no spare gets a child forked at once.
- **A launch**: a connection whose peer (``SO_PEERCRED``) has another uid is answered
  ``refused`` (and one line on the server's stderr names the uid); so is, silently, one
  whose launcher lives elsewhere (another namespace, root or cgroup) or has a limit its
  child could not take on (:mod:`simulator.warmpeer`); otherwise it is answered ``go``
  (the launcher sends nothing before), and, once its request and its four fds (three
  streams, the working directory) are in, they go to the spare with what the child
  takes on of the launcher's (limits, nice, affinity) and the connection itself
  (the relayed signals were blocked around its fork), and ``ok`` is answered. A byte
  the launcher sends afterwards is a signal, sent on to the child (``os.kill``); the end
  of the connection (the launcher killed) kills the child (SIGKILL). The child says
  ``exit N`` itself once it has closed the client's streams; the server reaps it
  through its ``pidfd`` and sends its status too (``exit N`` or ``signal N``: a child
  killed says nothing); the launcher takes the first.
- **Stop**: SIGTERM, SIGINT or SIGHUP kill the children (SIGKILL), send their
  statuses, remove the socket (and the folder made for it), and end the loop. During
  the warm-up they are blocked, so its runs never take one as their own ``quit``.
- **Under pressure**: a connection whose request is not whole within
  :data:`REQUEST_TIMEOUT` is closed; out of file descriptors, the server closes a fd it
  keeps in reserve, accepts and closes the connection (its launcher runs the command
  itself), and takes the reserve again, rather than spin on a listener that stays
  readable; a spare that dies unused within a second of its fork is forked again after
  a pause that doubles up to :data:`MAX_RESPAWN_PAUSE`, never in a tight loop; so is a
  spare whose fork fails (EAGAIN at the process limit, ENOMEM), and a launch that finds
  no spare and cannot have one forked is closed at once (its launcher runs the command
  itself).
- **Its own ends** (:mod:`simulator.warmwatch`): with ``--idle SECONDS``, the server
  stops once no launch has run or been read for that long; with ``--until-changed``,
  once the package's files are not what they were when it warmed up (looked at before
  each launch is answered, and every second), it answers that launch ``refused``
  (it runs by itself), and, as when its socket's path no longer names its socket, it
  stops listening (its socket removed, its spare buried), lets the runs going end,
  and stops. The socket is made only once the server is warm.
- **Its starter gone**: with ``--stop-at-eof`` (what :mod:`simulator.tools.serve` asks
  for), the end of stdin is a stop: a test session killed hard leaves no server behind.

Must not: run a command in the server process itself once it serves, or read a
launcher's request before it is whole (a slow peer never blocks the others).
"""

from __future__ import annotations

import array
import contextlib
import os
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable

from simulator import launcher, warmpeer
from simulator.warmsocket import passed_fds, remove
from simulator.warmup import die_with_parent, load_libc, rehearse
from simulator.warmwatch import Watch

MAX_REQUEST = 16 << 20
"""The largest request a launcher may send (its arguments and environment)."""
REQUEST_TIMEOUT = 10.0
"""Seconds a connection has to send its whole request."""
MAX_RESPAWN_PAUSE = 5.0
"""The longest pause before a spare that keeps dying is forked again."""
FDS = 4
"""The descriptors a request carries: the three standard streams, the working directory."""
_FDS_SPACE = socket.CMSG_SPACE(FDS * array.array("i").itemsize)
_CREDENTIALS = struct.Struct("3i")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


# -- the loop ---------------------------------------------------------------------------------


class _Launch:
    """One launcher's connection, and the child that runs its command."""

    __slots__ = ("carried", "conn", "data", "deadline", "fds", "launcher_pid", "pid", "pidfd")

    def __init__(self, conn: socket.socket, launcher_pid: int, carried: bytes = b"") -> None:
        self.conn: socket.socket | None = conn
        self.launcher_pid = launcher_pid
        self.carried = carried
        """What the child takes on of the launcher's (:func:`simulator.warmpeer.settings`)."""
        self.deadline = time.monotonic() + REQUEST_TIMEOUT
        self.data = bytearray()
        self.fds: list[int] = []
        self.pid = 0
        self.pidfd = -1

    def reply(self, line: bytes) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.send(line + b"\n")

    def drop_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


class _Spare:
    """A child forked ahead, waiting on ``chan`` for the launch it will run."""

    __slots__ = ("chan", "forked", "pid", "pidfd")

    def __init__(self, pid: int, pidfd: int, chan: socket.socket) -> None:
        self.pid, self.pidfd, self.chan = pid, pidfd, chan
        self.forked = time.monotonic()


def _fork(theirs: socket.socket, ahead: bool) -> int:
    """Fork a spare on ``theirs``, the relayed signals blocked around the fork (the
    child lets them in once it catches them); the child's pid."""
    relayed = set(launcher.RELAYED_NUMBERS)
    signal.pthread_sigmask(signal.SIG_BLOCK, relayed)
    try:
        pid = os.fork()
        if pid == 0:  # the child never comes back into this loop, whatever happens
            try:
                from simulator.warmchild import wait_and_become

                wait_and_become(theirs.detach(), die_with_parent, rehearse if ahead else None)
            finally:
                os._exit(70)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, relayed)
    return pid


def _fds(launch: _Launch) -> array.array[int]:
    """What a spare is given: the launcher's three streams and working directory, then
    the connection itself (the child says its exit code on it, before its exit is reaped)."""
    assert launch.conn is not None
    return array.array("i", [*launch.fds[:FDS], launch.conn.fileno()])


class WarmServer:
    """The loop: accept launchers, fork children, relay signals, report statuses."""

    def __init__(
        self,
        listener: socket.socket | None,
        warn: Callable[[str], None],
        *,
        stop_at_eof: bool = False,
        watch: Watch | None = None,
    ) -> None:
        self._listener: socket.socket | None = listener
        self._watch = watch
        """Its own ends (idle, its package changed, its socket gone): None, none."""
        self._warn = warn
        self._stop_at_eof = stop_at_eof
        self._selector = selectors.DefaultSelector()
        self._stopping = False
        self._retired = False
        """No longer listening: the launches running end, then so does the server."""
        self._wake = -1
        self._spare: _Spare | None = None
        self._launches: dict[int, _Launch] = {}
        """Each launch, by the pid of its child (children only)."""
        self._pending: set[_Launch] = set()
        """The connections whose request is not whole yet."""
        self._reserve = -1
        """A fd held for the moment the others run out (see the module docstring)."""
        self._respawn_pause = 0.0
        self._respawn_at: float | None = None

    def attach(self, listener: socket.socket, watch: Watch | None = None) -> None:
        """Serve on ``listener``, made once the server is warm (a server made before it
        listens catches its stops from the start); ``watch``: its own ends."""
        self._listener, self._watch = listener, watch

    def catch_stop(self) -> None:
        """From now on SIGTERM, SIGINT and SIGHUP stop the server (at its next turn)."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._stop)

    def serve(self) -> None:
        """Serve until SIGTERM, SIGINT or SIGHUP; then kill the children still running."""
        load_libc()
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        os.set_blocking(wake_read, False)
        self._wake = wake_read
        signal.set_wakeup_fd(wake_write)
        self.catch_stop()
        if self._listener is not None:
            self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(wake_read, selectors.EVENT_READ, "wake")
        if self._stop_at_eof:
            self._selector.register(0, selectors.EVENT_READ, "stdin")
        self._reserve = os.open(os.devnull, os.O_RDONLY)
        self._fork_ahead()
        try:
            while not self._stopping:  # a stop during the warm-up is seen at once
                for key, _ in self._selector.select(self._timeout()):
                    try:
                        self._ready(key.data)
                    except Exception as error:  # a bug: say it, serve on
                        self._warn(f"internal error: {type(error).__name__}: {error}")
                        if isinstance(key.data, _Launch):
                            self._close(key.data)
                self._on_time()
        finally:
            signal.set_wakeup_fd(-1)
            self._end_all()
            self._selector.close()
            for fd in (wake_read, wake_write, self._reserve):
                if fd >= 0:
                    os.close(fd)

    def _stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _ready(self, data: object) -> None:
        if data is None:
            self._accept()
        elif data == "wake":
            with contextlib.suppress(OSError):
                os.read(self._wake, 512)
        elif data == "stdin":
            self._read_stdin()
        elif isinstance(data, tuple):  # (the launch, "child"): its child ended
            self._reap(data[0])
        elif isinstance(data, _Spare) and data.pidfd >= 0:  # a spare died unused
            # (one buried or handed to a launch earlier in this turn is no longer ours)
            self._bury(data)
            self._respawn(data)
        elif isinstance(data, _Launch) and data.conn is not None:  # (closed this turn)
            self._read(data)

    def _timeout(self) -> float | None:
        """How long the selector may wait before :meth:`_on_time` has work."""
        moments = [launch.deadline for launch in self._pending]
        if self._respawn_at is not None:
            moments.append(self._respawn_at)
        watched = self._watch.deadline(self._busy()) if self._watch else None
        if watched is not None and not self._retired:
            moments.append(watched)
        return max(0.0, min(moments) - time.monotonic()) if moments else None

    def _on_time(self) -> None:
        """Close the connections past their deadline; fork a spare whose pause is over;
        end the server when its watch says so (:meth:`_watched`)."""
        now = time.monotonic()
        for launch in [launch for launch in self._pending if launch.deadline <= now]:
            self._close(launch)
        if self._respawn_at is not None and self._respawn_at <= now:
            self._respawn_at = None
            if self._spare is None and not self._stopping and not self._retired:
                self._fork_ahead()
        self._watched(now)

    def _busy(self) -> bool:
        return bool(self._launches or self._pending)

    def _watched(self, now: float) -> None:
        """Idle too long: stop. The package changed or the socket gone: listen no more,
        and stop once the launches running have ended."""
        if self._watch is not None and not self._retired:
            why = self._watch.ended(now, self._busy())
            if why:
                self._retire()
        if self._retired and not self._busy():
            self._stopping = True

    def _retire(self) -> None:
        """Stop listening (the socket removed, if still this server's): a launcher
        finds none, and starts or finds another; the spare is buried."""
        self._retired = True
        if self._listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self._listener)
            self._listener.close()
            self._listener = None
        if self._watch is not None and self._watch.socket_path:
            remove(self._watch.socket_path, None, self._watch.socket_inode)
        if self._spare is not None:
            self._bury(self._spare)

    def _read_stdin(self) -> None:
        """``--stop-at-eof``: the end of stdin (its starter gone) stops the server; what
        it reads otherwise means nothing."""
        try:
            data = os.read(0, 512)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._selector.unregister(0)
            self._stopping = True

    def _respawn(self, dead: _Spare) -> None:
        """Another spare for ``dead``: at once, unless spares die as soon as they are
        forked (then after a pause that doubles each time)."""
        if self._stopping or self._retired:
            return
        if time.monotonic() - dead.forked >= 1.0:
            self._respawn_pause = 0.0
            self._fork_ahead()
            return
        self._back_off()

    def _fork_ahead(self) -> None:
        """Fork the spare for the next launch; when no process can be had (EAGAIN at
        the process limit, ENOMEM, out of fds), try again after a pause, as for a
        spare that keeps dying."""
        try:
            self._spare = self._fork_spare()
        except OSError:
            self._back_off()

    def _back_off(self) -> None:
        """The next spare after a pause that doubles each time, up to the longest."""
        self._respawn_pause = min(MAX_RESPAWN_PAUSE, max(0.05, 2 * self._respawn_pause))
        self._respawn_at = time.monotonic() + self._respawn_pause

    def _accept(self) -> None:
        if self._listener is None:  # retired earlier in this turn
            return
        try:
            conn, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # out of fds (EMFILE, ENFILE): refuse one rather than spin
            self._shed()
            return
        conn.setblocking(False)
        pid, uid, _gid = _CREDENTIALS.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
        )
        if uid != os.getuid():
            self._warn(
                f"refused a launcher of uid {uid} (pid {pid}): this server serves uid "
                f"{os.getuid()} only"
            )
            launch = _Launch(conn, pid)
            launch.reply(b"refused")
            conn.close()
            return
        carried = warmpeer.settings(pid)
        stale = self._watch is not None and self._watch.looked()
        if carried is None or stale:  # its run would not be the client's: it runs by itself
            _Launch(conn, pid).reply(b"refused")
            conn.close()
            if stale:  # not one launch more on what the package was
                self._retire()
            return
        if self._watch is not None:
            self._watch.active(time.monotonic())
        launch = _Launch(conn, pid, carried)
        launch.reply(b"go")  # its request and descriptors come now
        self._selector.register(conn, selectors.EVENT_READ, launch)
        self._pending.add(launch)
        try:
            self._read(launch)  # the request is usually there already
        except Exception:
            self._close(launch)  # the loop's catch-all knows the listener, not this launch
            raise

    def _shed(self) -> None:
        """Out of fds: free the reserve, accept one connection and close it (its
        launcher sees the end, and runs its command itself), take the reserve again."""
        if self._reserve >= 0:
            os.close(self._reserve)
        with contextlib.suppress(OSError):
            if self._listener is not None:
                conn, _ = self._listener.accept()
                conn.close()
        try:
            self._reserve = os.open(os.devnull, os.O_RDONLY)
        except OSError:  # the whole system is out of them: the next shed has none
            self._reserve = -1

    def _read(self, launch: _Launch) -> None:
        conn = launch.conn
        assert conn is not None
        try:
            data, ancillary, _flags, _ = conn.recvmsg(65536, _FDS_SPACE)
        except BlockingIOError:
            return
        except OSError:
            data, ancillary = b"", []
        launch.fds.extend(passed_fds(ancillary))
        if launch.pid:  # the child runs: a byte is a signal, the end a kill
            self._relay(launch, data)
        elif len(launch.fds) > FDS:  # more than a request carries is not a launcher's
            self._close(launch)
        else:
            self._take(launch, data)

    def _take(self, launch: _Launch, data: bytes) -> None:
        """More of a request: start its child once it is whole; close a broken one."""
        launch.data += data
        size = launcher.request_size(bytes(launch.data[:7]))
        broken = not data or (len(launch.data) >= 7 and size is None)
        if broken or (size is not None and size > MAX_REQUEST):
            self._close(launch)
        elif size is not None and len(launch.data) >= size:
            self._start(launch, size)

    def _relay(self, launch: _Launch, data: bytes) -> None:
        launch.drop_fds()
        if not data:  # the launcher is gone (killed): so is its child
            with contextlib.suppress(OSError):
                os.kill(launch.pid, signal.SIGKILL)
            self._close(launch)
            return
        for signum in data:
            if signum in launcher.RELAYED_NUMBERS:
                with contextlib.suppress(OSError):
                    os.kill(launch.pid, signum)

    def _start(self, launch: _Launch, size: int) -> None:
        self._pending.discard(launch)
        request = bytes(launch.data[:size])
        try:
            launcher.decode_request(request)
        except ValueError:
            self._close(launch)
            return
        if len(launch.fds) != FDS:
            self._close(launch)
            return
        spare, self._spare = self._spare, None
        if spare is None:
            try:
                spare = self._fork_spare(ahead=False)
            except OSError:  # no process to be had: the launcher runs its command itself
                self._close(launch)
                return
        try:
            message = launch.launcher_pid.to_bytes(4, "big") + launch.carried + request
            sent = spare.chan.sendmsg(
                [message[:65536]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_fds(launch)))]
            )
            if sent < len(message):  # the rest; the spare may have read it all and be gone
                spare.chan.sendall(message[sent:])
        except OSError:  # the spare died: the launcher runs its command itself
            self._close(launch)
            self._bury(spare)
            self._respawn(spare)
            return
        finally:
            spare.chan.close()
        extra = bytes(launch.data[size:])
        launch.pid, launch.pidfd = spare.pid, spare.pidfd
        spare.pidfd = -1  # the launch's now: its event this turn, if any, is not a spare's
        launch.drop_fds()
        self._launches[launch.pid] = launch
        self._selector.modify(launch.pidfd, selectors.EVENT_READ, (launch, "child"))
        launch.reply(b"ok")
        if extra:
            self._relay(launch, extra)

    def _fork_spare(self, *, ahead: bool = True) -> _Spare:
        """Fork the child that serves the next launch. Forked ``ahead`` (once the
        server is idle: after a child's status is sent), it rehearses, then waits for
        it, the fork and the first writes to the server's memory already paid; forked
        when a launch finds no spare, it takes that launch at once."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = _fork(theirs, ahead)
        except OSError:  # EAGAIN at the process limit, ENOMEM: the caller copes
            ours.close()
            raise
        finally:
            theirs.close()
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # out of fds: a spare that cannot be watched is not kept
            ours.close()
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        spare = _Spare(pid, pidfd, ours)
        self._selector.register(spare.pidfd, selectors.EVENT_READ, spare)
        return spare

    def _bury(self, spare: _Spare) -> None:
        """A spare that died before it was used: reaped, forgotten. Once only: by a
        second call its pid and its pidfd's number may be another's."""
        if spare.pidfd < 0:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(spare.pidfd)
        with contextlib.suppress(OSError):
            os.kill(spare.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(spare.pid, 0)
        os.close(spare.pidfd)
        spare.pidfd = -1
        spare.chan.close()
        if self._spare is spare:
            self._spare = None

    def _reap(self, launch: _Launch) -> None:
        _, status = os.waitpid(launch.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self._selector.unregister(launch.pidfd)
        os.close(launch.pidfd)
        del self._launches[launch.pid]
        launch.reply(b"exit %d" % code if code >= 0 else b"signal %d" % -code)
        self._close(launch)
        if self._watch is not None:
            self._watch.active(time.monotonic())
        idle = not self._stopping and not self._retired and self._respawn_at is None
        if self._spare is None and idle:
            self._fork_ahead()

    def _close(self, launch: _Launch) -> None:
        self._pending.discard(launch)
        launch.drop_fds()
        if launch.conn is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(launch.conn)
            launch.conn.close()
            launch.conn = None

    def _end_all(self) -> None:
        """Kill every child still running, reap it, and tell its launcher."""
        if self._spare is not None:
            self._bury(self._spare)
        for launch in list(self._launches.values()):
            with contextlib.suppress(OSError):
                os.kill(launch.pid, signal.SIGKILL)
            self._reap(launch)
        for key in list(self._selector.get_map().values()):
            if isinstance(key.data, _Launch):
                self._close(key.data)
