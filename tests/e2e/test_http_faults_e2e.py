"""HTTP faults end to end: ``python -m simulator browse --stdio`` processes whose wiki
server's requests meet a scenario's ``[[faults.http]]`` (or a control peer's), seen
by a real HTTP client, and written to the journal.

Each process listens on ``--port 0`` and ends with ``quit``. No assertion bounds a
time from above: a delay is checked to have held the answer at least about as long.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from simulator.tools.remote import Remote, RemoteError
from tests.e2e.helpers import Proc, write_scenario

SCENARIO = """
[[faults]]
kind = "stderr"
text = "a transport fault, still there"
after_event = 1

[[faults.http]]
path = "/api/wiki"
status = 503
body = "busy, try later"
first = 2

[[faults.http]]
path = "/api/pages/*"
reset = true
after = 1
first = 1

[[faults.http]]
method = "HEAD"
path = "/"
close_after_headers = true

[[faults.http]]
path = "/[0-9]*"
dribble = { chunks = 3, over = 0.6 }
first = 1
"""


def serving(proc: Proc) -> str:
    """The URL once browse serves (its wiki server is up)."""
    event = proc.read_until(lambda e: e["vm"].get("state") == "serving", timeout=10)
    return str(event["vm"]["url"])


def quit_browse(proc: Proc) -> None:
    proc.send({"type": "quit"})
    proc.read_until_done()
    assert proc.wait() == 0


def fetch(url: str, path: str, method: str = "GET") -> tuple[int, bytes]:
    """One request with http.client: the status and the whole body."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(str(parts.hostname), parts.port, timeout=10)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def raw_chunks(url: str, path: str) -> list[bytes]:
    """What a GET receives, one recv at a time, until the server closes."""
    parts = urlsplit(url)
    sock = socket.create_connection((str(parts.hostname), parts.port), timeout=10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    received = []
    while chunk := sock.recv(65536):
        received.append(chunk)
    sock.close()
    return received


def page_slug(url: str) -> str:
    _, body = fetch(url, "/api/wiki")
    return str(json.loads(body)["pages"][0]["slug"])


def test_a_scenarios_http_faults_meet_a_real_client(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, "faulty", SCENARIO)
    journal = tmp_path / "journal.jsonl"
    with Proc("browse", "--port", "0", "--journal", str(journal), scenario=path) as proc:
        url = serving(proc)
        # status and body, for the first two GETs of /api/wiki
        assert fetch(url, "/api/wiki") == (503, b"busy, try later")
        assert fetch(url, "/api/wiki")[0] == 503
        slug = page_slug(url)  # the third is the wiki.json
        # reset: the second request of a page's markdown, once
        assert fetch(url, f"/api/pages/{slug}")[0] == 200
        with pytest.raises(ConnectionResetError):
            fetch(url, f"/api/pages/{slug}")
        assert fetch(url, f"/api/pages/{slug}")[0] == 200
        # close after the headers: a HEAD of / gets its head; GET / is served
        status, body = fetch(url, "/", "HEAD")
        assert (status, body) == (200, b"")
        # dribble: the first GET of a page, headers then three pieces
        chunks = raw_chunks(url, f"/{slug}")
        head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert chunks[0] == head + b"\r\n\r\n"
        assert len(chunks) == 4
        assert body.startswith(b"<!DOCTYPE html>")
        assert fetch(url, f"/{slug}") == (200, body)  # once only
        assert "a transport fault, still there" in proc.wait_stderr("still there")
        quit_browse(proc)
    records = [json.loads(line) for line in journal.read_bytes().splitlines()]
    met = [
        (r["method"], r["path"], r["fault"], r["fault_kind"])
        for r in records
        if r["kind"] == "http_fault"
    ]
    assert met == [
        ("GET", "/api/wiki", "http-1", "status"),
        ("GET", "/api/wiki", "http-1", "status"),
        ("GET", f"/api/pages/{slug}", "http-2", "reset"),
        ("HEAD", "/", "http-3", "close_after_headers"),
        ("GET", f"/{slug}", "http-4", "dribble"),
    ]
    times = [r["t"] for r in records if r["kind"] == "http_fault"]
    assert times == sorted(times) and times[0] > 0
    listing = subprocess.run(
        [sys.executable, "-m", "simulator", "journal", str(journal)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    assert "http   GET /api/wiki: http-1 status" in listing.stdout
    assert f"http   GET /api/pages/{slug}: http-2 reset" in listing.stdout


def test_close_after_headers_leaves_the_body_unsent(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, "cut", "[[faults.http]]\nclose_after_headers = true\n")
    with Proc("browse", "--port", "0", scenario=path) as proc:
        url = serving(proc)
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(str(parts.hostname), parts.port, timeout=10)
        try:
            conn.request("GET", "/api/wiki")
            resp = conn.getresponse()
            assert resp.status == 200
            assert int(resp.headers["Content-Length"]) > 0
            with pytest.raises(http.client.IncompleteRead):
                resp.read()
        finally:
            conn.close()
        quit_browse(proc)


def test_a_delay_holds_the_answer(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, "slow", "[[faults.http]]\ndelay = { fixed = 0.5 }\n")
    with Proc("browse", "--port", "0", scenario=path) as proc:
        url = serving(proc)
        started = time.monotonic()
        status, body = fetch(url, "/api/wiki")
        held = time.monotonic() - started
        assert status == 200 and json.loads(body)["pages"]
        assert held >= 0.45  # at least about the delay; never an upper bound
        quit_browse(proc)


def statuses(tmp_path: Path, seed: int, count: int = 20) -> list[int]:
    text = '[[faults.http]]\npath = "/api/*"\nstatus = 500\nprobability = 0.5\n'
    path = write_scenario(tmp_path, "coin", text)
    with Proc("browse", "--port", "0", scenario=path, seed=seed) as proc:
        url = serving(proc)
        found = [fetch(url, "/api/wiki")[0] for _ in range(count)]
        quit_browse(proc)
    return found


def test_which_requests_meet_a_probability_is_reproduced_by_the_seed(tmp_path: Path) -> None:
    first = statuses(tmp_path, 5)
    assert set(first) == {200, 500}
    assert statuses(tmp_path, 5) == first
    assert statuses(tmp_path, 6) != first


@pytest.fixture
def sock_path() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="zh", dir="/tmp")  # a Unix socket path is short
    try:
        yield f"{folder}/c.sock"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_control_peer_injects_an_http_fault_before_and_while_serving(
    tmp_path: Path, sock_path: str
) -> None:
    slow_start = "[timing]\nserver_start = { fixed = 60.0 }\n"
    path = write_scenario(tmp_path, "slow-start", slow_start)
    control = f"unix:{sock_path}"
    with Proc("browse", "--port", "0", "--control", control, scenario=path, speed=1) as proc:
        with Remote(sock_path) as remote:
            before: dict[str, Any] = remote.request(
                "inject", http={"path": "/api/wiki", "status": 502, "first": 1}
            )
            assert before == {"injected": "http", "id": "http-1"}
            remote.set_speed(0)  # the server starts now, with the plan
            url = serving(proc)
            assert fetch(url, "/api/wiki")[0] == 502
            assert fetch(url, "/api/wiki")[0] == 200
            added = remote.inject(http={"method": "HEAD", "status": 504})
            assert added == {"injected": "http", "id": "http-2"}
            assert fetch(url, "/", "HEAD")[0] == 504
            listed = [e for e in remote.faults() if e["id"].startswith("http-")]
            assert [(e["id"], e["kind"], e["source"], e["fired"]) for e in listed] == [
                ("http-1", "status", "injected", 1),
                ("http-2", "status", "injected", 1),
            ]
            with pytest.raises(RemoteError, match=r"inject: .*status must be an integer 100-599"):
                remote.inject(http={"status": 1000})
            assert remote.remove("http-2") == {"removed": "http-2"}
            assert fetch(url, "/", "HEAD")[0] == 200
        quit_browse(proc)
