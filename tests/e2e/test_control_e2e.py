"""The admin API end to end: real ``python -m simulator ... --control`` processes on pipes.

Over ``--control stdio`` the control frames share stdout with the events, so every test
reads one stream and sorts its lines: control frames, zread events, anything else
(diagnostics). Over ``--control unix:PATH`` the frames go through a socket, spoken to by
:class:`simulator.tools.remote.Remote` (or a raw socket where the Remote itself is in question).

Socket paths live under ``tempfile.mkdtemp()``: a Unix socket path is limited to about
100 bytes, which pytest's tmp_path can exceed.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from simulator.control import NOT_A_FRAME
from simulator.pytest_plugin import ZreadExecutable
from simulator.tools.remote import Remote

from .helpers import NOBODY_ANSWERS

CONTROL_TYPES = {"control_request", "control_response", "control_cancel_request"}
TIMEOUT = 10.0

APPROVER = """
[world.login]
approver = "{approver}"
auth_timeout = {auth_timeout}

[timing]
init_flow = {{ fixed = 0.01 }}
open_browser = {{ fixed = 0.01 }}
authorize = {{ fixed = 0.05 }}
save_login = {{ fixed = 0.01 }}
"""

REGION = {"type": "select_region", "params": {"region": "global"}}
GENERATE = {"type": "select_action", "params": {"action": "generate"}}


# -- a simulator process, read line by line with a timeout --------------------------


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    env["ZREAD_SIM_FILES"] = "0"  # the protocol alone, run after run
    env.update(extra or {})
    return env


class Sim:
    """One process on pipes; its stdout sorted into events, control frames and noise."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else clean_environ(),
        )
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self._fd = self.popen.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = bytearray()
        self.eof = False
        self.lines: list[bytes] = []
        """Every stdout line, newline included, in order."""
        self.events: list[dict[str, Any]] = []
        self.event_lines: list[bytes] = []
        self.frames: list[dict[str, Any]] = []
        self.noise: list[bytes] = []
        self._next_event = 0
        self._next_frame = 0
        self._stderr = bytearray()
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    @classmethod
    def start(
        cls,
        command: str,
        *args: str,
        speed: float = 0,
        scenario: str = "default",
        seed: int = 0,
        control: str | None = "stdio",
        env: Mapping[str, str] | None = None,
    ) -> Sim:
        argv = [sys.executable, "-m", "simulator", command, "--stdio"]
        argv += ["--speed", str(speed), "--scenario", scenario, "--seed", str(seed)]
        if control is not None:
            argv += ["--control", control]
        return cls([*argv, *args], clean_environ(env))

    def __enter__(self) -> Sim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=5)
        for stream in (self.popen.stdin, self.popen.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self._selector.close()
        self._stderr_thread.join(timeout=5)

    # -- reading -----------------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False at end of stdout or
        when nothing came in time."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._selector.select(remaining):
            return False
        data = os.read(self._fd, 1 << 16)
        if not data:
            self.eof = True
            return False
        self._buffer += data
        return True

    def read_line(self, timeout: float = TIMEOUT) -> bytes | None:
        """The next stdout line, sorted and kept; None at end of stdout or in time."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if not self._fill(deadline):
                return None
        end = self._buffer.index(b"\n") + 1
        raw = bytes(self._buffer[:end])
        del self._buffer[:end]
        self.lines.append(raw)
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("type") in CONTROL_TYPES:
            assert raw == compact(decoded) + b"\n", raw  # one compact line per frame
            self.frames.append(decoded)
        elif isinstance(decoded, dict) and list(decoded) == ["vm", "waiting_for", "done", "error"]:
            self.events.append(decoded)
            self.event_lines.append(raw)
        else:
            self.noise.append(raw)
        return raw

    def _need(self, what: str, timeout: float) -> bytes:
        raw = self.read_line(timeout)
        if raw is None:
            last = [line[:120] for line in self.lines[-3:]]
            raise AssertionError(
                f"no {what} within {timeout} s (eof={self.eof}); "
                f"last lines {last}; stderr {self.stderr_so_far()!r}"
            )
        return raw

    def next_event(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The next zread event not returned before."""
        deadline = time.monotonic() + timeout
        while self._next_event >= len(self.events):
            self._need("event", max(0.0, deadline - time.monotonic()))
        self._next_event += 1
        return self.events[self._next_event - 1]

    def until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT) -> Any:
        """Events until one satisfies ``predicate`` (or done); that one."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next_event(max(0.0, deadline - time.monotonic()))
            if predicate(event) or event["done"]:
                return event

    def until_done(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        event = self.until(lambda e: e["done"], timeout)
        assert event["done"], event
        return event

    def next_frame(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The next control frame not returned before."""
        deadline = time.monotonic() + timeout
        while self._next_frame >= len(self.frames):
            self._need("control frame", max(0.0, deadline - time.monotonic()))
        self._next_frame += 1
        return self.frames[self._next_frame - 1]

    def response(self, request_id: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The ``response`` object of the control_response to ``request_id``."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for frame in self.frames[seen:]:
                inner = frame.get("response", {})
                if frame["type"] == "control_response" and inner.get("request_id") == request_id:
                    return dict(inner)
            seen = len(self.frames)
            self._need(f"response to {request_id}", max(0.0, deadline - time.monotonic()))

    def quiet(self, seconds: float) -> list[bytes]:
        """The lines that arrive within ``seconds``."""
        before = len(self.lines)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.eof:
            self.read_line(max(0.0, deadline - time.monotonic()))
        return self.lines[before:]

    def rest(self, timeout: float = TIMEOUT) -> None:
        """Read until stdout closes."""
        deadline = time.monotonic() + timeout
        while self.read_line(max(0.0, deadline - time.monotonic())) is not None:
            pass
        assert self.eof, f"stdout still open after {timeout} s; stderr {self.stderr_so_far()!r}"

    def partial(self, timeout: float = TIMEOUT) -> bytes:
        """Wait for the start of a line (bytes with no newline yet); those bytes."""
        deadline = time.monotonic() + timeout
        while not self._buffer:
            assert self._fill(deadline), f"nothing came within {timeout} s"
        assert b"\n" not in self._buffer, bytes(self._buffer)
        return bytes(self._buffer)

    @property
    def unterminated(self) -> bytes:
        """Bytes after the last newline (a cut line), once stdout has closed."""
        return bytes(self._buffer)

    # -- writing -----------------------------------------------------------------------

    def send(self, obj: Any) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(compact(obj) + b"\n")
        self.popen.stdin.flush()

    _ids = 0

    def request(self, subtype: str, **params: Any) -> str:
        """Send a control request on stdin; its id."""
        Sim._ids += 1
        request_id = f"test_{Sim._ids}"
        request = {"subtype": subtype, **params}
        self.send({"type": "control_request", "request_id": request_id, "request": request})
        return request_id

    def call(self, subtype: str, **params: Any) -> dict[str, Any]:
        """A control request and its response (``subtype`` success or error)."""
        return self.response(self.request(subtype, **params))

    def ok(self, subtype: str, **params: Any) -> dict[str, Any]:
        """A control request that must succeed; its payload."""
        answer = self.call(subtype, **params)
        assert answer["subtype"] == "success", answer
        return dict(answer["response"])

    def close_stdin(self) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.close()

    # -- exit ----------------------------------------------------------------------------

    def wait(self, timeout: float = 5.0) -> int:
        return self.popen.wait(timeout=timeout)

    def _drain_stderr(self) -> None:
        assert self.popen.stderr is not None
        fd = self.popen.stderr.fileno()
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            self._stderr += data

    def stderr_so_far(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        self.wait()
        self._stderr_thread.join(timeout=5)
        return self.stderr_so_far()


def compact(obj: Any) -> bytes:
    """Compact JSON as Go writes it: ``<``, ``>``, ``&``, U+2028 and U+2029 escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text.encode()


_REFERENCES: dict[tuple[tuple[str, ...], bytes, bytes | None], list[bytes]] = {}
"""The reference runs made so far, by command line, input and scenario file's text."""


def reference_lines(
    command: str, commands: Sequence[Any], *args: str, scenario: str = "default"
) -> list[bytes]:
    """The stdout lines of a run without --control at speed 0, fed ``commands`` at once,
    then stdin closed; a run left waiting at a gate is ended by SIGTERM, as quit.

    Such a run gives the same lines every time, so each is run once and its lines kept
    for the other tests that compare against it."""
    stdin = b"".join(compact(c) + b"\n" for c in commands)
    argv = [sys.executable, "-m", "simulator", command, "--stdio", "--speed", "0"]
    argv += ["--scenario", scenario, *args]
    text = Path(scenario).read_bytes() if os.path.isfile(scenario) else None
    key = (tuple(argv), stdin, text)
    if key not in _REFERENCES:
        _REFERENCES[key] = _reference_run(argv, stdin)
    return list(_REFERENCES[key])


def _reference_run(argv: list[str], stdin: bytes) -> list[bytes]:
    with Sim(argv) as proc:
        proc.popen.stdin.write(stdin)  # type: ignore[union-attr]
        proc.close_stdin()
        deadline = time.monotonic() + 30
        while not proc.eof and NOBODY_ANSWERS not in proc.stderr_so_far():
            assert time.monotonic() < deadline, "the run neither ended nor waited"
            proc.read_line(0.05)  # keep stdout drained, so the run never blocks on it
        if not proc.eof:
            proc.popen.terminate()
        proc.rest()
        assert proc.wait(10) == 0
        return proc.lines


@pytest.fixture
def sock_path() -> Iterator[str]:
    """A short socket path in a fresh directory (removed afterwards)."""
    folder = tempfile.mkdtemp(prefix="zsc-")
    yield os.path.join(folder, "control.sock")
    shutil.rmtree(folder, ignore_errors=True)


def approver_scenario(tmp_path: Path, approver: str = "control", auth_timeout: float = 0.5) -> str:
    path = tmp_path / f"approver-{approver}.toml"
    path.write_text(APPROVER.format(approver=approver, auth_timeout=auth_timeout))
    return str(path)


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_control_path_longer_than_a_socket_address_is_refused_before_the_first_event(
    tmp_path: Path, how: str
) -> None:
    from simulator.runners.controlled import SUN_PATH_MAX

    path = str(tmp_path / ("s" * 200))[: SUN_PATH_MAX + 1]
    journal = tmp_path / "j.jsonl"
    argv = [sys.executable, "-m", "simulator", "generate", "--stdio", "--journal", str(journal)]
    extra = {"ZREAD_SIM_CONTROL": f"unix:{path}"} if how == "variable" else {}
    argv += ["--control", f"unix:{path}"] if how == "flag" else []
    done = subprocess.run(
        argv,
        env=clean_environ(extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""  # before the first event
    assert done.stderr.decode() == (
        f"zread-sim: --control unix:{path}: {SUN_PATH_MAX + 1} bytes, longer than a socket "
        f"address can be ({SUN_PATH_MAX} bytes here); give a shorter path\n"
    )
    assert os.listdir(tmp_path) == []  # no socket, no journal: nothing made


# -- --control stdio: each subtype ---------------------------------------------------


def test_snapshot_at_a_gate_shows_the_last_event() -> None:
    with Sim.start("generate", speed=1) as sim:
        first = sim.next_event()
        snap = sim.ok("snapshot")
        assert snap["command"] == "generate"
        assert snap["state"] == "select_action" == first["vm"]["state"]
        assert snap["vm"] == first["vm"]
        assert snap["waiting_for"] == first["waiting_for"] == ["select_action", "cancel", "quit"]
        assert snap["timers"] == []
        assert snap["done"] is False
        assert snap["paused"] is False
        assert snap["speed"] == 1.0
        assert isinstance(snap["clock"], float) and snap["clock"] >= 0
        sim.send({"type": "quit"})
        assert sim.until_done()["vm"] == first["vm"]
        assert sim.wait() == 0


def test_snapshot_lists_the_pending_timers() -> None:
    with Sim.start("login", speed=100) as sim:
        sim.next_event()
        sim.send(REGION)
        init = sim.next_event()
        assert init["vm"]["state"] == "init_flow"
        snap = sim.ok("snapshot")
        assert snap["state"] == "init_flow"
        assert snap["vm"] == init["vm"] and snap["waiting_for"] == [] == init["waiting_for"]
        assert snap["speed"] == 100.0
        (timer,) = snap["timers"]
        assert set(timer) == {"trigger", "deadline", "in"}
        assert timer["trigger"] == "_flow_ready"
        # init_flow takes 0.2-0.4 s, times 100.
        assert 20.0 <= timer["in"] <= 40.0
        assert timer["deadline"] == pytest.approx(snap["clock"] + timer["in"])


def test_snapshot_clock_moves_with_time() -> None:
    """The session's clock is the time since start (less pauses), also at a gate."""
    with Sim.start("generate", speed=1) as sim:
        sim.next_event()
        first = sim.ok("snapshot")["clock"]
        time.sleep(0.6)
        second = sim.ok("snapshot")["clock"]
        assert second - first >= 0.4, (first, second)


def test_a_commands_delay_counts_from_its_arrival() -> None:
    """As without --control: a step started by a command takes its delay from then on.

    login's init_flow takes at least 0.2 s at speed 1; the client answered the gate
    after 0.8 s, so open_browser may not follow init_flow at once.
    """
    with Sim.start("login", speed=1) as sim:
        sim.next_event()
        time.sleep(0.8)
        sim.send(REGION)
        assert sim.next_event()["vm"]["state"] == "init_flow"
        early = sim.quiet(0.1)
        assert early == [], early


def test_inject_a_failure_now_fails_that_page() -> None:
    with Sim.start("generate", "-y", speed=0.2) as sim:  # page 16 ends after >= 0.36 s
        sim.next_event()
        failure = {"point": "page", "target": 16, "first": 99, "error": "page: injected"}
        assert sim.ok("inject", failure=failure) == {"injected": "failure", "id": "failure-1"}
        assert sim.ok("set_speed", speed=0) == {"speed": 0.0}  # injected: the rest at once
        gate = sim.until(lambda e: "retry" in e["waiting_for"])
        assert gate["waiting_for"] == ["quit", "retry", "skip_all"]
        tasks = {t["id"]: t for t in gate["vm"]["pages"]["tasks"]}
        assert tasks[16]["state"] == "failed"
        assert tasks[16]["error"] == "page: injected"
        assert tasks[16]["retry_count"] == 2
        assert all(t["state"] == "done" for i, t in tasks.items() if i != 16)
        sim.send({"type": "skip_all"})
        assert sim.until_done()["vm"]["done_total"] == 15


def test_inject_failures_at_a_point() -> None:
    """Page 5 fails exactly its attempts 1 and 2; the catalog its first attempt."""
    with Sim.start("generate") as sim:
        sim.next_event()
        page = {"point": "page", "target": 5, "attempts": [1, 2], "error": "page: early"}
        assert sim.ok("inject", failure=page) == {"injected": "failure", "id": "failure-1"}
        catalog = {"point": "catalog", "first": 1}
        assert sim.ok("inject", failure=catalog) == {"injected": "failure", "id": "failure-2"}
        sim.send(GENERATE)
        done = sim.until_done()
        assert done["vm"]["state"] == "done" and done["vm"]["done_total"] == 16
        assert done["vm"]["catalog"]["auto_retry"] == 1
        tasks = {t["id"]: t for t in done["vm"]["pages"]["tasks"]}
        assert tasks[5]["retry_count"] == 2
        assert all(t["retry_count"] == 0 for i, t in tasks.items() if i != 5)
        errors = {t["error"] for e in sim.events for t in e["vm"]["pages"]["tasks"] if t["id"] == 5}
        assert "page: early" in errors
        assert sim.wait() == 0


def test_inject_a_fault_now_fires_at_the_next_event() -> None:
    with Sim.start("generate") as sim:
        sim.next_event()
        fault = {"kind": "diagnostic", "text": "injected: now"}
        assert sim.ok("inject", fault=fault) == {"injected": "fault", "id": "fault-1"}
        assert sim.quiet(0.2) == []  # nothing to write it after yet
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        after_response = sim.lines[sim.lines.index(sim.event_lines[1]) :]
        assert after_response[1] == b"injected: now\n"
        assert sim.noise == [b"injected: now\n"]
        assert sim.wait() == 0


def test_inject_a_fault_after_an_event_counts_the_process_events() -> None:
    """after_event is the n-th event the process writes (1 is the first), also when
    injected: one event is written before the injection, the fault follows the 3rd."""
    with Sim.start("generate") as sim:
        sim.next_event()
        fault = {"kind": "diagnostic", "text": "after the third", "after_event": 3}
        assert sim.ok("inject", fault=fault) == {"injected": "fault", "id": "fault-1"}
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        noise_at = sim.lines.index(b"after the third\n")
        assert sim.lines[noise_at - 1] == sim.event_lines[2]


def test_inject_a_fault_on_a_state_and_other_kinds() -> None:
    with Sim.start("generate") as sim:
        sim.next_event()
        fault = {"kind": "stderr", "text": "entered done", "on_state": "done"}
        assert sim.ok("inject", fault=fault) == {"injected": "fault", "id": "fault-1"}
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        assert sim.noise == []
        assert sim.wait() == 0
        assert sim.stderr == "entered done\n"

    with Sim.start("generate") as sim:
        sim.next_event()
        exit_7 = {"kind": "exit", "code": 7}
        assert sim.ok("inject", fault=exit_7) == {"injected": "fault", "id": "fault-1"}
        sim.send(GENERATE)
        sim.rest()
        assert sim.wait() == 7
        assert [e["vm"]["state"] for e in sim.events] == ["select_action", "running"]
        assert not any(e["done"] for e in sim.events)


@pytest.fixture(scope="module")
def refusing() -> Iterator[Sim]:
    """One generate process at its first gate, shared by the refused requests below (an
    invalid injection, an unknown subtype, a lone surrogate): a refused request changes
    nothing (the injections compare snapshots). When the module is done with it, the
    run it makes is byte for byte the run of a process that was never sent them."""
    with Sim.start("generate") as sim:
        sim.next_event()
        yield sim
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
        assert sim.event_lines == reference_lines("generate", [GENERATE])
        assert sim.noise == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"failure": {"point": "nowhere"}}, "point: 'nowhere' is not one of the allowed values"),
        ({"failure": {"point": "page", "probability": 2}}, "probability must be between 0 and 1"),
        ({"failure": 3}, "expected an object, got an integer"),
        ({"fault": {"kind": "split", "pieces": 1}}, "pieces must be >= 2"),
        ({"fault": {"kind": "diagnostic", "colour": "red"}}, "colour"),
        ({}, 'inject takes {"failure": {...}}, {"fault": {...}} or {"http": {...}}'),
    ],
)
def test_invalid_inject_is_an_error_and_changes_nothing(
    refusing: Sim, params: dict[str, Any], named: str
) -> None:
    sim = refusing
    before = sim.ok("snapshot")
    answer = sim.call("inject", **params)
    assert answer["subtype"] == "error", answer
    assert named in answer["error"]
    after = sim.ok("snapshot")
    before.pop("clock"), after.pop("clock")
    assert after == before
    assert sim.noise == []


def test_set_speed_zero_finishes_the_rest_at_once() -> None:
    with Sim.start("generate", "-y", speed=5) as sim:  # about 75 s at this speed
        sim.next_event()
        assert sim.ok("set_speed", speed=0) == {"speed": 0.0}
        done = sim.until_done(timeout=10)
        assert done["vm"]["state"] == "done" and done["vm"]["done_total"] == 16
        assert sim.wait() == 0


@pytest.fixture(scope="module")
def at_speed_2() -> Iterator[Sim]:
    """One generate process at speed 2, at its first gate, shared by the refused speeds
    below (a refused request changes nothing; each case reads the speed back)."""
    with Sim.start("generate", speed=2) as sim:
        sim.next_event()
        yield sim


@pytest.mark.parametrize("value", [-1, "fast", True, None, [1], {"x": 1}])
def test_set_speed_refuses_what_is_not_a_number_at_least_zero(at_speed_2: Sim, value: Any) -> None:
    sim = at_speed_2
    answer = sim.call("set_speed", speed=value)
    assert answer["subtype"] == "error"
    shown = json.dumps(value, separators=(",", ":"))
    assert answer["error"] == f"set_speed takes a number >= 0, got {shown}"
    assert sim.ok("snapshot")["speed"] == 2.0
    missing = sim.call("set_speed")
    assert missing["error"] == "set_speed takes a number >= 0, got null"


def test_pause_freezes_the_timers_and_resume_releases_them() -> None:
    with Sim.start("generate", "-y", speed=0.1) as sim:  # an event every ~20 ms
        sim.next_event()
        paused = sim.ok("pause")
        assert paused["paused"] is True and isinstance(paused["clock"], float)
        assert sim.quiet(0.3) == []  # some 15 events, had the timers run
        snap = sim.ok("snapshot")
        assert snap["paused"] is True and snap["timers"]
        assert sim.ok("pause")["paused"] is True  # twice is harmless
        assert sim.quiet(0.1) == []
        assert sim.ok("resume")["paused"] is False
        sim.next_event(timeout=2)
        assert sim.ok("snapshot")["paused"] is False
        assert sim.ok("set_speed", speed=0) == {"speed": 0.0}  # resumed: the rest at once
        assert sim.until_done()["vm"]["done_total"] == 16
        assert sim.wait() == 0


def test_quit_ends_with_done_and_exit_zero() -> None:
    with Sim.start("generate", "-y", speed=5) as sim:
        first = sim.next_event()
        request_id = sim.request("quit")
        done = sim.until_done()
        assert done["vm"] == first["vm"] and done["waiting_for"] == []
        assert sim.wait() == 0
        sim.rest()
        assert sim.response(request_id, timeout=0) == {
            "subtype": "success",
            "request_id": request_id,
            "response": {"done": True},
        }
        assert sim.events[-1]["done"] and len(sim.events) == 2
        assert sim.lines[-1] == sim.event_lines[-1]  # the answer came first: nothing follows done


def test_requests_still_handled_when_a_line_quits_are_answered_before_done() -> None:
    """Lines read at once: a quit request, a snapshot, and the client's quit. Neither
    handler has run when the client's quit ends the session: both are answered with an
    error before done:true, the last line."""
    with Sim.start("generate") as sim:
        sim.next_event()
        requests = [
            compact({"type": "control_request", "request_id": rid, "request": {"subtype": sub}})
            for rid, sub in (("q", "quit"), ("s", "snapshot"))
        ]
        assert sim.popen.stdin is not None
        sim.popen.stdin.write(b"\n".join([*requests, b'{"type":"quit"}\n']))
        sim.popen.stdin.flush()
        sim.rest()
        assert sim.wait() == 0
        _, *answers, done = sim.lines
        ended = "control: the session ended before this request was answered"
        assert [json.loads(answer)["response"] for answer in answers] == [
            {"subtype": "error", "request_id": rid, "error": ended} for rid in ("q", "s")
        ]
        assert json.loads(done)["done"] is True and len(sim.events) == 2


def test_an_unsupported_subtype_is_named(refusing: Sim) -> None:
    sim = refusing
    request_id = sim.request("frobnicate", x=1)
    assert sim.response(request_id) == {
        "subtype": "error",
        "request_id": request_id,
        "error": "Unsupported control request subtype: frobnicate",
    }


def send_escaped(sim: Sim, obj: Any) -> None:
    """One line with every non-ASCII character escaped, so a lone surrogate gets through."""
    assert sim.popen.stdin is not None
    sim.popen.stdin.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    sim.popen.stdin.flush()


@pytest.fixture(scope="module")
def editing() -> Iterator[Sim]:
    """One config process at its gate, shared by the lines the session refuses below (it
    stays at its gate); quit when the module is done with it."""
    with Sim.start("config") as sim:
        assert sim.next_event()["vm"]["saved"] is False
        yield sim
        sim.send({"type": "quit"})
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
        assert sim.noise == []


@pytest.mark.parametrize(
    ("kind", "shown"), [([], "[]"), ({"type": "control_request"}, '{"type":"control_request"}')]
)
def test_a_type_that_is_not_a_string_goes_to_the_session(
    editing: Sim, kind: Any, shown: str
) -> None:
    sim = editing
    before = len(sim.frames)
    sim.send({"type": kind})
    bad = sim.next_event()
    assert bad["error"] == f'command "{shown}" not allowed in state editing'
    assert sim.ok("snapshot")["command"] == "config"
    assert sim.noise == []
    assert [f["type"] for f in sim.frames[before:]] == ["control_response"]


@pytest.mark.parametrize(
    "request_body",
    [
        {"subtype": "inject", "fault": {"kind": "diagnostic", "text": "warning: \ud800"}},
        {"subtype": "inject", "failure": {"point": "page", "first": 99, "error": "x\udc00"}},
        {"subtype": "frobnicate\ud800"},
    ],
)
def test_a_request_holding_a_lone_surrogate_is_refused(
    refusing: Sim, request_body: dict[str, Any]
) -> None:
    """(The run then goes on as one never sent it: ``refusing``.)"""
    sim = refusing
    request_id = f"s{len(sim.frames)}"
    request = {"type": "control_request", "request_id": request_id, "request": request_body}
    send_escaped(sim, request)
    assert sim.response(request_id) == {
        "subtype": "error",
        "request_id": request_id,
        "error": "control: invalid string (lone surrogate)",
    }
    assert sim.noise == []


def test_a_request_id_holding_a_lone_surrogate_is_answered_with_a_null_id(refusing: Sim) -> None:
    sim = refusing
    before = len(sim.frames)
    for subtype in ("frobnicate", "snapshot"):
        request = {"type": "control_request", "request_id": "\ud800", "request": {}}
        request["request"] = {"subtype": subtype}
        send_escaped(sim, request)
    assert sim.ok("snapshot")["command"] == "generate"  # still alive, still answering
    assert sim.noise == []
    refused = {
        "subtype": "error",
        "request_id": None,
        "error": "control: invalid string (lone surrogate)",
    }
    frames = sim.frames[before:]
    assert [f["response"] for f in frames[:2]] == [refused, refused]
    assert len(frames) == 3  # one answer a request


def test_control_frames_never_change_the_event_bytes() -> None:
    """Every non-control line is the byte-exact line a run without --control writes."""
    commands = [GENERATE]
    with Sim.start("generate") as sim:
        sim.next_event()
        sim.ok("snapshot")
        sim.call("frobnicate")
        sim.call("inject", failure={"point": "nowhere"})
        sim.ok("set_speed", speed=0)
        sim.ok("pause")
        sim.send(GENERATE)
        sim.next_event()
        sim.ok("snapshot")
        sim.ok("resume")
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
    assert len(sim.frames) == 7
    assert sim.noise == []
    assert sim.event_lines == reference_lines("generate", commands)
    assert len(sim.lines) == len(sim.frames) + len(sim.event_lines)  # nothing merged


def test_scenario_faults_act_as_without_control() -> None:
    """crash exits 3 in its 3rd event; hang goes silent after its 3rd and never exits."""
    with Sim.start("generate", "-y", scenario="crash") as sim:
        sim.rest()
        assert sim.wait() == 3
        assert len(sim.events) == 2 and sim.lines == sim.event_lines
        assert sim.unterminated.startswith(b'{"vm":')  # the 3rd event, cut
    with Sim.start("generate", "-y", scenario="hang") as sim:
        for _ in range(3):
            sim.next_event()
        assert sim.quiet(0.5) == []
        assert not sim.eof, "a hung zread keeps its stdout open"
        assert sim.popen.poll() is None, "a hung zread does not exit"


# -- --control unix:PATH -------------------------------------------------------------


def test_unix_socket_is_private_and_serves_the_admin_api(sock_path: str) -> None:
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        first = sim.next_event()
        with Remote(sock_path) as remote:
            mode = os.stat(sock_path).st_mode
            assert stat.S_ISSOCK(mode)
            assert stat.S_IMODE(mode) == 0o600
            snap = remote.snapshot()
            assert snap["command"] == "generate" and snap["vm"] == first["vm"]
            assert remote.inject(fault={"kind": "diagnostic", "text": "via the socket"}) == {
                "injected": "fault",
                "id": "fault-1",
            }
            assert remote.set_speed(0) == {"speed": 0.0}
            sim.send(GENERATE)
            sim.until_done()
            sim.rest()
        assert sim.wait() == 0
        assert sim.frames == []  # nothing of the control channel on stdout
        assert sim.noise == [b"via the socket\n"]
        assert sim.lines[2] == b"via the socket\n"
    assert sim.event_lines == reference_lines("generate", [GENERATE])
    assert not os.path.exists(sock_path)


def test_a_socket_peer_gets_one_answer_for_a_bad_type_and_lone_surrogates(sock_path: str) -> None:
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        sim.next_event()
        with Remote(sock_path) as probe:  # waits for the socket, then gives way
            probe.snapshot()
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.connect(sock_path)
        peer.settimeout(5)
        with peer, peer.makefile("rb") as replies:
            bad = {"subtype": "inject", "fault": {"kind": "diagnostic", "text": "\ud800"}}
            lines = [
                {"type": []},
                {"type": "control_request", "request_id": "\udc00", "request": {"subtype": "x"}},
                {"type": "control_request", "request_id": "s1", "request": bad},
                {"type": "control_request", "request_id": "s2", "request": {"subtype": "snapshot"}},
            ]
            peer.sendall(b"".join(json.dumps(obj).encode() + b"\n" for obj in lines))
            assert json.loads(replies.readline())["response"] == {
                "subtype": "error",
                "request_id": None,
                "error": NOT_A_FRAME,  # the socket carries frames alone: nothing else answers
            }
            surrogate_id = b'"request_id":null,"error":"control: invalid string (lone surrogate)"'
            assert surrogate_id in replies.readline()
            first = replies.readline()
            assert first == (
                b'{"type":"control_response","response":{"subtype":"error","request_id":"s1",'
                b'"error":"control: invalid string (lone surrogate)"}}\n'
            )
            second = json.loads(replies.readline())["response"]
            assert second["request_id"] == "s2" and second["subtype"] == "success"
            assert second["response"]["command"] == "generate"
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
        assert sim.lines == sim.event_lines
    assert sim.stderr == ""


def test_unix_path_that_is_not_a_socket_is_refused(sock_path: str) -> None:
    Path(sock_path).write_text("keep me")
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        sim.rest()
        assert sim.wait() == 2
        assert sim.lines == []
        assert sim.stderr == f"zread-sim: --control unix:{sock_path}: exists and is not a socket\n"
    assert Path(sock_path).read_text() == "keep me"


def test_a_stale_socket_is_replaced(sock_path: str) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock_path)
    stale.close()  # the file stays; nobody listens
    assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        sim.next_event()
        with Remote(sock_path) as remote:
            assert remote.snapshot()["state"] == "select_action"
            assert remote.quit() == {"done": True}
        sim.until_done()
        assert sim.wait() == 0
        assert sim.stderr == ""


def test_a_second_simulator_on_a_live_socket_is_refused(sock_path: str) -> None:
    with Sim.start("generate", control=f"unix:{sock_path}") as first:
        first.next_event()
        with Remote(sock_path) as remote:
            remote.snapshot()
            with Sim.start("version", control=f"unix:{sock_path}") as second:
                second.rest()
                assert second.wait() == 2
                assert second.lines == []
                assert second.stderr == (
                    f"zread-sim: --control unix:{sock_path}: another process is listening\n"
                )
            assert remote.snapshot()["command"] == "generate"  # the first one is unharmed


def test_zread_sim_control_works_like_the_flag(sock_path: str) -> None:
    env = {"ZREAD_SIM_CONTROL": f"unix:{sock_path}"}
    with Sim.start("generate", control=None, env=env) as sim:
        sim.next_event()
        with Remote(sock_path) as remote:
            assert remote.snapshot()["command"] == "generate"
            remote.quit()
        sim.until_done()
        assert sim.wait() == 0

    with Sim.start("generate", control=None, env={"ZREAD_SIM_CONTROL": "stdio"}) as sim:
        sim.next_event()
        assert sim.ok("snapshot")["command"] == "generate"

    # The flag beats the variable: stdio is used, no socket is made.
    with Sim.start("generate", control="stdio", env=env) as sim:
        sim.next_event()
        assert sim.ok("snapshot")["state"] == "select_action"
        assert not os.path.exists(sock_path)

    with Sim.start("generate", control=None, env={"ZREAD_SIM_CONTROL": "tcp:1"}) as sim:
        sim.rest()
        assert sim.wait() == 2
        assert sim.stderr == "zread-sim: --control takes stdio or unix:PATH, got 'tcp:1'\n"


# -- login approved by the peer --------------------------------------------------------


def reach_authorize(sim: Sim) -> tuple[dict[str, Any], dict[str, Any]]:
    """Drive login to waiting; the waiting event and the authorize request frame."""
    sim.next_event()
    sim.send(REGION)
    waiting = sim.until(lambda e: e["vm"]["state"] == "waiting")
    request = sim.next_frame()
    assert request["type"] == "control_request"
    assert request["request"]["subtype"] == "authorize"
    return waiting, request


def answer(sim: Sim, request: dict[str, Any], payload: dict[str, Any]) -> None:
    response = {"subtype": "success", "request_id": request["request_id"], "response": payload}
    sim.send({"type": "control_response", "response": response})


def test_login_approved_by_the_stdio_peer(tmp_path: Path) -> None:
    with Sim.start("login", speed=1, scenario=approver_scenario(tmp_path)) as sim:
        waiting, request = reach_authorize(sim)
        assert request["request"] == {
            "subtype": "authorize",
            "authorize_url": waiting["vm"]["authorize_url"],
            "auth_timeout": waiting["vm"]["auth_timeout"],
        }
        assert waiting["vm"]["auth_timeout"] == 500_000_000
        answer(sim, request, {"approve": True})
        offer = sim.next_event()
        assert offer["vm"]["state"] == "select_model"
        assert offer["waiting_for"] == ["select_model", "quit"]
        sim.send({"type": "select_model", "params": {"model": "glm-4.6"}})
        done = sim.until_done()
        assert done["vm"]["state"] == "done" and done["vm"]["username"] == "octocat"
        assert sim.wait() == 0
        sim.rest()
        assert [f["type"] for f in sim.frames] == ["control_request"]


def test_login_denied_by_the_stdio_peer(tmp_path: Path) -> None:
    with Sim.start("login", speed=1, scenario=approver_scenario(tmp_path)) as sim:
        _, request = reach_authorize(sim)
        answer(sim, request, {"approve": False})
        done = sim.next_event()
        assert done["done"] is True
        assert done["vm"]["state"] == "error"
        assert done["vm"]["error"] == "authorization denied"
        assert sim.wait() == 0


def test_login_times_out_and_cancels_the_stdio_request(tmp_path: Path) -> None:
    with Sim.start("login", speed=1, scenario=approver_scenario(tmp_path)) as sim:
        _, request = reach_authorize(sim)
        done = sim.next_event(timeout=5)  # auth_timeout is 0.5 s
        assert done["done"] is True and done["vm"]["state"] == "error"
        assert done["vm"]["error"] == "authorization timed out"
        cancel = sim.next_frame()
        assert cancel == {"type": "control_cancel_request", "request_id": request["request_id"]}
        assert sim.wait() == 0
        assert_nothing_follows_done(sim, request["request_id"])


def assert_nothing_follows_done(sim: Sim, request_id: str) -> None:
    """The withdrawn request's cancel frame came before the done event, the last line."""
    sim.rest()
    cancel = compact({"type": "control_cancel_request", "request_id": request_id}) + b"\n"
    assert json.loads(sim.lines[-1])["done"] is True, sim.lines[-3:]
    assert sim.lines[-2] == cancel, sim.lines[-3:]


@pytest.mark.parametrize("how", ["quit", "SIGTERM"])
def test_quit_while_the_peer_decides_withdraws_the_request_before_done(
    tmp_path: Path, how: str
) -> None:
    with Sim.start("login", speed=1, scenario=approver_scenario(tmp_path, auth_timeout=30)) as sim:
        _, request = reach_authorize(sim)
        if how == "quit":
            sim.send({"type": "quit"})
        else:
            sim.popen.send_signal(signal.SIGTERM)
        assert sim.until_done()["vm"]["state"] == "waiting"
        assert sim.wait() == 0
        assert_nothing_follows_done(sim, request["request_id"])


def test_an_authorize_answer_holding_a_lone_surrogate_fails_the_login(tmp_path: Path) -> None:
    with Sim.start("login", speed=1, scenario=approver_scenario(tmp_path, auth_timeout=5)) as sim:
        _, request = reach_authorize(sim)
        response = {"subtype": "error", "request_id": request["request_id"], "error": "\ud800"}
        send_escaped(sim, {"type": "control_response", "response": response})
        done = sim.next_event()
        assert done["done"] is True and done["vm"]["state"] == "error"
        assert done["vm"]["error"] == "control: invalid string (lone surrogate)"
        assert sim.wait() == 0


def test_without_a_peer_the_approver_key_changes_nothing(tmp_path: Path) -> None:
    with_key = reference_lines("login", [REGION], scenario=approver_scenario(tmp_path))
    without = reference_lines("login", [REGION], scenario=approver_scenario(tmp_path, "user"))
    assert with_key == without
    states = [json.loads(line)["vm"]["state"] for line in with_key]
    # The simulated user approved; SIGTERM then quit at the model gate.
    assert states == [
        "select_region",
        "init_flow",
        "open_browser",
        "waiting",
        "select_model",
        "select_model",
    ]


def test_a_peer_does_not_approve_when_the_user_does(tmp_path: Path) -> None:
    scenario = approver_scenario(tmp_path, "user", auth_timeout=30)
    with Sim.start("login", speed=1, scenario=scenario) as sim:
        sim.next_event()
        sim.send(REGION)
        assert sim.until(lambda e: e["vm"]["state"] == "select_model")["vm"]["avail_models"]
        assert sim.frames == []


def test_login_approved_through_remote(tmp_path: Path, sock_path: str) -> None:
    asked: list[dict[str, Any]] = []

    def approve(request: dict[str, Any]) -> bool:
        asked.append(request)
        return True

    scenario = approver_scenario(tmp_path, auth_timeout=30)
    with Sim.start("login", speed=1, scenario=scenario, control=f"unix:{sock_path}") as sim:
        sim.next_event()
        with Remote(sock_path, on_authorize=approve) as remote:
            remote.snapshot()  # connected before login asks
            sim.send(REGION)
            deadline = time.monotonic() + 5
            while remote.snapshot()["state"] != "select_model":  # answers authorize meanwhile
                assert time.monotonic() < deadline
                time.sleep(0.02)
            waiting = sim.until(lambda e: e["vm"]["state"] == "waiting")
            assert sim.next_event()["vm"]["state"] == "select_model"
        assert len(asked) == 1
        assert asked[0]["authorize_url"] == waiting["vm"]["authorize_url"]
        assert asked[0]["auth_timeout"] == 30_000_000_000


def test_login_denied_through_remote(tmp_path: Path, sock_path: str) -> None:
    scenario = approver_scenario(tmp_path, auth_timeout=30)
    with Sim.start("login", speed=1, scenario=scenario, control=f"unix:{sock_path}") as sim:
        sim.next_event()
        with Remote(sock_path, on_authorize=lambda request: False) as remote:
            remote.snapshot()
            sim.send(REGION)
            remote.serve(5)  # returns when the simulator closes the connection
        done = sim.until_done()
        assert done["vm"]["state"] == "error" and done["vm"]["error"] == "authorization denied"
        assert sim.wait() == 0


def test_login_times_out_and_cancels_the_socket_request(tmp_path: Path, sock_path: str) -> None:
    """The simulator's side, seen by a raw socket peer that never answers."""
    with Sim.start(
        "login", speed=1, scenario=approver_scenario(tmp_path), control=f"unix:{sock_path}"
    ) as sim:
        sim.next_event()
        with Remote(sock_path) as probe:  # waits for the socket, then gives way
            probe.snapshot()
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.connect(sock_path)
        with peer:
            sim.send(REGION)
            done = sim.until_done()
            assert done["vm"]["error"] == "authorization timed out"
            assert sim.wait() == 0
            peer.settimeout(5)
            received = b""
            while chunk := peer.recv(1 << 16):
                received += chunk
        frames = [json.loads(line) for line in received.splitlines()]
        assert [f["type"] for f in frames] == ["control_request", "control_cancel_request"]
        assert frames[0]["request"]["subtype"] == "authorize"
        assert frames[1]["request_id"] == frames[0]["request_id"]


def test_remote_records_the_cancelled_authorize(tmp_path: Path, sock_path: str) -> None:
    """A Remote whose on_authorize is still deciding when auth_timeout runs out: the
    simulator cancels the request and exits; serve() ends and lists the cancel."""
    with Sim.start(
        "login", speed=1, scenario=approver_scenario(tmp_path), control=f"unix:{sock_path}"
    ) as sim:

        def too_late(request: dict[str, Any]) -> bool:
            sim.wait(timeout=5)  # decide only once the login is over
            return True

        sim.next_event()
        with Remote(sock_path, on_authorize=too_late) as remote:
            remote.snapshot()
            sim.send(REGION)
            remote.serve(5)
            assert len(remote.cancelled) == 1 and remote.cancelled[0].startswith("req_")
        assert sim.until_done()["vm"]["error"] == "authorization timed out"


# -- the pytest plugin: zread_bin + zread_remote ---------------------------------------


def spawn_zread(*args: str) -> Sim:
    return Sim(["zread", *args], env=os.environ)


def test_zread_remote_steers_the_zread_a_test_spawned(
    zread_bin: ZreadExecutable, zread_remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    zread_bin.strict = False  # it ends zread with SIGTERM on purpose
    monkeypatch.setenv("ZREAD_SIM_SPEED", "5")  # slow enough to catch it running
    with spawn_zread("generate", "-y", "--stdio") as sim:
        first = sim.next_event()
        snap = zread_remote.snapshot()
        assert snap["command"] == "generate" and snap["state"] == "running"
        assert snap["speed"] == 5.0 and snap["vm"]["pages"]["total"] == 0
        failure = {"point": "page", "first": 99, "error": "page: injected by the test"}
        assert zread_remote.inject(failure=failure) == {"injected": "failure", "id": "failure-1"}
        fault = {"kind": "diagnostic", "text": "hello from the test"}
        assert zread_remote.inject(fault=fault) == {"injected": "fault", "id": "fault-1"}
        assert zread_remote.set_speed(0) == {"speed": 0.0}
        gate = sim.until(lambda e: "retry" in e["waiting_for"])
        tasks = gate["vm"]["pages"]["tasks"]
        assert len(tasks) == 16
        assert {(t["state"], t["error"]) for t in tasks} == {("failed", failure["error"])}
        assert sim.noise == [b"hello from the test\n"]
        assert sim.lines[sim.lines.index(sim.noise[0]) - 1] in sim.event_lines
        sim.close_stdin()
        sim.popen.terminate()  # end of input is not quit; SIGTERM is
        assert sim.until_done()["vm"] == gate["vm"]
        assert sim.wait() == 0
        assert first["vm"]["state"] == "running"


def test_zread_remote_works_whatever_the_fixture_order(
    zread_remote: Remote, zread_bin: Path
) -> None:
    assert os.environ.get("ZREAD_SIM_CONTROL", "").startswith("unix:")
    with spawn_zread("generate", "--stdio") as sim:
        sim.next_event()
        assert zread_remote.snapshot()["state"] == "select_action"
        sim.send({"type": "quit"})
        sim.until_done()
        assert sim.wait() == 0


# -- regressions: the process must always end, whatever happens around it ---------------


def test_quit_while_the_peer_decides_ends_the_process(tmp_path: Path) -> None:
    """The peer never answers authorize; quit ends the login and the process at once."""
    scenario = approver_scenario(tmp_path, auth_timeout=60)
    with Sim.start("login", speed=1, scenario=scenario) as sim:
        sim.next_event()
        sim.send(REGION)
        frame = sim.next_frame()
        assert frame["type"] == "control_request"
        assert frame["request"]["subtype"] == "authorize"
        sim.send({"type": "quit"})
        assert sim.until_done()["vm"]["state"] == "waiting"
        assert sim.wait(timeout=5) == 0


def test_stop_reading_holds_under_control(tmp_path: Path) -> None:
    """stdin stops being read after a timer's event, while the reader was waiting."""
    path = tmp_path / "deaf.toml"
    path.write_text('[[faults]]\nkind = "stop_reading"\nafter_event = 3\n')
    with Sim.start("generate", "-y", speed=0.1, scenario=str(path)) as sim:  # ~0.6 s to go
        for _ in range(3):
            sim.next_event()  # after the 3rd, stdin is no longer read
        time.sleep(0.05)
        sim.send({"type": "cancel"})
        done = sim.until_done(timeout=30)
        assert done["vm"]["state"] == "done"
        assert done["vm"]["done_total"] == done["vm"]["pages"]["total"]  # cancel never read


def test_a_reader_that_goes_away_ends_the_process_under_control() -> None:
    with Sim.start("generate", "-y", speed=1) as sim:
        sim.next_event()
        assert sim.popen.stdout is not None
        sim.popen.stdout.close()
        assert sim.popen.wait(timeout=3) == 0  # not after the whole ~7 s run
        assert "Traceback" not in sim.stderr
