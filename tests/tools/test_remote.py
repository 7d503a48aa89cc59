"""simulator.tools.remote.Remote against a real ``python -m simulator ... --control unix:PATH``.

A thread keeps reading the process's stdout (its writes block when nobody reads, as a
real zread's do); the test looks at the events it collected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.tools.remote import Remote, RemoteError

REGION = b'{"type":"select_region","params":{"region":"global"}}\n'
GENERATE = b'{"type":"select_action","params":{"action":"generate"}}\n'


class Process:
    """A simulator process with --control unix:PATH; stdout collected by a thread."""

    def __init__(self, path: str, command: str, *args: str, speed: float = 0.0) -> None:
        argv = [sys.executable, "-m", "simulator", command, "--stdio", "--speed", str(speed)]
        argv += ["--control", f"unix:{path}", *args]
        env = {
            k: v
            for k, v in os.environ.items()
            if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
        }
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self._out = bytearray()
        self._changed = threading.Condition()
        """Held to read or add to what came; notified when more came."""
        self._events: list[dict[str, Any]] = []
        self._parsed = 0  # the bytes of _out whose events are in _events
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        while data := os.read(fd, 1 << 16):
            with self._changed:
                self._out += data
                self._changed.notify_all()

    @property
    def lines(self) -> list[bytes]:
        with self._changed:
            return bytes(self._out).splitlines(keepends=True)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The events so far (each line decoded once)."""
        with self._changed:
            end = self._out.rfind(b"\n") + 1
            for line in bytes(self._out[self._parsed : end]).splitlines():
                if line.startswith(b'{"vm":'):
                    self._events.append(json.loads(line))
            self._parsed = max(self._parsed, end)
            return list(self._events)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10) -> Any:
        """The first event, so far or to come, that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            events = self.events
            for event in events[seen:]:
                if predicate(event):
                    return event
            seen = len(events)
            with self._changed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no such event in {timeout} s; states {self.states()}")
                if self._out.rfind(b"\n") < self._parsed:  # no whole line unread
                    self._changed.wait(remaining)

    def wait_past(self, count: int, timeout: float = 10) -> None:
        """Wait until more than ``count`` lines have come."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._out.count(b"\n") > count, timeout):
                raise AssertionError(f"no line past the first {count} in {timeout} s")

    def states(self) -> list[str]:
        return [event["vm"].get("state", "") for event in self.events]

    def send(self, line: bytes) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line)
        self.popen.stdin.flush()

    def finish(self, timeout: float = 10) -> int:
        code = self.popen.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=5)
        self._reader.join(timeout=5)
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def sock() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="zsr-")  # short: socket paths max ~100 bytes
    yield os.path.join(folder, "c.sock")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def spawn(sock: str) -> Iterator[Callable[..., Process]]:
    started: list[Process] = []

    def start(command: str, *args: str, speed: float = 0.0) -> Process:
        process = Process(sock, command, *args, speed=speed)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture(scope="module")
def at_gate() -> Iterator[str]:
    """The socket of one generate process at its first gate, shared by the tests below
    that only ask it things (a refused request, a pause undone, changes nothing)."""
    folder = tempfile.mkdtemp(prefix="zsr-")
    path = os.path.join(folder, "c.sock")
    process = Process(path, "generate")
    try:
        yield path
    finally:
        process.kill()
        shutil.rmtree(folder, ignore_errors=True)


APPROVER = """
[world.login]
approver = "control"
auth_timeout = {auth_timeout}

[timing]
init_flow = {{ fixed = 0.01 }}
open_browser = {{ fixed = 0.01 }}
authorize = {{ fixed = 0.01 }}
save_login = {{ fixed = 0.01 }}
"""


def approver(tmp_path: Path, auth_timeout: float) -> str:
    path = tmp_path / "approver.toml"
    path.write_text(APPROVER.format(auth_timeout=auth_timeout))
    return str(path)


# -- connecting --------------------------------------------------------------------------


def test_connect_waits_for_the_simulator_to_listen(
    sock: str, spawn: Callable[..., Process]
) -> None:
    remote = Remote(sock)  # created before the process exists
    spawn("generate")
    with remote:
        snap = remote.snapshot()
    assert snap["command"] == "generate" and snap["state"] == "select_action"


def test_connect_gives_up_when_nobody_listens(sock: str) -> None:
    began = time.monotonic()
    with pytest.raises(RemoteError, match=f"no simulator listens on {sock}"):
        Remote(sock, timeout=0.3).connect()
    assert time.monotonic() - began < 5


def test_a_request_connects_on_first_use(at_gate: str) -> None:
    remote = Remote(at_gate)
    try:
        assert remote.snapshot()["waiting_for"] == ["select_action", "cancel", "quit"]
    finally:
        remote.close()


# -- the admin API -------------------------------------------------------------------------


def test_snapshot_inject_and_set_speed(sock: str, spawn: Callable[..., Process]) -> None:
    process = spawn("generate", speed=5.0)
    with Remote(sock) as remote:
        first = remote.snapshot()
        assert first["speed"] == 5.0 and first["paused"] is False
        failure = {"point": "page", "target": 4, "first": 99, "error": "page 4: remote"}
        assert remote.inject(failure=failure) == {"injected": "failure", "id": "failure-1"}
        assert remote.inject(fault={"kind": "diagnostic", "text": "remote noise"}) == {
            "injected": "fault",
            "id": "fault-1",
        }
        assert remote.set_speed(0) == {"speed": 0.0}
        process.send(GENERATE)
        gate = process.wait_for(lambda e: "retry" in e["waiting_for"])
        tasks = {t["id"]: t for t in gate["vm"]["pages"]["tasks"]}
        assert tasks[4]["state"] == "failed" and tasks[4]["error"] == "page 4: remote"
        assert remote.snapshot()["waiting_for"] == ["quit", "retry", "skip_all"]
        assert b"remote noise\n" in process.lines
        assert remote.quit() == {"done": True}
    assert process.finish() == 0
    assert process.events[-1]["done"] is True


def test_faults_remove_reset_and_set_timing(sock: str, spawn: Callable[..., Process]) -> None:
    process = spawn("generate", "--scenario", "failing-pages", speed=1.0)
    with Remote(sock) as remote:
        assert remote.inject(fault={"kind": "diagnostic", "after_event": 9}) == {
            "injected": "fault",
            "id": "fault-1",
        }
        listed = remote.faults()
        assert [(e["id"], e["source"]) for e in listed] == [
            ("failure-1", "scenario"),
            ("failure-2", "scenario"),
            ("fault-1", "injected"),
        ]
        assert remote.remove("failure-2") == {"removed": "failure-2"}
        assert remote.reset() == {"removed": ["failure-1", "fault-1"]}
        assert remote.faults() == []
        assert remote.set_timing("page", {"uniform": [0.0, 0.01]}) == {
            "name": "page",
            "timing": {"uniform": [0.0, 0.01]},
        }
        remote.set_timing("catalog_step", {"fixed": 0.0})
        process.send(GENERATE)
        done = process.wait_for(lambda e: e["done"])
        assert done["vm"]["done_total"] == 16
    assert process.finish() == 0


def test_inject_takes_exactly_one_of_failure_fault_and_http(sock: str) -> None:
    remote = Remote(sock, timeout=0.1)  # nothing is sent: no simulator needed
    with pytest.raises(ValueError, match="exactly one"):
        remote.inject()
    with pytest.raises(ValueError, match="exactly one"):
        remote.inject(failure={"point": "page"}, fault={"kind": "hang"})
    with pytest.raises(ValueError, match="exactly one of failure=, fault= and http="):
        remote.inject(fault={"kind": "hang"}, http={"status": 503})


def test_errors_come_back_as_remote_errors(at_gate: str) -> None:
    with Remote(at_gate) as remote:
        with pytest.raises(RemoteError, match=r"^set_speed takes a number >= 0, got -1$"):
            remote.set_speed(-1)
        with pytest.raises(RemoteError, match="'sun' is not one of the allowed values"):
            remote.inject(failure={"point": "sun"})
        with pytest.raises(RemoteError, match=r"^Unsupported control request subtype: rewind$"):
            remote.request("rewind")
        with pytest.raises(RemoteError, match=r"^remove: no failure or fault has the id 'x'$"):
            remote.remove("x")
        with pytest.raises(RemoteError, match=r"^set_timing: 'pages' is not a timing of"):
            remote.set_timing("pages", {"fixed": 1.0})
        assert remote.snapshot()["speed"] == 0.0  # still usable after errors


def test_pause_and_resume(sock: str, spawn: Callable[..., Process]) -> None:
    process = spawn("generate", "-y", speed=0.1)
    with Remote(sock) as remote:
        assert remote.pause()["paused"] is True
        time.sleep(0.1)  # let the reader take what was written before the pause
        count = len(process.lines)
        time.sleep(0.4)  # ~20 events would come at this speed
        assert len(process.lines) == count
        assert remote.snapshot()["paused"] is True
        assert remote.resume()["paused"] is False
        process.wait_past(count, timeout=2)  # released
        assert remote.set_speed(0) == {"speed": 0.0}  # the rest at once
        process.wait_for(lambda e: e["done"])
    assert process.finish() == 0


def test_quit_then_the_connection_is_closed(sock: str, spawn: Callable[..., Process]) -> None:
    process = spawn("generate", "-y", speed=5.0)
    with Remote(sock) as remote:
        assert remote.quit() == {"done": True}
        assert process.finish() == 0
        with pytest.raises(RemoteError):  # gone: not a bare OSError
            remote.snapshot()
    assert process.events[-1]["done"] is True
    assert not os.path.exists(sock)


def test_two_remotes_on_one_simulator(at_gate: str) -> None:
    with Remote(at_gate) as one, Remote(at_gate) as two:
        assert one.pause()["paused"] is True
        assert two.snapshot()["paused"] is True
        assert two.resume()["paused"] is False
        assert one.snapshot()["paused"] is False


# -- answering the simulator's requests ---------------------------------------------------


def test_on_authorize_approves(sock: str, spawn: Callable[..., Process], tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []

    def approve(request: dict[str, Any]) -> bool:
        asked.append(request)
        return True

    process = spawn("login", "--scenario", approver(tmp_path, 30), speed=1.0)
    with Remote(sock, on_authorize=approve) as remote:
        remote.snapshot()
        process.send(REGION)
        deadline = time.monotonic() + 10
        while remote.snapshot()["state"] != "select_model":  # authorize answered meanwhile
            assert time.monotonic() < deadline, process.states()
            time.sleep(0.01)
    waiting = process.wait_for(lambda e: e["vm"]["state"] == "waiting")
    assert asked == [
        {
            "subtype": "authorize",
            "authorize_url": waiting["vm"]["authorize_url"],
            "auth_timeout": 30_000_000_000,
        }
    ]
    process.wait_for(lambda e: e["vm"]["state"] == "select_model")


def test_without_on_authorize_the_login_fails_with_the_reason(
    sock: str, spawn: Callable[..., Process], tmp_path: Path
) -> None:
    process = spawn("login", "--scenario", approver(tmp_path, 30), speed=1.0)
    with Remote(sock) as remote:
        remote.snapshot()
        process.send(REGION)
        remote.serve(5)  # ends when the simulator closes the connection
    done = process.wait_for(lambda e: e["done"])
    assert done["vm"]["state"] == "error"
    assert done["vm"]["error"] == "Unsupported control request subtype: authorize"
    assert process.finish() == 0


def test_serve_returns_at_its_deadline(at_gate: str) -> None:
    with Remote(at_gate) as remote:
        began = time.monotonic()
        remote.serve(0.3)
        assert 0.25 <= time.monotonic() - began < 3
        assert remote.snapshot()["command"] == "generate"


def test_serve_records_a_cancelled_authorize(
    sock: str, spawn: Callable[..., Process], tmp_path: Path
) -> None:
    """auth_timeout runs out while on_authorize still decides: the simulator cancels the
    request and exits; serve() ends without an error and lists the cancelled id."""
    process = spawn("login", "--scenario", approver(tmp_path, 0.3), speed=1.0)

    def undecided(request: dict[str, Any]) -> bool:
        process.finish()  # the login is over (timed out) before this answer
        return True

    with Remote(sock, on_authorize=undecided) as remote:
        remote.snapshot()
        process.send(REGION)
        remote.serve(5)
        assert len(remote.cancelled) == 1 and remote.cancelled[0].startswith("req_")
    assert process.events[-1]["vm"]["error"] == "authorization timed out"
