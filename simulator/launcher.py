"""The launcher: a ``zread`` that hands its run to a warm server instead of starting one.

Owns: what the program does when ``ZREAD_SIM_SERVER`` names a warm server's socket
(:func:`hand_over`, called by :mod:`simulator.__main__` once the signals are caught),
the wire format both ends speak (:func:`encode_request`, :func:`decode_request`), and
which process the client launched (:func:`launched_pid`: a served run journals as its
launcher, the process the client knows).

The launcher connects to the socket and sends one message: its standard streams (fds
0, 1 and 2) and its working directory (an ``O_PATH`` descriptor: the folder itself,
whatever its name means in the server's mount namespace), as ``SCM_RIGHTS``, and a
request, ``ZS3``, the length of the body as 4 bytes big-endian, and the body: the
umask (octal digits), the number of arguments, the arguments (``sys.argv``), then the
environment as ``NAME=VALUE``, every field raw bytes ended by a NUL. What no
descriptor carries (namespaces, root, cgroup, credentials) and what the kernel keeps
per process (resource limits, nice value, CPU affinity) the server reads itself, by
the launcher's pid (:mod:`simulator.warmpeer`). The server answers in lines: first,
once it has accepted the connection, ``go`` (or ``refused``), and only then does the
launcher send its message (descriptors queued to a server that is stopped would keep
the client's stdout open after the launcher gave up on it); then ``ok`` (a child runs
the command on those streams), or ``refused``; then, once the child ended, ``exit N``
or ``signal N``.
After ``ok`` the launcher points its own 0, 1 and 2 at /dev/null (the client sees the
end of stdout when the child closes it, not when the launcher exits) and waits,
relaying SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 (each one byte, its
number) to the child; SIGQUIT, SIGUSR1 or SIGUSR2 left ignored by whoever started the
launcher stays ignored (SIGTERM, SIGINT and SIGHUP are quit whatever their parent set,
as without a server: the program catches them before the hand-over). It exits with the
child's code, or kills itself with the signal that ended the child, so the client sees
what a process of its own would have shown. A connection that ends without a status
(the server was killed, and its children with it) ends the launcher as SIGKILL would.
The connect (while the server's backlog is full) and the server's first line each wait
at most :data:`HANDOVER_TIMEOUT` (a server stopped or wedged): the launcher then closes
the connection, which kills a child the server started for it, and runs the command
itself.

Without a server (no variable, no socket, nobody listening: a stale socket), when the
socket or its folder is another user's (or its folder is open to others' writes: the
launcher does not even connect), when the server refuses (another uid, another
namespace, root or cgroup, a limit its child cannot take on), or when a standard stream
is closed (the socket would take its number), :func:`hand_over` returns None and the
program runs the command itself, silently, as it always did. The ``serve`` command
itself is never handed over.

Must not: import anything but ``_socket``, ``_signal``, ``os`` and ``sys`` (the
interpreter's start-up has loaded the last two already; ``socket``, ``struct``,
``json`` and ``enum`` would cost the launcher more than its whole run), or write to a
standard stream.
"""

import _signal  # type: ignore[import-not-found]  # no stub; see the docstring
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket

VARIABLE = "ZREAD_SIM_SERVER"
"""The socket path of the warm server a ``zread`` hands its run to."""
MAGIC = b"ZS3"
HANDOVER_TIMEOUT = 10.0
"""Seconds a launcher waits to connect, and then for the server's first line."""
RELAYED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
"""The signals a launcher passes on to its child."""
RELAYED_NUMBERS = frozenset(getattr(_signal, name) for name in RELAYED)

_launched: list[int] = []


def launched_pid() -> int:
    """The pid of the process the client started: its launcher's in a served run,
    this process's otherwise."""
    return _launched[0] if _launched else os.getpid()


def set_launched_pid(pid: int) -> None:
    """In a served child: the process the client started is ``pid``, its launcher."""
    _launched[:] = [pid]


# -- the wire format ------------------------------------------------------------------------

MAX_REPLY = 64
"""The longest line a server sends (``ok``, ``exit N``, ``signal N``): more without a
newline is not a server's reply, and the launcher stops reading."""


def encode_request(umask: int, argv: list[bytes], environ: list[bytes]) -> bytes:
    """The request a launcher sends (see the module docstring)."""
    fields = [b"%o" % umask, str(len(argv)).encode(), *argv, *environ]
    body = b"\0".join(fields) + b"\0"
    return MAGIC + len(body).to_bytes(4, "big") + body


def request_size(head: bytes) -> int | None:
    """The whole request's size from its first 7 bytes; None when they are not a
    request's."""
    if len(head) < 7 or head[:3] != MAGIC:
        return None
    return 7 + int.from_bytes(head[3:7], "big")


def decode_request(data: bytes) -> tuple[int, list[bytes], dict[bytes, bytes]]:
    """(umask, arguments, environment) of a whole request; ValueError when it is not
    one."""
    if request_size(data) != len(data) or not data.endswith(b"\0"):
        raise ValueError("not a launcher's request")
    fields = data[7:-1].split(b"\0")
    if not fields[0] or fields[0].strip(b"01234567") or len(fields[0]) > 4:
        raise ValueError("a launcher's request without its umask")
    count = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
    if count < 1 or len(fields) < 2 + count:
        raise ValueError("a launcher's request without its arguments")
    argv = fields[2 : 2 + count]
    environ: dict[bytes, bytes] = {}
    for entry in fields[2 + count :]:
        name, equals, value = entry.partition(b"=")
        if equals and name:
            environ[name] = value
    return int(fields[0], 8) & 0o777, argv, environ


# -- the launcher ---------------------------------------------------------------------------


def hand_over(path: str) -> int | None:
    """Run this command in the warm server at ``path``: its exit code (or this process
    ends with the child's signal); None when there is none to run it, or it refused."""
    if sys.argv[1:2] == ["serve"] or not path or not _streams_open() or not _mine(path):
        return None
    from simulator import signals  # (loaded already: the program's first instruction)

    signals.grace(3 * HANDOVER_TIMEOUT + signals.GRACE_S)  # a quit waits out its three waits
    code = _try(path)
    if code is None:
        signals.grace(signals.GRACE_S)  # it runs the command itself: a start-up's grace
    return code


def _try(path: str) -> int | None:
    """:func:`hand_over`, once the server's socket is known to be this user's."""
    import _socket  # here, not above: the journal asks this module for launched_pid

    if not hasattr(_socket, "SO_PEERCRED"):  # not Linux: no server can be checked, none used
        return None
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        if not _connect(conn, path):  # a listener another user planted: hand it nothing
            conn.close()
            return None
        reply = _Replies(conn)
        if reply.line() != b"go":  # refused; or stopped, wedged: nothing of ours in its queue
            conn.close()
            return None
        _send_request(conn)
        first = reply.line()
        if first != b"ok" and not _is_status(first):  # refused, or the server is gone
            conn.close()
            return None
    except (OSError, ValueError):  # no server, a stale socket, a server gone or wedged
        conn.close()  # (a child it started for this connection is killed): run here
        return None
    conn.settimeout(None)  # the child runs as long as its client wants
    return _served(conn, reply, None if first == b"ok" else first)


def _connect(conn: "_socket.socket", path: str) -> bool:
    """Connect ``conn`` to the server at ``path``, waiting at most
    :data:`HANDOVER_TIMEOUT` there and then for each reply; whether the server runs as
    this user (:func:`_ours`)."""
    import _socket

    # A blocking connect waits while the server's backlog is full, up to SO_SNDTIMEO
    # (a timeout set with settimeout would fail at once: EAGAIN, for a Unix socket).
    whole, part = int(HANDOVER_TIMEOUT), int(HANDOVER_TIMEOUT % 1 * 1e6) or 1
    timeval = whole.to_bytes(8, sys.byteorder) + part.to_bytes(8, sys.byteorder)
    conn.setsockopt(_socket.SOL_SOCKET, _socket.SO_SNDTIMEO, timeval)
    conn.connect(path)
    conn.settimeout(HANDOVER_TIMEOUT)  # then for the server's first line
    return _ours(conn)


def _mine(path: str) -> bool:
    """Whether ``path`` is a socket of this user's in a folder of this user's that
    others cannot write to. Checked before connecting: a listener another user planted
    at a stale path (one that never accepts, its backlog full) would hold the connect
    for :data:`HANDOVER_TIMEOUT`."""
    uid = os.getuid()
    try:
        sock = os.stat(path)
        folder = os.stat(os.path.dirname(path) or ".")
    except (OSError, ValueError):
        return False
    is_socket = sock.st_mode & 0o170000 == 0o140000  # S_ISSOCK, without the stat module
    return is_socket and sock.st_uid == uid and folder.st_uid == uid and not folder.st_mode & 0o022


def _send_request(conn: "_socket.socket") -> None:
    """Send this process's request (umask, argv, environment) with its three standard
    streams and its working directory."""
    import _socket

    mask = os.umask(0o22)  # the only way to read it, short of /proc
    os.umask(mask)
    request = encode_request(
        mask,
        [os.fsencode(arg) for arg in sys.argv],
        [name + b"=" + value for name, value in os.environb.items()],
    )
    cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2, cwd))
        sent = conn.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    finally:
        os.close(cwd)
    if sent < len(request):
        conn.sendall(request[sent:])


def _ours(conn: "_socket.socket") -> bool:
    """Whether the process listening on ``conn`` runs as this user (``SO_PEERCRED``:
    pid, uid, gid as C ints). A socket path outlives its server; another user who
    listens there must not get this process's environment and streams."""
    import _socket

    creds = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder) == os.getuid()


def _is_status(line: bytes | None) -> bool:
    """Whether ``line`` is an exit status (a quick child's can come before ``ok``)."""
    return line is not None and line.startswith((b"exit ", b"signal "))


def _streams_open() -> bool:
    """Whether fds 0, 1 and 2 are all open (else the socket would take one's number)."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


class _Replies:
    """The server's lines, read from the connection."""

    __slots__ = ("buffer", "conn")

    def __init__(self, conn: "_socket.socket") -> None:
        self.conn = conn
        self.buffer = b""

    def line(self) -> bytes | None:
        """The next line without its newline; None at the end of the connection."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_REPLY:  # not the server's: no line is this long
                return None
            chunk = self.conn.recv(64)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def _served(conn: "_socket.socket", reply: _Replies, status: bytes | None) -> int:
    """The child runs: relay signals until its ``status`` comes, then end as it ended."""
    from simulator import signals

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def relay(signum: int, frame: object) -> None:
        try:  # noqa: SIM105  # contextlib is an import this module must not make
            conn.send(bytes([signum]))
        except OSError:  # the server is gone: its status will say so
            pass

    for signum in RELAYED_NUMBERS:
        if _signal.getsignal(signum) != _signal.SIG_IGN:
            _signal.signal(signum, relay)
    for signum in signals.take_all():  # one that came before the child ran: it gets it now
        relay(signum, None)
    while status is None or not _is_status(status):  # "ok" may come after the status
        try:
            status = reply.line()
        except OSError:
            status = None
        if status is None:
            break
    conn.close()
    kind, _, number = (status or b"").partition(b" ")
    if kind == b"exit" and number.isdigit():
        return int(number)
    signum = int(number) if kind == b"signal" and number.isdigit() else _signal.SIGKILL
    for relayed in RELAYED_NUMBERS:
        _signal.signal(relayed, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum  # a signal whose default is not to end a process
