"""The simulator's admin API over the control channel, and the process that offers it.

Owns: the request handlers a control peer can call (what WireMock's admin API and
Toxiproxy's HTTP API are to those tools), the process runner used when ``--control``
is given, and the simulator's side of login's ``authorize`` request.

Subtypes (``{"type":"control_request","request_id":ID,"request":{"subtype":S,...}}``):

- ``snapshot``: command, state, vm, waiting_for, pending timers, clock, speed, paused.
- ``inject``: ``{"failure": {...}}`` (a ``[[failures]]`` entry) or ``{"fault": {...}}``
  (a ``[[faults]]`` entry). A fault with no point of its own fires at the next event.
- ``set_speed``: ``{"speed": X}``; pending timers keep the share of their wait done.
- ``pause`` / ``resume``: freeze and release the timers.
- ``quit``: as the client's ``quit``.

``--control stdio`` shares stdin and stdout with the commands and events: control
frames are whole lines, never inside an event, and never change an event's bytes.
``--control unix:PATH`` listens on a Unix socket created with mode 0600.

When a peer is attached and the world says ``[world.login] approver = "control"``,
the peer plays the user in the browser: the simulator sends ``authorize`` with the
authorize_url and waits; ``{"approve": true}`` continues, anything else fails the
login; when auth_timeout runs out first the request is cancelled
(``control_cancel_request``) and login reports the timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import stat
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec

from simulator.control import Conn, ControlError
from simulator.core.effects import AskApproval, CancelApproval
from simulator.core.lines import LineBuffer
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.runners.aio import Channel, Hub
from simulator.runners.output import Wire
from simulator.runners.stdio import READ_SIZE, point_at_devnull, write_all, write_line
from simulator.scenario.failures import Failure
from simulator.scenario.faults import Fault

__all__ = ["ControlAddressError", "install", "parse_address", "serve_process"]


class ControlAddressError(ValueError):
    """A ``--control`` value that cannot be used; the message says why."""


def parse_address(value: str) -> tuple[str, str]:
    """``"stdio"`` or ``"unix:PATH"`` → (kind, path)."""
    if value == "stdio":
        return "stdio", ""
    if value.startswith("unix:") and len(value) > len("unix:"):
        return "unix", value[len("unix:") :]
    raise ControlAddressError(f"--control takes stdio or unix:PATH, got {value!r}")


def install(conn: Conn, channel: Channel) -> None:
    """Register the admin handlers for ``channel`` on ``conn``."""

    async def snapshot(_: dict[str, Any]) -> dict[str, Any]:
        channel.sync()
        return {**channel.session.snapshot(), "paused": channel.paused}

    async def inject(request: dict[str, Any]) -> dict[str, Any]:
        try:
            if "failure" in request:
                channel.session.inject(msgspec.convert(request["failure"], Failure))
                return {"injected": "failure"}
            if "fault" in request:
                fault = msgspec.convert(request["fault"], Fault)
                now = not (fault.after_event or fault.on_state or fault.probability < 1.0)
                channel.wire.faults.add(fault, now=now)
                return {"injected": "fault"}
        except msgspec.ValidationError as err:
            raise ValueError(f"inject: {err}") from None
        raise ValueError('inject takes {"failure": {...}} or {"fault": {...}}')

    async def set_speed(request: dict[str, Any]) -> dict[str, Any]:
        speed = request.get("speed")
        if isinstance(speed, bool) or not isinstance(speed, int | float) or speed < 0:
            raise ValueError(f"set_speed takes a number >= 0, got {speed!r}")
        channel.set_speed(float(speed))
        return {"speed": channel.session.speed}

    async def pause(_: dict[str, Any]) -> dict[str, Any]:
        channel.pause()
        return {"paused": True, "clock": channel.session.now}

    async def resume(_: dict[str, Any]) -> dict[str, Any]:
        channel.resume()
        return {"paused": False, "clock": channel.session.now}

    async def quit_(_: dict[str, Any]) -> dict[str, Any]:
        channel.quit()
        return {"done": channel.session.done}

    for subtype, handler in (
        ("snapshot", snapshot),
        ("inject", inject),
        ("set_speed", set_speed),
        ("pause", pause),
        ("resume", resume),
        ("quit", quit_),
    ):
        conn.set_handler(subtype, handler)


class _Approvals:
    """Login's ``authorize`` requests to the control peers."""

    def __init__(self, channel: Channel, conns: list[Conn]) -> None:
        self._channel = channel
        self._conns = conns
        self._task: asyncio.Task[None] | None = None

    async def settle(self) -> None:
        """Let a cancelled request send its control_cancel_request before the end."""
        if self._task is not None:
            self._task.cancel()  # a no-op when it is done; the session is over either way
            await asyncio.gather(self._task, return_exceptions=True)

    def intercept(self, effect: object) -> bool:
        if isinstance(effect, AskApproval) and self._conns:
            self._task = asyncio.get_running_loop().create_task(self._ask(effect))
            return True
        if isinstance(effect, CancelApproval):
            if self._task is not None:
                self._task.cancel()
            return True
        return False

    async def _ask(self, effect: AskApproval) -> None:
        request = {"authorize_url": effect.url, "auth_timeout": effect.timeout_ns}
        try:
            answer = await self._conns[-1].request("authorize", request)
        except ControlError as err:
            self._channel.deliver("_answered", approve=False, reason=err.message)
            return
        self._channel.deliver("_answered", approve=answer.get("approve") is True, reason="")


class _ProcessEndpoint:
    """stdout, stderr and the process's exit, for a channel."""

    def __init__(self, out_fd: int, stop_reading: asyncio.Event) -> None:
        self._out_fd = out_fd
        self._stop_reading = stop_reading
        self.code: int | None = None
        self.gone = False
        self.on_gone: Callable[[], None] | None = None

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            write_all(self._out_fd, data)
        except (BrokenPipeError, ConnectionResetError):
            self.gone = True
            if self.on_gone is not None:
                self.on_gone()

    def stderr(self, line: str) -> None:
        write_line(2, line)

    def exit(self, code: int) -> None:
        self.code = code

    def close_output(self) -> None:
        point_at_devnull(self._out_fd)

    def stop_reading(self) -> None:
        self._stop_reading.set()


def _prepare_socket_path(path: str) -> None:
    """Refuse a path in use or that is not a socket; remove a stale socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ControlAddressError(f"--control unix:{path}: exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # stale: nobody listens
    else:
        raise ControlAddressError(f"--control unix:{path}: another process is listening")
    finally:
        probe.close()


async def _read_lines(fd: int, stop: asyncio.Event) -> AsyncIterator[bytes]:
    """Lines from ``fd`` as they arrive; ends at end of input or when ``stop`` is set.

    A pipe or a terminal is watched by the loop; a regular file, which epoll refuses
    and which never blocks, is read directly.
    """
    loop = asyncio.get_running_loop()
    buffer = LineBuffer()
    ready = asyncio.Event()
    try:
        loop.add_reader(fd, ready.set)
        watched = True
    except (PermissionError, OSError):
        watched = False
    try:
        while not stop.is_set():
            if watched:
                await ready.wait()
                ready.clear()
                if stop.is_set():
                    return
                if not select.select([fd], [], [], 0)[0]:
                    continue  # the flag outlived the data: reading now would block
            data = os.read(fd, READ_SIZE)
            for line in buffer.push(data) if data else buffer.finish():
                yield line
            if not data:
                return
            if not watched:
                await asyncio.sleep(0)
    finally:
        if watched:
            loop.remove_reader(fd)


async def serve_process(
    session: Session,
    address: str,
    *,
    effects: EffectHost | None = None,
    frame: bool = False,
    in_fd: int = 0,
    out_fd: int = 1,
) -> int:
    """Run ``session`` on stdin/stdout with the admin API at ``address``; exit code."""
    kind, path = parse_address(address)
    loop = asyncio.get_running_loop()
    hub = Hub(loop)
    stop_reading = asyncio.Event()
    endpoint = _ProcessEndpoint(out_fd, stop_reading)
    channel = Channel(hub, session, Wire(session, effects=effects, frame=frame), endpoint)
    conns: list[Conn] = []
    approvals = _Approvals(channel, conns)
    channel.wire.intercept = approvals.intercept
    server: asyncio.AbstractServer | None = None

    if kind == "stdio":
        conn = Conn(channel.send)
        install(conn, channel)
        conns.append(conn)
    else:
        _prepare_socket_path(path)

        async def on_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = Conn(writer.write)
            install(peer, channel)
            conns.append(peer)
            session.peer_attached = True
            try:
                while line := await reader.readline():
                    peer.handle_frame(line)
            except (asyncio.CancelledError, ConnectionError, ValueError):
                pass  # shutting down, the peer went away, or an over-long line
            finally:
                conns.remove(peer)
                session.peer_attached = bool(conns)
                peer.close()
                writer.close()

        old_umask = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(on_peer, path, limit=1 << 22)
        except OSError as err:
            raise ControlAddressError(f"--control unix:{path}: {err.strerror or err}") from None
        finally:
            os.umask(old_umask)
    session.peer_attached = bool(conns)

    signals = (signal.SIGTERM, signal.SIGINT)
    for signum in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, channel.quit)

    def on_hang() -> None:  # a stuck process: signals do what they do by default
        for signum in signals:
            loop.remove_signal_handler(signum)
        stop_reading.set()

    channel.on_hang = on_hang

    async def pump() -> None:
        async for line in _read_lines(in_fd, stop_reading):
            if kind == "stdio" and conns[0].handle_frame(line):
                continue
            channel.feed(line)
            if session.done:
                return
        if not stop_reading.is_set():
            channel.quit()

    def reader_gone() -> None:  # stdout's reader went away: end quietly, as stdio does
        if not channel.done.done():
            channel.done.set_result(0)

    endpoint.on_gone = reader_gone
    channel.start()
    reader = loop.create_task(pump())
    try:
        await asyncio.wait({reader, channel.done}, return_when=asyncio.FIRST_COMPLETED)
        if reader.done() and reader.exception() is not None:
            raise reader.exception()  # type: ignore[misc]  # the simulator's own bug
        code = await channel.done
        await approvals.settle()
    finally:
        reader.cancel()
        for conn in conns:
            conn.close()
        if server is not None:
            server.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
        channel.close()
    return endpoint.code if endpoint.code is not None else code
