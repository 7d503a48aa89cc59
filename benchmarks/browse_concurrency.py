"""The wiki server of ``zread browse`` under load: N concurrent GETs, or GETs among N
trickling peers; latency and failures.

The server is a real one in a process of its own: ``python -m simulator browse --stdio
--speed 0 --port 0`` (the default scenario), its URL read from the ``serving`` event.
``--backlog N`` runs the same command with the listen backlog set to N first
(``--backlog 5`` was socketserver's default).
Each round, N client threads (default 200) released at once by a barrier each open a
connection and GET one path (the index, the pages, the API routes, in turn); a
request's latency runs from the release to its last byte. A failure is an error or a
status that is not 200 (the client's timeout, 30 s by default, is one). Every path is
fetched once before the first round (the first page imports markdown-it).

``--trickle N`` measures something else: N peers (default 200 when given without a
number) each open a connection and send a request one byte every ``--interval``
seconds (0.1), never finishing its headers; a peer the server drops opens a new
connection at once, so N trickle all along. Once they all have connected, ``--gets``
GETs of ``/`` (default 10) are made one after another, each on a new connection, and
timed from connect to last byte; the peers the server dropped meanwhile are counted.
``--no-reopen``: a dropped peer is not replaced (the trickle ends at the deadline).

    python benchmarks/browse_concurrency.py [--requests 200] [--rounds 3]
        [--timeout 30] [--backlog N]
    python benchmarks/browse_concurrency.py --trickle [N] [--interval 0.1] [--gets 10]
        [--timeout 30] [--no-reopen]
"""

from __future__ import annotations

import argparse
import errno
import http.client
import json
import os
import selectors
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO
from urllib.parse import urlsplit

from _common import HERE, python

ROOT = os.path.dirname(HERE)
QUIT = b'{"type":"quit"}\n'

BROWSE = ("browse", "--stdio", "--speed", "0", "--port", "0")
# The same command with the listen backlog set first (the module constant it reads).
WITH_BACKLOG = (
    "import runpy, sys\n"
    "from simulator.hosts import httpserver\n"
    "httpserver.LISTEN_BACKLOG = int(sys.argv.pop(1))\n"
    "sys.argv[0] = 'simulator'\n"
    "runpy.run_module('simulator', run_name='__main__', alter_sys=True)\n"
)


def start_server(backlog: int | None) -> tuple[subprocess.Popen[bytes], str]:
    """The server process and its URL, once it serves."""
    if backlog is None:
        argv = [python(), "-m", "simulator", *BROWSE]
    else:
        argv = [python(), "-c", WITH_BACKLOG, str(backlog), *BROWSE]
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stdout: IO[bytes] | None = proc.stdout
    assert stdout is not None
    for line in stdout:
        vm = json.loads(line)["vm"]
        if vm.get("state") == "serving":
            return proc, str(vm["url"])
    raise SystemExit(f"the server never served (exit code {proc.wait()})")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(QUIT)
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def paths(host: str, port: int) -> list[str]:
    """The routes to fetch in turn: the index, every page, and the API's."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/api/wiki")
    document = json.loads(conn.getresponse().read())
    conn.close()
    slugs = [page["slug"] for page in document["pages"]]
    return ["/", "/api/wiki", *(f"/{slug}" for slug in slugs), f"/api/pages/{slugs[0]}"]


def fetch(host: str, port: int, path: str, timeout: float) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"status {resp.status} for {path}")
    finally:
        conn.close()


def burst(
    host: str, port: int, routes: Sequence[str], count: int, timeout: float
) -> tuple[list[float], list[str]]:
    """One round: the latencies of the requests that succeeded, and the failures."""
    barrier = threading.Barrier(count + 1)
    latencies: list[float] = []
    failures: list[str] = []
    released = 0.0

    def one(index: int) -> None:
        barrier.wait()
        try:
            fetch(host, port, routes[index % len(routes)], timeout)
        except Exception as err:
            failures.append(f"{type(err).__name__}: {err}")
        else:
            latencies.append(time.perf_counter() - released)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    released = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    return latencies, failures


def quantile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def figures(latencies: Sequence[float], failures: Sequence[str], total: int) -> str:
    if not latencies:
        return f"failures {len(failures)}/{total}"
    p50, p99 = quantile(latencies, 0.5) * 1e3, quantile(latencies, 0.99) * 1e3
    return (
        f"p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   max {max(latencies) * 1e3:7.1f} ms"
        f"   failures {len(failures)}/{total}"
    )


# -- trickling peers ---------------------------------------------------------------

TRICKLE_PREFIX = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: "
"""What a trickling peer sends first, a byte at a time; then ``a`` for ever."""


class Tricklers:
    """N connections sending a request a byte at a time from one thread; a connection
    the server closes is counted and opened again."""

    def __init__(
        self, host: str, port: int, count: int, interval: float, *, reopen: bool = True
    ) -> None:
        self.address = (host, port)
        self.reopen = reopen
        self.interval = interval
        self.dropped = 0
        self.selector = selectors.DefaultSelector()
        self.sent: dict[socket.socket, int] = {}
        self.connected: set[socket.socket] = set()
        self.ever_connected = 0
        self._stop = threading.Event()
        for _ in range(count):
            self._open()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(self.address)
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            sock.close()
            raise SystemExit(f"a trickling peer could not connect: {os.strerror(code)}")
        self.sent[sock] = 0
        self.selector.register(sock, selectors.EVENT_WRITE)

    def _drop(self, sock: socket.socket) -> None:
        self.selector.unregister(sock)
        self.sent.pop(sock, None)
        self.connected.discard(sock)
        sock.close()
        self.dropped += 1
        if self.reopen:
            self._open()

    def _run(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            for key, _ in self.selector.select(timeout=max(0.0, tick - time.monotonic())):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock not in self.connected:
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        self._drop(sock)
                        continue
                    self.connected.add(sock)
                    self.ever_connected += 1
                    self.selector.modify(sock, selectors.EVENT_READ)
                    continue
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:  # the server hung up (or answered and hung up)
                    self._drop(sock)
            if time.monotonic() >= tick:
                tick += self.interval
                for sock in list(self.connected):
                    self._send_one(sock)

    def _send_one(self, sock: socket.socket) -> None:
        done = self.sent[sock]
        byte = TRICKLE_PREFIX[done : done + 1] or b"a"
        try:
            self.sent[sock] = done + sock.send(byte)
        except BlockingIOError:
            pass
        except OSError:
            self._drop(sock)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for sock in list(self.sent):
            self.selector.unregister(sock)
            sock.close()
        self.selector.close()


def timed_get(host: str, port: int, timeout: float) -> tuple[float | None, str]:
    """Seconds for one ``GET /`` on a new connection (None when it failed), and why."""
    start = time.perf_counter()
    try:
        fetch(host, port, "/", timeout)
    except Exception as err:
        return None, f"{type(err).__name__}: {err}"
    return time.perf_counter() - start, ""


def trickle(host: str, port: int, args: argparse.Namespace) -> None:
    peers = Tricklers(host, port, args.trickle, args.interval, reopen=not args.no_reopen)
    try:
        start = time.monotonic()
        while len(peers.connected) < args.trickle and time.monotonic() - start < 30:
            time.sleep(0.05)
        time.sleep(max(0.5, 3 * args.interval))  # every peer has sent a few bytes
        print(
            f"{len(peers.connected)} of {args.trickle} peers connected and trickling "
            f"(a byte every {args.interval:g} s); {args.gets} GETs of / one after another, "
            f"client timeout {args.timeout:g} s"
        )
        latencies: list[float] = []
        failures: list[str] = []
        for number in range(1, args.gets + 1):
            took, why = timed_get(host, port, args.timeout)
            if took is None:
                failures.append(why)
                print(f"GET {number}: failed: {why}")
            else:
                latencies.append(took)
                dropped = peers.dropped
                print(f"GET {number}: {took * 1e3:8.1f} ms   ({dropped} peers dropped so far)")
            time.sleep(0.2)
        print(f"all:     {figures(latencies, failures, args.gets)}")
        again = "not reopened" if args.no_reopen else "each reopened at once"
        print(
            f"peers dropped by the server: {peers.dropped} in "
            f"{time.monotonic() - start:.1f} s ({again})"
        )
    finally:
        peers.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="concurrent GETs a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0, help="the client's, seconds")
    parser.add_argument("--backlog", type=int, help="serve with this listen backlog instead")
    parser.add_argument(
        "--trickle", type=int, nargs="?", const=200, help="time GETs among N trickling peers"
    )
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between bytes")
    parser.add_argument("--gets", type=int, default=10, help="GETs timed with --trickle")
    parser.add_argument(
        "--no-reopen", action="store_true", help="a dropped peer is not replaced (--trickle)"
    )
    args = parser.parse_args()
    proc, url = start_server(args.backlog)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        if args.trickle is not None:
            fetch(host, port, "/", args.timeout)  # warm
            trickle(host, port, args)
            return
        routes = paths(host, port)
        for path in routes:  # warm: markdown-it imported, every route answered once
            fetch(host, port, path, args.timeout)
        which = "zread browse" if args.backlog is None else f"a server with backlog {args.backlog}"
        print(
            f"{args.requests} concurrent GETs against {which} at {url}, "
            f"{len(routes)} routes in turn, client timeout {args.timeout:g} s"
        )
        every: list[float] = []
        failed: list[str] = []
        for number in range(1, args.rounds + 1):
            latencies, failures = burst(host, port, routes, args.requests, args.timeout)
            every += latencies
            failed += failures
            print(f"round {number}: {figures(latencies, failures, args.requests)}")
            time.sleep(0.5)  # the last round's connections leave TIME_WAIT behind
        total = args.requests * args.rounds
        print(f"all:     {figures(every, failed, total)}")
        if failed:
            kinds = statistics.multimode(failed)
            print(f"most common failure: {kinds[0]}")
    finally:
        stop_server(proc)


if __name__ == "__main__":
    main()
