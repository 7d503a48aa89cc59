"""Tests for simulator.hosts.httpserver: the event loop serving real connections on
127.0.0.1, with an ``answer`` written here (tests/hosts/test_wikiserver.py drives the
same layer through the wiki server, trickling peers included)."""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus

import pytest

from simulator.hosts import httprequest, httpserver
from simulator.hosts.httpserver import (
    MAX_CONNECTIONS,
    STOP_WAIT,
    WORKERS,
    HttpServer,
    connection_cap,
)
from tests.e2e.helpers import run_starved

BODY = b"the page\n"


@dataclass(frozen=True)
class Page:
    status: HTTPStatus
    content_type: str
    body: bytes


def answer(path: str) -> Page:
    if path == "/big":
        return Page(HTTPStatus.OK, "text/plain", b"x" * (16 << 20))
    return Page(HTTPStatus.OK, "text/plain", BODY)


def start(
    request_timeout: float = 10.0, site: Callable[[str], Page] = answer, name: str = "httpserver"
) -> HttpServer:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    return HttpServer(listener, site, request_timeout=request_timeout, name=name)


@pytest.fixture
def server() -> Iterator[HttpServer]:
    running = start()
    yield running
    running.close()


def port_of(server: HttpServer) -> int:
    return int(server._listener.getsockname()[1])


def connect(server: HttpServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port_of(server)), timeout=5)


def read_all(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def fetch(server: HttpServer, path: str = "/") -> bytes:
    sock = connect(server)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    data = read_all(sock)
    sock.close()
    return data


def wait_for(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


def test_a_get_is_answered_and_closed(server: HttpServer) -> None:
    data = fetch(server)
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert data.endswith(b"\r\n\r\n" + BODY)
    assert wait_for(lambda: server.open_connections == 0)


@pytest.mark.parametrize(("soft", "cap"), [(300, 150), (40, 20), (16384, MAX_CONNECTIONS)])
def test_the_cap_is_half_the_open_files_limit_at_most(soft: int, cap: int) -> None:
    code = (
        "import resource, sys\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "want = int(sys.argv[1])\n"
        "if hard != resource.RLIM_INFINITY and want > hard: print('skip'); raise SystemExit\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))\n"
        "from simulator.hosts.httpserver import connection_cap\n"
        "print(connection_cap())\n"
    )
    if sys.platform == "win32":
        pytest.skip("no RLIMIT_NOFILE")
    done = subprocess.run(
        [sys.executable, "-c", code, str(soft)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "skip":
        pytest.skip(f"the hard limit is below {soft}")
    assert int(done.stdout) == cap
    assert MAX_CONNECTIONS == 1024


def test_connections_past_the_cap_wait_unaccepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpserver, "MAX_CONNECTIONS", 3)
    running = start(request_timeout=0.5)
    try:
        assert running.cap == connection_cap() == 3
        silent = [connect(running) for _ in range(6)]
        assert wait_for(lambda: running.open_connections == 3)
        time.sleep(0.2)
        assert running.open_connections == 3  # the other three wait in the backlog
        # Each silent one is dropped at its deadline; the next take their slots.
        for sock in silent:
            assert read_all(sock) == b""
            sock.close()
        assert fetch(running).endswith(BODY)
    finally:
        running.close()


def test_close_ends_waiting_connections_at_once_and_frees_the_port() -> None:
    running = start(request_timeout=60)
    port = port_of(running)
    waiting = [connect(running) for _ in range(5)]
    for sock in waiting[:3]:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never ended
    assert wait_for(lambda: running.open_connections == 5)
    started = time.monotonic()
    running.close()
    assert time.monotonic() - started < STOP_WAIT
    assert running.closed
    running.close()  # again: nothing
    for sock in waiting:
        assert read_all(sock) == b""
        sock.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_peer_still_sending_its_body_after_the_answer_is_not_reset(server: HttpServer) -> None:
    sock = connect(server)
    sock.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60000\r\n\r\n")
    answer = read_all(sock)  # the 413 comes at once, and this side ends
    assert answer.startswith(b"HTTP/1.1 413 ")
    sock.sendall(b"x" * 60000)  # the body it had started to send: dropped, not reset
    sock.shutdown(socket.SHUT_WR)
    time.sleep(0.1)
    assert sock.recv(1024) == b""  # an end, not a ConnectionResetError
    sock.close()


def test_a_peer_that_resets_mid_answer_leaves_the_server_serving(server: HttpServer) -> None:
    for _ in range(5):
        sock = connect(server)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.recv(100)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, with most of the answer unsent
    assert fetch(server).endswith(BODY)
    assert wait_for(lambda: server.open_connections == 0)


def test_nothing_reaches_stdout_and_no_traceback_reaches_stderr() -> None:
    code = (
        "import socket, struct, time\n"
        "from http import HTTPStatus\n"
        "from simulator.hosts.httpserver import HttpServer\n"
        "def broken(path):\n"
        "    raise RuntimeError('boom')\n"
        "listener = socket.socket(); listener.bind(('127.0.0.1', 0))\n"
        "port = listener.getsockname()[1]\n"
        "server = HttpServer(listener, broken, request_timeout=0.3)\n"
        "def send(data, reset=False):\n"
        "    s = socket.create_connection(('127.0.0.1', port), timeout=5)\n"
        "    s.sendall(data)\n"
        "    if reset:\n"
        "        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n"
        "        s.close(); return b''\n"
        "    out = b''\n"
        "    try:\n"
        "        while chunk := s.recv(65536): out += chunk\n"
        "    except ConnectionResetError: pass\n"
        "    s.close(); return out\n"
        "GET = b'GET / HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n'\n"
        "assert send(GET).startswith(b'HTTP/1.1 500 ')\n"
        "assert send(b'GET / HTTP/1.1\\r\\nHost: evil\\r\\n\\r\\n').startswith(b'HTTP/1.1 421 ')\n"
        "assert send(b'\\x00\\xff garbage\\r\\n\\r\\n').startswith(b'HTTP/1.1 400 ')\n"
        "send(GET, reset=True)\n"
        "assert send(b'GET / HT') == b''\n"
        "server.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        "zread-sim: browse: refused a request for Host 'evil': not this server\n"
    )


def test_a_server_never_holds_the_process_up() -> None:
    code = (
        "import socket\n"
        "from simulator.hosts.httpserver import HttpServer\n"
        "listener = socket.socket(); listener.bind(('127.0.0.1', 0))\n"
        "HttpServer(listener, lambda path: None, request_timeout=60)\n"
        "socket.create_connection(listener.getsockname(), timeout=5)  # left waiting\n"
        "print('done')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


# -- answers made off the loop ----------------------------------------------------------


class Held:
    """An ``answer`` that holds a path starting ``/held`` until :attr:`release` is set
    (a page that takes long to render), and records every path it is asked for."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def __call__(self, path: str) -> Page:
        self.calls.append(path)
        if path.startswith("/held"):
            self.release.wait(30)
        return answer(path)


def ask(server: HttpServer, path: str) -> socket.socket:
    sock = connect(server)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def test_an_answer_being_made_holds_up_no_other_connection() -> None:
    held = Held()
    running = start(site=held)
    try:
        slow = ask(running, "/held")
        assert wait_for(lambda: "/held" in held.calls)
        assert fetch(running).endswith(BODY)  # answered while /held is still being made
        held.release.set()
        assert read_all(slow).endswith(BODY)
        slow.close()
    finally:
        held.release.set()
        running.close()


def test_requests_for_a_path_being_answered_share_its_answer() -> None:
    held = Held()
    running = start(site=held)
    try:
        waiting = [ask(running, f"/held?n={n}") for n in range(3)]  # one path
        assert wait_for(lambda: running.open_connections == 3 and "/held" in held.calls)
        time.sleep(0.3)  # the other two requests are read, and wait for the first's answer
        held.release.set()
        for sock in waiting:
            assert read_all(sock).endswith(BODY)
            sock.close()
        assert held.calls == ["/held"]
        assert fetch(running, "/held").endswith(BODY)  # that answer is not kept
        assert held.calls == ["/held", "/held"]
    finally:
        held.release.set()
        running.close()


def test_an_answer_not_made_within_the_deadline_closes_its_connection() -> None:
    held = Held()
    running = start(request_timeout=0.5, site=held)
    try:
        slow = ask(running, "/held")
        slow.settimeout(10)
        assert slow.recv(1) == b""  # closed unanswered at the deadline, the site still held
        assert held.calls == ["/held"] and not held.release.is_set()
        slow.close()
    finally:
        held.release.set()
        running.close()


def test_at_most_so_many_answers_are_made_at_once() -> None:
    held = Held()
    running = start(site=held, name="at-most")  # its threads, not another server's
    try:
        waiting = [ask(running, f"/held{n}") for n in range(WORKERS + 1)]
        assert wait_for(lambda: len(held.calls) == WORKERS)
        time.sleep(0.3)
        assert len(held.calls) == WORKERS  # the last waits for a thread
        workers = [t for t in threading.enumerate() if t.name.startswith("at-most:worker")]
        assert len(workers) == WORKERS and all(t.daemon for t in workers)
        held.release.set()
        for sock in waiting:
            assert read_all(sock).endswith(BODY)
            sock.close()
        assert sorted(held.calls) == [f"/held{n}" for n in range(WORKERS + 1)]
    finally:
        held.release.set()
        running.close()


def test_close_does_not_wait_for_an_answer_being_made() -> None:
    held = Held()
    running = start(site=held)
    port = port_of(running)
    try:
        slow = ask(running, "/held")
        assert wait_for(lambda: "/held" in held.calls)
        started = time.monotonic()
        running.close()
        assert time.monotonic() - started < STOP_WAIT / 2
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        assert read_all(slow) == b""  # ended unanswered
        slow.close()
    finally:
        held.release.set()
        running.close()


def test_an_answer_being_made_never_holds_the_process_up() -> None:
    # concurrent.futures' threads would: the interpreter's exit joins them.
    code = (
        "import socket, threading\n"
        "from simulator.hosts.httpserver import HttpServer\n"
        "asked = threading.Event()\n"
        "def stuck(path):\n"
        "    asked.set(); threading.Event().wait()\n"
        "listener = socket.socket(); listener.bind(('127.0.0.1', 0))\n"
        "server = HttpServer(listener, stuck, request_timeout=60)\n"
        "s = socket.create_connection(listener.getsockname(), timeout=5)\n"
        "s.sendall(b'GET / HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n')\n"
        "assert asked.wait(5)\n"
        "server.close()\n"
        "print('done')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


# -- what faults send --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "count", "expected"),
    [
        (b"abcdefgh", 4, [b"ab", b"cd", b"ef", b"gh"]),
        (b"abcdefghij", 3, [b"abc", b"def", b"ghij"]),
        (b"ab", 5, [b"a", b"b"]),  # never an empty piece
        (b"abc", 1, [b"abc"]),
        (b"", 3, []),
    ],
)
def test_pieces_cut_a_body_evenly(body: bytes, count: int, expected: list[bytes]) -> None:
    assert httpserver.pieces(body, count) == expected


@pytest.mark.parametrize(
    ("version", "head", "status", "start", "body"),
    [
        ("1.1", False, 503, b"HTTP/1.1 503 Service Unavailable\r\n", b"busy"),
        ("1.0", False, 500, b"HTTP/1.0 500 Internal Server Error\r\n", b"busy"),
        ("1.1", True, 503, b"HTTP/1.1 503 Service Unavailable\r\n", b""),
        ("1.1", False, 599, b"HTTP/1.1 599 \r\n", b"busy"),
        ("1.1", False, 304, b"HTTP/1.1 304 Not Modified\r\n", b""),
    ],
)
def test_a_status_answer_is_that_status_in_the_requests_version(
    version: str, head: bool, status: int, start: bytes, body: bytes
) -> None:
    outcome = httprequest.Outcome(Page(HTTPStatus.OK, "text/html", b"page"), version, head)
    data = httpserver.status_answer(outcome, status, b"busy")
    assert data.startswith(start)
    headers, _, sent = data.partition(b"\r\n\r\n")
    assert sent == body
    assert b"Connection: close" in headers
    if status != 304:
        assert b"Content-Length: 4\r\n" in headers


# -- out of descriptors ------------------------------------------------------------------


_STARVED_SETUP = (
    "import errno, socket\n"
    "from http import HTTPStatus\n"
    "from simulator.hosts.httpserver import HttpServer\n"
    "from tests.hosts.test_httpserver import answer\n"
    "listener = socket.socket(); listener.bind(('127.0.0.1', 0))"
)
_STARVED_START = (
    "try:\n"
    "    server = HttpServer(listener, answer, request_timeout=5)\n"
    "except OSError as err:\n"
    "    print('refused', errno.errorcode[err.errno], listener.fileno())\n"
    "else:\n"
    "    sock = socket.create_connection(listener.getsockname(), timeout=5)\n"
    "    sock.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
    "    print('serving', sock.recv(12).decode())\n"
)


def test_out_of_descriptors_it_serves_or_refuses_to_start_never_half() -> None:
    """With fewer and fewer descriptors left: a server that answers a request, or an
    ``EMFILE`` from the constructor with its listener closed (its loop made half-way,
    its accept or its own first request refused); never a traceback at exit, never a
    server that was made but cannot accept."""
    said = []
    for spare in range(7):
        done = run_starved(_STARVED_SETUP, _STARVED_START, spare)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        said.append(done.stdout)
    assert set(said) == {"refused EMFILE -1\n", "serving HTTP/1.0 200\n"}
    assert said[0] == "refused EMFILE -1\n" and said[-1] == "serving HTTP/1.0 200\n"
    first = said.index("serving HTTP/1.0 200\n")
    assert all(line == "serving HTTP/1.0 200\n" for line in said[first:])
    assert first >= 4  # the loop (3), the start's own request (2 more, but 1 returns)


def test_a_loop_made_half_way_leaves_nothing_to_say() -> None:
    done = run_starved(
        "import gc\nfrom simulator.hosts.httpserver import _new_loop",
        "try:\n    _new_loop()\nexcept OSError as err:\n    print(err.errno)\ngc.collect()\n",
        spare=1,  # the selector takes it: none left for the self-pipe
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "24\n", "")
