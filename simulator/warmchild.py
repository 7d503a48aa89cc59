"""A warm server's child: the process a launcher's client thinks it started.

Owns: :func:`wait_and_become`, what a child forked by :mod:`simulator.warmserver` does to
turn into the ``zread`` the client launched, then run it: a session of its own
(``setsid``), the launcher's standard streams on fds 0, 1 and 2 and no other fd of the
server's, the launcher's working directory (``fchdir`` to the descriptor it sent),
umask, environment and ``sys.argv``, its resource limits, nice value and CPU affinity
(:func:`simulator.warmpeer.apply`, before the command starts), the signal
dispositions a fresh process has (SIGPIPE and SIGXFSZ ignored, SIGINT as
``KeyboardInterrupt``, the rest at their defaults) with SIGTERM, SIGINT and SIGHUP then
caught as the program's first instruction catches them (:mod:`simulator.signals`), new
``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` on fds 0 to 2, and the journal's pid
its launcher's (:func:`simulator.launcher.set_launched_pid`). It then runs the command
line exactly as :mod:`simulator.__main__` does, flushes, and ends with ``os._exit``
and that code: whatever happens, it never returns into the server's loop (an error
that escapes is exit 70, the simulator's own bug). It dies with the server
(``PR_SET_PDEATHSIG``): a server killed takes its children with it.

Signals the server relays arrive while the child is still setting itself up: the
server blocks them before it forks, and the child lets them in only once they are
caught, so a SIGTERM at the launcher's first instruction is quit here too.

Must not: return, write to the server's streams, or keep any of the server's fds.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TextIO

from simulator import launcher, signals, warmpeer

STATUS_FD = 3
"""Where the child keeps its launcher's connection, to say its exit code."""
_HELD: list[object] = []
"""The server's standard stream objects, kept alive: were they collected, they would
close fds 0 to 2, which are now the client's."""


def wait_and_become(
    chan: int, die_with_parent: Callable[[], None], rehearse: Callable[[], None] | None
) -> None:
    """In a spare child just forked: ``rehearse`` (a run whose writes copy the pages a
    run writes, before a launcher waits for them), wait on ``chan`` for a launch (the
    launcher's pid, its request, its three fds), then run its command and end the
    process."""
    code = 70
    try:
        os.setsid()
        die_with_parent()
        os.closerange(3, chan)
        os.closerange(chan + 1, os.sysconf("SC_OPEN_MAX"))
        if rehearse is not None:
            rehearse()
        launch = _receive(chan)
        if launch is None:  # the server let this spare go unused
            code = 0
        else:
            code = _run(*launch)
            _say_exit(code)
    except BaseException:  # the last guard: nothing returns to the loop
        with_stderr(b"internal error: the served run failed to start\n")
    finally:
        os._exit(code)


_Fds = tuple[int, int, int, int, int]
"""The launcher's three streams, its working directory, its connection."""


def _receive(
    chan: int,
) -> tuple[_Fds, bytes, int, list[bytes], dict[bytes, bytes], int] | None:
    """(fds, what the child takes on of the launcher's, umask, argv, environment,
    launcher's pid) from the server; None at the end."""
    import array
    import socket

    from simulator.warmsocket import passed_fds

    conn = socket.socket(fileno=chan)
    fds = array.array("i")
    data = b""
    size: int | None = None
    while size is None or len(data) < size:
        chunk, ancillary, _flags, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(5 * fds.itemsize))
        if not chunk:
            return None
        fds.extend(passed_fds(ancillary))
        data += chunk
        carried = warmpeer.size(data[4:])
        if carried is not None and len(data) >= 4 + carried + 7:
            head = data[4 + carried : 4 + carried + 7]
            size = 4 + carried + (launcher.request_size(head) or 0)
    conn.close()
    if carried is None or len(fds) != 5:
        raise ValueError("a launch without its streams")
    umask, argv, environ = launcher.decode_request(data[4 + carried : size])
    launcher_pid = int.from_bytes(data[:4], "big")
    settings = data[4 : 4 + carried]
    return (fds[0], fds[1], fds[2], fds[3], fds[4]), settings, umask, argv, environ, launcher_pid


def _say_exit(code: int) -> None:
    """Close the client's streams, as an exit does, then tell the launcher the code: it
    need not wait for this process's memory to be freed and its status reaped."""
    for fd in (0, 1, 2):
        os.close(fd)
    with contextlib.suppress(OSError):  # the launcher is gone: nobody waits for it
        os.write(STATUS_FD, b"exit %d\n" % (code & 0xFF))


def with_stderr(text: bytes) -> None:
    """``zread: `` and ``text`` on fd 2, if it can be written."""
    with contextlib.suppress(OSError):
        os.write(2, b"zread: " + text)


def _run(
    fds: _Fds,
    settings: bytes,
    umask: int,
    argv: list[bytes],
    environ: dict[bytes, bytes],
    launcher_pid: int,
) -> int:
    *streams, cwd, conn = fds
    entered = _enter(cwd)
    for target, fd in enumerate((*streams, conn)):  # the streams on 0 to 2, the connection on 3
        if fd != target:
            os.dup2(fd, target, inheritable=target < STATUS_FD)
    os.set_inheritable(STATUS_FD, False)
    os.closerange(STATUS_FD + 1, os.sysconf("SC_OPEN_MAX"))
    _HELD.extend((sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__))
    _HELD.append(sys.__stderr__)
    sys.stdin, sys.stdout, sys.stderr = _standard_streams()
    for name in ("stdin", "stdout", "stderr"):  # as a new interpreter has them
        setattr(sys, f"__{name}__", getattr(sys, name))
    os.environb.clear()
    os.environb.update(environ)
    time.tzset()  # the launcher's TZ: its local time, not the server's
    sys.argv = [os.fsdecode(arg) for arg in argv]
    os.umask(umask)
    launcher.set_launched_pid(launcher_pid)
    tempfile.tempdir = None  # read again from this environment
    _fresh_signals()
    if entered is not None:
        name = os.path.basename(sys.argv[0]) or "zread"
        line = f"{name}: cannot enter the working directory: {entered.strerror}\n"
        os.write(2, line.encode("utf-8", "backslashreplace"))
        return 2
    warmpeer.apply(settings)
    return _command()


def _enter(cwd: int) -> OSError | None:
    """``fchdir`` to the launcher's working directory; what failed, if it did."""
    try:
        os.fchdir(cwd)
    except OSError as error:
        return error
    return None


def _fresh_signals() -> None:
    """The dispositions a new interpreter starts with, then the program's catch; the
    signals the server blocked before the fork are let in after."""
    signal.set_wakeup_fd(-1)
    for signum in launcher.RELAYED_NUMBERS:
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signals.take_all()
    signals.catch()
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _standard_streams() -> tuple[TextIO, TextIO, TextIO]:
    """New text streams on fds 0 to 2, buffered as a new interpreter's are."""
    unbuffered = bool(os.environb.get(b"PYTHONUNBUFFERED"))
    encoding = sys.getfilesystemencoding()
    made: list[TextIO] = []
    for fd in (0, 1, 2):
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        tty = raw.isatty()
        buffered: io.BufferedReader | io.BufferedWriter = (
            io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        )
        made.append(
            io.TextIOWrapper(
                buffered,
                encoding=encoding,
                errors="backslashreplace" if fd == 2 else "strict",
                line_buffering=fd == 2 or tty,
                write_through=unbuffered and fd != 0,
            )
        )
    return made[0], made[1], made[2]


def _command() -> int:
    """The command line, as :func:`simulator.__main__.main` runs it, then the flush
    the interpreter does at its exit."""
    from simulator.cli import main as run

    try:
        code = run()
    except KeyboardInterrupt:
        code = 130
    except SystemExit as done:
        code = _exit_status(done.code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            code = 120 if stream is sys.stdout else code
    return code


def _exit_status(code: object) -> int:
    """What the interpreter makes of ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"{code}\n")
    return 1
