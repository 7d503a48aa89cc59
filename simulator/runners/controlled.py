"""The process runner's loop when ``--control`` is given: the session and its control
peers on one asyncio loop.

Owns: the ``--control`` address (``stdio`` or ``unix:PATH``: parsing it, refusing a
path in use, the socket created with mode 0600), reading stdin without blocking the
loop, and wiring the peers' :class:`~simulator.control.Conn` to the admin handlers
(:mod:`simulator.runners.admin`). The session runs as a
:class:`~simulator.runners.aio.Channel`, so every lifecycle rule is the one the plain
process follows (:mod:`simulator.runners.live`); :class:`~simulator.runners.stdio.ProcessRunner`
hands over its endpoint, output stage and effects.

``--control stdio`` shares stdin and stdout with the commands and events: a line that
is a control frame goes to the peer's Conn, every other one to the session.

Must not: decide anything about the protocol or the lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from simulator.core.interface import SessionLike
from simulator.errors import ConfigurationError
from simulator.hosts.effects import EffectHost
from simulator.runners.admin import Peers, connect
from simulator.runners.aio import Channel, Hub
from simulator.runners.hooks import Endpoint, Live, Observer, observers
from simulator.runners.live import READ_SIZE, SIGNALS
from simulator.runners.output import OutputStage
from simulator.runners.peers import READ_SIZE as PEER_READ_SIZE
from simulator.runners.peers import SocketPeer

if TYPE_CHECKING:
    from simulator.hosts.journal import JournalWriter


MAX_HELD = 256
"""Lines held behind a split event's pause past which stdin is not read (``_unheld``)."""


class ControlAddressError(ConfigurationError, ValueError):
    """A ``--control`` value that cannot be used; the message says why."""


def parse_address(value: str) -> tuple[str, str]:
    """``"stdio"`` or ``"unix:PATH"`` → (kind, path); a PATH longer than a socket
    address holds (:data:`SUN_PATH_MAX`) is refused: no peer could connect to it."""
    if value == "stdio":
        return "stdio", ""
    if value.startswith("unix:") and len(value) > len("unix:"):
        path = value[len("unix:") :]
        size = len(os.fsencode(path))
        if size > SUN_PATH_MAX:
            raise ControlAddressError(
                f"--control unix:{path}: {size} bytes, longer than a socket address "
                f"can be ({SUN_PATH_MAX} bytes here); give a shorter path"
            )
        return "unix", path
    raise ControlAddressError(f"--control takes stdio or unix:PATH, got {value!r}")


SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
"""The longest path a Unix socket address holds: ``sun_path`` is 108 bytes on Linux,
104 on macOS and the BSDs, a NUL included."""


class _SignalsOnHang(Observer):
    """A hang makes a stuck process: signals do what they do by default."""

    __slots__ = ("loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def ended(self, live: Live, code: int | None, how: str) -> None:
        if how == "hang":
            for signum in SIGNALS:
                self.loop.remove_signal_handler(signum)


async def _listen(path: str, channel: Channel, peers: Peers) -> asyncio.AbstractServer:
    """The control socket at ``path`` (mode 0600), each peer on it one of ``peers``."""
    session = channel.session

    async def on_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Back-pressure and a quiet end (peers.py); every frame redacted (admin.py).
        peer = SocketPeer(reader, writer, lambda write: connect(write, channel))
        peers.conns.append(peer.conn)
        session.peer_attached = True
        try:
            await peer.serve()
        finally:
            peers.conns.remove(peer.conn)
            session.peer_attached = bool(peers.conns)

    try:
        listener = _bind_private(path)
    except OSError as err:
        raise ControlAddressError(f"--control unix:{path}: {err.strerror or err}") from None
    return await asyncio.start_unix_server(on_peer, sock=listener, limit=PEER_READ_SIZE)


def _bind_private(path: str) -> socket.socket:
    """A socket bound at ``path`` that only this uid can reach (0600) from its first
    moment, made without the umask: that is the whole process's, and a run served
    in-process is one thread of a client's. It is bound in a folder of its own (0700)
    beside ``path``, made 0600 there, then linked at ``path`` (a link, not a rename:
    a file that appeared there since it was checked is kept, and refused). Where that
    folder's longer path would not fit a socket address (~104 bytes) and ``path``
    does, the umask is set around a plain bind instead."""
    folder = os.path.join(os.path.dirname(path) or ".", f".zs{os.urandom(4).hex()}")
    inner = os.path.join(folder, "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if len(os.fsencode(inner)) > _SOCKET_PATH_MAX:
            old_umask = os.umask(0o177)
            try:
                listener.bind(path)
            finally:
                os.umask(old_umask)
            return listener
        os.mkdir(folder, 0o700)
        try:
            listener.bind(inner)
            os.chmod(inner, 0o600)
            os.link(inner, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(inner)
            os.rmdir(folder)
    except BaseException:
        listener.close()
        raise
    return listener


_SOCKET_PATH_MAX = 103
"""The longest socket path every POSIX system here binds (sun_path: 108 bytes on
Linux, 104 on macOS, a NUL included)."""


def _prepare_socket_path(path: str) -> None:
    """Refuse a path in use or that is not a socket; remove a stale socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ControlAddressError(f"--control unix:{path}: exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)  # a listener whose backlog is full never answers
    try:
        probe.connect(path)
    except (TimeoutError, BlockingIOError):  # busy: somebody listens, too slowly
        raise ControlAddressError(f"--control unix:{path}: another process is listening") from None
    except ConnectionRefusedError:
        os.unlink(path)  # stale: nobody listens
    except OSError as err:
        raise ControlAddressError(f"--control unix:{path}: {err.strerror or err}") from None
    else:
        raise ControlAddressError(f"--control unix:{path}: another process is listening")
    finally:
        probe.close()


async def _reads(fd: int, reading: Callable[[], bool]) -> AsyncIterator[bytes]:
    """What ``fd`` gives as it arrives, ``b""`` last at end of input; stops early once
    ``reading()`` is false.

    A pipe or a terminal is watched by the loop only while this waits for it: while the
    consumer holds a read (:func:`_unheld`), input waiting on ``fd`` wakes nothing. A
    regular file, which epoll refuses and which never blocks, is read directly.
    """
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    try:
        loop.add_reader(fd, ready.set)
        watched = registered = True
    except (PermissionError, OSError):
        watched = registered = False
    try:
        while reading():
            if watched:
                if not registered:
                    loop.add_reader(fd, ready.set)
                    registered = True
                await ready.wait()
                loop.remove_reader(fd)
                registered = False
                ready.clear()
                if not reading():
                    return
                if not select.select([fd], [], [], 0)[0]:
                    continue  # the flag outlived the data: reading now would block
            data = os.read(fd, READ_SIZE)
            yield data
            if not data:
                return
            if not watched:
                await asyncio.sleep(0)
    finally:
        if registered:
            loop.remove_reader(fd)


async def _unheld(channel: Channel) -> None:
    """Back-pressure on stdin: while more than :data:`MAX_HELD` lines wait behind a
    split event's pause (a ``--control stdio`` peer's responses among them), read no
    more until the pause is over. Without a pause, stdout's writes block: the pipe is
    the queue."""
    while channel.held > MAX_HELD and not channel.finished:
        resume_at = channel.resume_at
        wait = 0.0 if resume_at is None else resume_at - channel.hub.time()
        await asyncio.sleep(max(0.001, wait))


async def serve(
    session: SessionLike,
    address: str,
    *,
    endpoint: Endpoint,
    stage: OutputStage | None = None,
    host: EffectHost | None = None,
    in_fd: int = 0,
    journal: JournalWriter | None = None,
    started: Callable[[Callable[[], None]], None] | None = None,
    quit_at_eof: bool = False,
) -> int:
    """Run ``session`` on stdin and ``endpoint`` with the admin API at ``address``; the
    exit code. ``stage`` defaults to one without transport faults, unframed; with
    ``journal``, the run is journaled there. ``started`` is handed, once the run has
    begun, what quits it from any thread (a run on a thread, which no signal reaches)."""
    kind, path = parse_address(address)
    loop = asyncio.get_running_loop()
    stage = stage or OutputStage.for_scenario(None, speed=session.speed)
    journaling = None
    if journal is not None:
        from simulator.runners.journaling import Journaling

        journaling = Journaling(journal, session)
    peers = Peers()
    observer = observers(journaling, _SignalsOnHang(loop), peers)
    channel = Channel(
        Hub(loop),
        session,
        stage,
        endpoint,
        host=host,
        observer=observer,
        peer=peers,
        quit_at_eof=quit_at_eof,
    )
    if journal is not None:  # the wiki server's faults, at session time
        channel.host.http_journal = journal.http_faults_at(channel.now)
    server: asyncio.AbstractServer | None = None

    if kind == "stdio":
        peers.stdio = connect(channel.send, channel)  # every frame redacted (admin.py)
        peers.conns.append(peers.stdio)
    else:
        _prepare_socket_path(path)
        server = await _listen(path, channel, peers)
    session.peer_attached = bool(peers.conns)

    for signum in SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, channel.quit)

    async def pump() -> None:
        async for data in _reads(in_fd, lambda: channel.reading):
            channel.received(data)
            await _unheld(channel)

    channel.start()
    from simulator import signals

    if signals.take():  # a signal came while the program started
        channel.quit()
    if started is not None:

        def quit_soon() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                loop.call_soon_threadsafe(channel.quit)

        started(quit_soon)
    reader = loop.create_task(pump())
    try:
        either: set[asyncio.Future[Any]] = {reader, channel.done}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if reader.done() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]  # the simulator's own bug
        code = await channel.done
        await peers.settle()
    finally:
        reader.cancel()
        for conn in peers.conns:
            conn.close()
        if server is not None:
            server.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
        channel.close()
    return code
