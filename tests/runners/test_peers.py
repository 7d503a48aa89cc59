"""simulator.runners.peers: one control peer on a real Unix socket, served on an asyncio
loop in this process and spoken to by a plain socket: one answer a line, back-pressure
on a peer that does not read, a quiet end for one that vanishes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from simulator.control import NOT_A_FRAME, Conn
from simulator.core.envelope import MAX_LINE_BYTES
from simulator.runners.peers import OUTBOX_HIGH, TOO_LONG, SocketPeer


@pytest.fixture
def sock_path() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="zsp-")
    yield os.path.join(folder, "p.sock")
    shutil.rmtree(folder, ignore_errors=True)


Setup = Callable[[Conn], None]


class Server:
    """A unix server whose connections are SocketPeers with handlers ``setup`` installs."""

    def __init__(self, path: str, setup: Setup) -> None:
        self.path = path
        self.setup = setup
        self.peers: list[SocketPeer] = []
        self.ended = asyncio.Event()
        self.buffered: list[int] = []
        """The peer's unwritten bytes, sampled as requests are handled."""

    async def on_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = SocketPeer(reader, writer)
        self.setup(peer.conn)
        self.peers.append(peer)
        try:
            await peer.serve()
        finally:
            self.ended.set()


def handlers(server: Server) -> Setup:
    def setup(conn: Conn) -> None:
        async def echo(request: dict[str, Any]) -> Any:
            peer = server.peers[-1]
            server.buffered.append(peer._writer.transport.get_write_buffer_size())
            return {"pad": "x" * 1000, "n": request.get("n")}

        conn.set_handler("echo", echo)

    return setup


async def serving(
    path: str, main: Callable[[Server], Awaitable[None]], setup: Setup | None = None
) -> None:
    server = Server(path, lambda conn: None)
    server.setup = setup or handlers(server)
    listener = await asyncio.start_unix_server(server.on_peer, path)
    try:
        await asyncio.wait_for(main(server), 20)
    finally:
        listener.close()
        await listener.wait_closed()


async def client(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, path)
    return sock


async def read_lines(sock: socket.socket, count: int) -> list[bytes]:
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    seen = 0
    while seen < count:
        chunk = await loop.sock_recv(sock, 1 << 16)
        assert chunk, "the connection closed before every answer came"
        chunks.append(chunk)
        seen += chunk.count(b"\n")
    return b"".join(chunks).splitlines()


def request(n: int) -> bytes:
    frame = {"type": "control_request", "request_id": f"r{n}", "request": {"subtype": "echo"}}
    frame["request"]["n"] = n
    return json.dumps(frame).encode() + b"\n"


def test_every_line_gets_exactly_one_answer(sock_path: str) -> None:
    async def main(server: Server) -> None:
        loop = asyncio.get_running_loop()
        sock = await client(sock_path)
        sent = [
            request(1),
            b"not json\n",
            b"\n",
            b"  \r\n",
            b'{"type":[]}\n',
            b"[" * 200_000 + b"\n",  # deeper than any decoder
            b'{"type":"control_request","request_id":"big","request":{"subtype":"echo",'
            b'"n":' + b"9" * 5000 + b"}}\n",
            b'{"type":"control_request","request_id":' + b"9" * 5000 + b"}\n",
            b'{"x":"' + b"a" * (MAX_LINE_BYTES + 10) + b'"}\r\n',
            b'{"type":"control_response","response":{"request_id":"nobody"}}\n',
            request(2),
        ]
        await loop.sock_sendall(sock, b"".join(sent))
        answers = [json.loads(line)["response"] for line in await read_lines(sock, 8)]
        sock.close()
        await server.ended.wait()
        by_id = {a["request_id"]: a for a in answers if isinstance(a["request_id"], str)}
        assert by_id["r1"]["response"]["n"] == 1 and by_id["r2"]["response"]["n"] == 2
        assert by_id["big"]["error"].startswith("control: number out of range")
        errors = [a["error"] for a in answers if a["request_id"] is None]
        assert errors == [
            NOT_A_FRAME,
            NOT_A_FRAME,
            NOT_A_FRAME,
            "Malformed control request: request_id must be a string, got a number",
            TOO_LONG,
        ]
        assert len(answers) == 8

    asyncio.run(serving(sock_path, main))


def test_a_peer_that_does_not_read_is_not_read_and_gets_every_answer_later(
    sock_path: str,
) -> None:
    count = 12_000  # ~1.1 MB; what goes in before the peer is held back is ~180 KiB

    async def main(server: Server) -> None:
        loop = asyncio.get_running_loop()
        sock = await client(sock_path)
        # What the test's own send buffer holds is not the server's: a small one proves
        # the point with fewer requests.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        payload = memoryview(b"".join(request(n) for n in range(count)))
        sent = 0
        stalled = 0
        while sent < len(payload) and stalled < 20:  # until its writes block a while
            try:
                sent += sock.send(payload[sent:])
                stalled = 0
            except BlockingIOError:
                stalled += 1
                await asyncio.sleep(0.01)
        assert sent < len(payload) // 4, "the peer's requests were read all the same"
        assert max(server.buffered) <= OUTBOX_HIGH + 20 * 1100  # the bound, one batch
        reader = asyncio.create_task(read_lines(sock, count))
        await loop.sock_sendall(sock, payload[sent:])
        answers = [json.loads(line)["response"] for line in await reader]
        assert sorted(a["response"]["n"] for a in answers) == list(range(count))
        sock.close()
        await server.ended.wait()

    asyncio.run(serving(sock_path, main))


def test_a_peer_that_resets_with_requests_pending_ends_quietly(
    sock_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG - 1, logger="asyncio")
    gate = asyncio.Event()

    def setup(conn: Conn) -> None:
        async def held(request: dict[str, Any]) -> Any:
            await gate.wait()
            return {"pad": "x" * 10_000}

        conn.set_handler("echo", held)

    async def main(server: Server) -> None:
        sock = await client(sock_path)
        await asyncio.get_running_loop().sock_sendall(sock, b"".join(request(n) for n in range(50)))
        await asyncio.sleep(0.1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        gate.set()
        await server.ended.wait()
        await asyncio.sleep(0.1)
        (peer,) = server.peers
        assert peer.gone and peer.conn.closed

    asyncio.run(serving(sock_path, main, setup))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == []


def test_a_peer_connected_when_its_task_is_cancelled_ends_without_an_exception(
    sock_path: str,
) -> None:
    async def main(server: Server) -> None:
        sock = await client(sock_path)
        while not server.peers:
            await asyncio.sleep(0.01)
        (task,) = [t for t in asyncio.all_tasks() if "on_peer" in repr(t.get_coro())]
        task.cancel()  # as asyncio.run does to what is left at the end
        await asyncio.wait([task])
        assert not task.cancelled() and task.exception() is None
        assert server.peers[0].gone and server.peers[0].conn.closed
        sock.close()

    asyncio.run(serving(sock_path, main))


def test_a_peer_that_stops_sending_still_gets_its_answers(sock_path: str) -> None:
    async def main(server: Server) -> None:
        sock = await client(sock_path)
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(sock, b"".join(request(n) for n in range(300)) + request(300)[:-1])
        sock.shutdown(socket.SHUT_WR)  # no more requests; the last one unterminated
        answers = [json.loads(line)["response"] for line in await read_lines(sock, 301)]
        assert sorted(a["response"]["n"] for a in answers) == list(range(301))
        assert await loop.sock_recv(sock, 1) == b""  # then it closes
        await server.ended.wait()
        sock.close()

    asyncio.run(serving(sock_path, main))
