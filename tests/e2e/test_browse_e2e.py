"""End-to-end tests of ``python -m simulator browse --stdio`` over real pipes.

Each test spawns the simulator, speaks the protocol line by line, and talks HTTP to
the URL it serves; nothing is faked. Every process listens on ``--port 0`` (any free
port) unless the test is about the port, and ends with an explicit ``quit`` (or a
signal), never by closing its input.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest

from simulator.scenario import load_scenario, wiki
from tests.e2e.helpers import held_ports

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 5.0
QUIET = 0.3
"""How long to listen for a line that must not come."""


class Event(msgspec.Struct):
    vm: msgspec.Raw
    waiting_for: list[str]
    done: bool
    error: str


class Browse:
    """One simulator process; lines are read with a timeout through a selector."""

    def __init__(self, scenario: str, *extra: str) -> None:
        port = [] if "--port" in extra else ["--port", "0"]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "simulator",
                "browse",
                "--stdio",
                "--speed",
                "0",
                "--scenario",
                scenario,
                *port,
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = b""
        self.lines: list[bytes] = []

    def read_line(self, timeout: float = TIMEOUT) -> bytes | None:
        """The next stdout line (newline included), or None on timeout or end of output."""
        end = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.lines.append(line + b"\n")
        return line + b"\n"

    def event(self) -> dict[str, Any]:
        line = self.read_line()
        assert line is not None, f"no event; stderr: {self.stderr()}"
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def until_done(self) -> dict[str, Any]:
        while not (event := self.event())["done"]:
            pass
        return event

    def until(self, state: str) -> dict[str, Any]:
        while True:
            event = self.event()
            if event["vm"]["state"] == state or event["done"]:
                return event

    def send(self, command: str, params: Any = None) -> None:
        line: dict[str, Any] = {"type": command}
        if params is not None:
            line["params"] = params
        self.write(json.dumps(line).encode() + b"\n")

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self) -> int:
        return self.proc.wait(timeout=TIMEOUT)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._selector.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def spawn() -> Iterator[Any]:
    procs: list[Browse] = []

    def start(scenario: str = "default", *extra: str) -> Browse:
        proc = Browse(scenario, *extra)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.close()


def get(url: str, content_type: str = "text/html; charset=utf-8") -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == content_type
        return str(resp.read().decode("utf-8"))


def refuses(url: str) -> bool:
    port = urlsplit(url).port
    assert port is not None
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def catalog(seed: int = 0, scenario: str = "default") -> tuple[wiki.Page, ...]:
    return wiki.world_catalog(load_scenario(scenario).world, seed)


def titles(seed: int = 0) -> list[str]:
    return [page.title for page in catalog(seed)]


def test_default_loads_serves_and_quits(spawn: Any) -> None:
    proc = spawn()
    first = proc.event()
    assert first == {
        "vm": {"state": "loading", "browser_opened": False, "has_current": True},
        "waiting_for": [],
        "done": False,
        "error": "",
    }
    serving = proc.event()
    assert serving["vm"]["state"] == "serving"
    assert serving["waiting_for"] == ["quit"]
    assert serving["done"] is False
    url = serving["vm"]["url"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
    index = get(url)
    for title in titles():
        assert f">{html.escape(title)}</a>" in index
    with pytest.raises(urllib.error.HTTPError) as missing:
        get(url + "/no-such-page")
    assert missing.value.code == 404
    proc.send("quit")
    last = proc.event()
    assert last == {**serving, "waiting_for": [], "done": True}
    assert proc.wait() == 0
    assert proc.read_line(timeout=QUIET) is None
    assert refuses(url)
    assert proc.stderr() == "", "the server logged its requests"


def test_every_route_answers(spawn: Any) -> None:
    proc = spawn()
    url = proc.until("serving")["vm"]["url"]
    pages = catalog()
    document = json.loads(get(url + "/api/wiki", "application/json"))
    assert list(document) == ["id", "generated_at", "language", "pages"]
    assert [entry["slug"] for entry in document["pages"]] == [page.slug for page in pages]
    for page in (pages[0], pages[-1]):
        markdown = get(f"{url}/api/pages/{page.slug}", "text/markdown; charset=utf-8")
        assert not markdown.startswith("# ") and "\n## " in markdown
        text = get(f"{url}/{page.slug}")
        assert f"<h1>{html.escape(page.title)}</h1>" in text
        assert "<h2>" in text
    proc.send("quit")
    assert proc.event()["done"] is True
    assert proc.wait() == 0


def test_seed_changes_the_served_catalog(spawn: Any) -> None:
    proc = spawn("default", "--seed", "11")
    url = proc.until("serving")["vm"]["url"]
    index = get(url)
    assert [t for t in titles(11) if f">{html.escape(t)}</a>" not in index] == []
    proc.send("quit")
    assert proc.event()["done"] is True


def test_versions_select_by_wiki_id(spawn: Any) -> None:
    proc = spawn("versions")
    first = proc.event()
    assert first["waiting_for"] == ["select_version", "quit"]
    vm = first["vm"]
    assert vm["state"] == "select_version"
    assert vm["has_current"] is True
    assert len(vm["versions"]) >= 3
    assert sum(v["is_current"] for v in vm["versions"]) == 1
    assert all(set(v) == {"id", "timestamp", "is_current"} for v in vm["versions"])
    chosen = vm["versions"][0]
    assert chosen["is_current"] is False
    proc.send("select_version", {"wiki_id": chosen["id"]})
    loading = proc.event()
    assert loading["vm"] == {"state": "loading", "browser_opened": False, "has_current": True}
    assert loading["waiting_for"] == []
    serving = proc.event()
    assert serving["vm"]["state"] == "serving"
    index = get(serving["vm"]["url"])
    assert f"<code>{chosen['id']}</code>" in index
    document = json.loads(get(serving["vm"]["url"] + "/api/wiki", "application/json"))
    assert document["id"] == chosen["id"]
    proc.send("quit")
    assert proc.event()["done"] is True
    assert proc.wait() == 0


def test_versions_select_current(spawn: Any) -> None:
    proc = spawn("versions")
    current = next(v for v in proc.event()["vm"]["versions"] if v["is_current"])
    proc.send("select_version", {"current": True})
    assert proc.event()["vm"]["state"] == "loading"
    serving = proc.event()
    assert current["id"] in get(serving["vm"]["url"])
    proc.send("quit")
    assert proc.event()["done"] is True


def test_bad_select_params_answer_once_and_change_nothing(spawn: Any) -> None:
    proc = spawn("versions")
    proc.event()
    first_id = json.loads(proc.lines[0])["vm"]["versions"][0]["id"]
    cases = [
        {"wiki_id": first_id, "current": True},
        {},
        {"current": False},
        {"wiki_id": "no-such-wiki"},
    ]
    for params in cases:
        before = msgspec.json.decode(proc.lines[-1], type=Event)
        proc.send("select_version", params)
        line = proc.read_line()
        assert line is not None
        # The next line is answered next: the bad one had one event, no more (at a gate no
        # timer is pending, so none can come later either).
        proc.send("sentinel")
        echo = proc.read_line()
        assert echo is not None, f"no answer to the line after {params}"
        assert json.loads(echo)["error"].startswith('command "sentinel" not allowed in state '), (
            f"a second event for {params}: {echo!r}"
        )
        after = msgspec.json.decode(line, type=Event)
        assert after.error.startswith("invalid params: "), after.error
        assert bytes(after.vm) == bytes(before.vm)
        assert after.waiting_for == before.waiting_for == ["select_version", "quit"]
        assert after.done is False
    proc.send("select_version", {"wiki_id": first_id})
    assert proc.event()["vm"]["state"] == "loading"
    proc.send("quit")
    assert proc.until_done()["done"] is True


def test_empty_ends_in_no_wiki(spawn: Any) -> None:
    proc = spawn("empty")
    assert proc.event() == {
        "vm": {"state": "no_wiki", "browser_opened": False, "has_current": False},
        "waiting_for": [],
        "done": True,
        "error": "",
    }
    assert proc.wait() == 0
    assert proc.read_line(timeout=QUIET) is None


def test_browse_error_ends_in_error(spawn: Any) -> None:
    proc = spawn("browse-error")
    assert proc.event()["vm"]["state"] == "loading"
    last = proc.event()
    assert last["done"] is True
    assert last["waiting_for"] == []
    assert last["vm"]["state"] == "error"
    assert last["vm"]["error"] == load_scenario("browse-error").failures[0].error
    assert "url" not in last["vm"]
    assert proc.wait() == 0


def test_sigterm_while_serving_stops_the_server(spawn: Any) -> None:
    proc = spawn()
    url = proc.until("serving")["vm"]["url"]
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.event()["done"] is True
    assert proc.wait() == 0
    assert refuses(url)


def test_stalled_connections_do_not_hold_quit(spawn: Any) -> None:
    proc = spawn()
    url = proc.until("serving")["vm"]["url"]
    port = urlsplit(url).port
    assert port is not None
    stalled = [socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) for _ in range(3)]
    stalled[0].sendall(b"GET / HT")  # a request line cut short
    # A body cut short:
    stalled[1].sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc")
    get(url)  # answered past them; they were accepted before it
    started = time.monotonic()
    proc.send("quit")
    assert proc.event()["done"] is True
    assert proc.wait() == 0  # within TIMEOUT (5 s), under the server's 10 s deadline
    assert time.monotonic() - started < TIMEOUT
    for sock in stalled:  # closed unanswered (reset, when its bytes were never read)
        sock.settimeout(TIMEOUT)
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(1024) == b""
        sock.close()
    assert refuses(url)


def test_version_flag_serves_that_version_at_once(spawn: Any) -> None:
    versions = wiki.versions(load_scenario("versions").world, 0)
    wanted = versions[1]
    proc = spawn("versions", "--version", wanted.id)
    assert proc.event() == {
        "vm": {"state": "loading", "browser_opened": False, "has_current": True},
        "waiting_for": [],
        "done": False,
        "error": "",
    }
    serving = proc.event()
    assert serving["vm"]["state"] == "serving"
    assert f"<code>{wanted.id}</code>" in get(serving["vm"]["url"])
    proc.send("quit")
    assert proc.event()["done"] is True
    assert proc.wait() == 0


def test_an_unknown_version_flag_ends_in_error(spawn: Any) -> None:
    ids = ", ".join(v.id for v in wiki.versions(load_scenario("versions").world, 0))
    proc = spawn("versions", "--version", "1999-01-01-000000")
    last = proc.event()
    assert last["done"] is True
    assert last["waiting_for"] == []
    assert last["vm"]["state"] == "error"
    assert last["vm"]["error"] == f'wiki version "1999-01-01-000000" not found (one of {ids})'
    assert proc.wait() == 0
    assert proc.read_line(timeout=QUIET) is None


def test_host_localhost_is_in_the_url(spawn: Any) -> None:
    proc = spawn("default", "--host", "localhost")
    url = proc.until("serving")["vm"]["url"]
    port = urlsplit(url).port
    assert url == f"http://localhost:{port}"
    assert "acme/widget" in get(f"http://127.0.0.1:{port}/")
    proc.send("quit")
    assert proc.event()["done"] is True
    assert refuses(url)


def test_a_host_that_is_not_loopback_is_refused(spawn: Any) -> None:
    proc = spawn("default", "--host", "0.0.0.0")
    assert proc.wait() == 2
    assert proc.read_line(timeout=QUIET) is None
    assert "0.0.0.0" in proc.stderr()


def test_busy_ports_move_the_server_upward(spawn: Any) -> None:
    base, held = held_ports(2)
    try:
        proc = spawn("default", "--port", str(base))
        url = proc.until("serving")["vm"]["url"]
        port = urlsplit(url).port
        assert port is not None and base + 2 <= port < base + 100
        assert url == f"http://127.0.0.1:{port}"
        get(url)
        proc.send("quit")
        assert proc.event()["done"] is True
        assert refuses(url)
    finally:
        for sock in held:
            sock.close()


def test_a_proxy_waits_for_the_index_with_stdout_discarded() -> None:
    """As a subpath proxy starts zread: stdin held open, stdout thrown away, ready once
    ``GET /`` answers below 500."""
    base, held = held_ports(1)
    held[0].close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "browse", "--host", "127.0.0.1"]
        + ["--port", str(base), "--stdio", "--speed", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stderr is not None
    try:
        deadline = time.monotonic() + 30
        status = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{base}/", timeout=2) as resp:
                    status = resp.status
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        assert 0 < status < 500
        proc.stdin.write(b'{"type":"quit","params":{}}\n')
        proc.stdin.flush()
        assert proc.wait(timeout=TIMEOUT) == 0
        assert refuses(f"http://127.0.0.1:{base}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stderr.close()
