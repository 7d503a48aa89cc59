"""N concurrent GETs against the wiki server of ``zread browse``: latency and failures.

The server is a real one in a process of its own: ``python -m simulator browse --stdio
--speed 0 --port 0`` (the default scenario), its URL read from the ``serving`` event.
``--backlog N`` runs the same command with the listen backlog set to N first
(``--backlog 5`` is socketserver's default: the figure before the fix).
Each round, N client threads (default 200) released at once by a barrier each open a
connection and GET one path (the index, the pages, the API routes, in turn); a
request's latency runs from the release to its last byte. A failure is an error or a
status that is not 200 (the client's timeout, 30 s by default, is one). Every path is
fetched once before the first round (the first page imports markdown-it).

    python benchmarks/browse_concurrency.py [--requests 200] [--rounds 3]
        [--timeout 30] [--backlog N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
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
# The same command with the listen backlog set first (the class attribute it reads).
WITH_BACKLOG = (
    "import runpy, sys\n"
    "from simulator.hosts import wikiserver\n"
    "wikiserver._Server.request_queue_size = int(sys.argv.pop(1))\n"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="concurrent GETs a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0, help="the client's, seconds")
    parser.add_argument("--backlog", type=int, help="serve with this listen backlog instead")
    args = parser.parse_args()
    proc, url = start_server(args.backlog)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
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
