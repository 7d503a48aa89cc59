"""ProcessRunner in-process on os.pipe() pairs, run in a thread (signals are then left alone)."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from simulator.core.session import Session
from simulator.runners.live import NOBODY_ANSWERS
from simulator.runners.stdio import (
    ProcessEndpoint,
    ProcessRunner,
    point_at_devnull,
    write_all,
    write_line,
)
from simulator.scenario import load_scenario
from statecharts import load_chart


def session(command: str, *, speed: float = 0, scenario: str = "default") -> Session:
    return Session(load_chart(command), load_scenario(scenario), seed=0, speed=speed)


class Harness:
    """A runner in a thread: we hold stdin's write end and stdout's read end."""

    def __init__(self, sess: Session, *, stdin: BinaryIO | None = None, **kwargs: Any) -> None:
        self.session = sess
        if stdin is None:
            in_r, self.in_w = os.pipe()
            self._stdin = os.fdopen(in_r, "rb")
        else:
            self.in_w = -1
            self._stdin = stdin
        self.out_r, out_w = os.pipe()
        self._stdout = os.fdopen(out_w, "wb")
        self.runner = ProcessRunner(sess, self._stdin, self._stdout, **kwargs)
        self.result: list[int] = []
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._buffer = bytearray()
        self.raw: list[bytes] = []

    def _run(self) -> None:
        try:
            self.result.append(self.runner.run())
        except BaseException as err:  # reported by join()
            self.error.append(err)

    def start(self) -> Harness:
        self.thread.start()
        return self

    def send(self, line: bytes) -> None:
        os.write(self.in_w, line + b"\n")

    def close_stdin(self) -> None:
        if self.in_w >= 0:
            os.close(self.in_w)
            self.in_w = -1

    def read_event(self, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.out_r, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                assert remaining > 0 and selector.select(remaining), "no event in time"
                data = os.read(self.out_r, 1 << 16)
                assert data, "stdout closed"
                self._buffer += data
        end = self._buffer.index(b"\n") + 1
        raw = bytes(self._buffer[:end])
        del self._buffer[:end]
        self.raw.append(raw)
        event = json.loads(raw)
        assert list(event) == ["vm", "waiting_for", "done", "error"]
        return dict(event)

    def join(self, timeout: float = 5.0) -> int:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the runner did not return"
        if self.error:
            raise self.error[0]
        return self.result[0]

    def close(self) -> None:
        self.close_stdin()
        self.runner.terminate()
        self.thread.join(5)
        for stream in (self._stdin, self._stdout):
            stream.close()
        with contextlib.suppress(OSError):
            os.close(self.out_r)


@pytest.fixture
def harnesses() -> Iterator[list[Harness]]:
    made: list[Harness] = []
    yield made
    for harness in made:
        harness.close()


def start(harnesses: list[Harness], sess: Session, **kwargs: Any) -> Harness:
    harness = Harness(sess, **kwargs)
    harnesses.append(harness)
    return harness.start()


def test_first_event_is_written_before_any_input(harnesses: list[Harness]) -> None:
    h = start(harnesses, session("config"))
    first = h.read_event()
    assert first["done"] is False
    assert first["waiting_for"] == ["update_fields", "save", "reload_llm", "quit"]
    assert h.thread.is_alive()  # still waiting for input
    h.send(b'{"type":"quit"}')
    assert h.read_event()["done"] is True
    assert h.join() == 0


def test_end_of_input_is_not_quit_terminate_is(harnesses: list[Harness]) -> None:
    err_r, err_w = os.pipe()
    h = start(harnesses, session("login"), stderr_fd=err_w)
    first = h.read_event()
    h.close_stdin()
    with selectors.DefaultSelector() as selector:
        selector.register(err_r, selectors.EVENT_READ)
        assert selector.select(5), "no stderr line about the closed stdin"
        said = os.read(err_r, 1 << 16).decode()
        assert said == NOBODY_ANSWERS.format(waiting="select_region, quit") + "\n"
        selector.unregister(err_r)
        selector.register(h.out_r, selectors.EVENT_READ)
        assert selector.select(0.2) == []  # it waits at its gate, writing nothing
    assert h.thread.is_alive()
    h.runner.terminate()  # what SIGTERM does to the process
    last = h.read_event()
    assert last["done"] is True
    assert last["waiting_for"] == []
    assert last["vm"] == first["vm"]
    assert h.join() == 0
    with selectors.DefaultSelector() as selector:  # nothing more was written
        selector.register(h.out_r, selectors.EVENT_READ)
        assert selector.select(0.05) == []


def test_commands_are_answered_in_order(harnesses: list[Harness]) -> None:
    h = start(harnesses, session("config"))
    h.read_event()
    h.send(b'{"type":"update_fields","params":{"fields":{"language":"zh"}}}')
    assert h.read_event()["vm"]["dirty"] is True
    h.send(b'{"type":"nope"}')
    rejected = h.read_event()
    assert rejected["error"] == 'command "nope" not allowed in state editing'
    h.send(b'{"type":"save"}')
    saved = h.read_event()
    assert saved["done"] is True and saved["vm"]["saved"] is True
    assert h.join() == 0


def test_regular_file_stdin_works(harnesses: list[Harness], tmp_path: Path) -> None:
    script = tmp_path / "commands.jsonl"
    script.write_bytes(
        b"\n".join(
            [
                b'{"type":"update_fields","params":{"fields":{"max_retries":"7"}}}',
                b"",
                b'{"type":"reload_llm"}',
                b'{"type":"save"}',
            ]
        )
        + b"\n"
    )
    with script.open("rb") as stdin:
        h = start(harnesses, session("config"), stdin=stdin)
        events = [h.read_event() for _ in range(4)]
        assert h.join() == 0
    assert [e["done"] for e in events] == [False, False, False, True]
    assert events[1]["vm"]["fields"][4]["value"] == "7"
    assert events[-1]["vm"]["saved"] is True


def test_regular_file_stdin_that_ends_early_leaves_the_session_waiting(
    harnesses: list[Harness], tmp_path: Path
) -> None:
    script = tmp_path / "commands.jsonl"
    script.write_bytes(b'{"type":"update_fields","params":{"fields":{"language":"fr"}}}\n')
    with script.open("rb") as stdin:
        h = start(harnesses, session("config"), stdin=stdin)
        events = [h.read_event() for _ in range(2)]
        time.sleep(0.1)
        assert h.thread.is_alive()  # the file ended; the session waits for an answer
        h.runner.terminate()
        events.append(h.read_event())
        assert h.join() == 0
    assert events[-1]["done"] is True
    assert events[-1]["vm"]["saved"] is False
    assert events[-1]["vm"] == events[-2]["vm"]


def test_timers_fire_in_real_time_at_a_small_speed(harnesses: list[Harness]) -> None:
    sess = session("update", speed=0.1)
    h = start(harnesses, sess)
    assert h.read_event()["vm"]["state"] == "checking"
    # No input at all: the check timer alone moves the session on.
    offer = h.read_event()
    assert offer["vm"]["state"] == "has_update"
    assert 0.03 - 1e-9 <= sess.now <= 0.06 + 1e-9  # the check delay (0.3-0.6 s) x 0.1
    h.send(b'{"type":"download"}')
    states = []
    while True:
        event = h.read_event()
        states.append(event["vm"]["state"])
        if event["vm"]["state"] != "downloading":
            break
    assert states[-1] == "confirm_restart"
    assert len(states) >= 10
    h.send(b'{"type":"restart"}')
    assert h.read_event()["done"] is True
    assert h.join() == 0


def test_reader_gone_is_a_quiet_return(harnesses: list[Harness]) -> None:
    h = start(harnesses, session("config"))
    h.read_event()
    os.close(h.out_r)
    h.send(b'{"type":"reload_llm"}')
    assert h.join() == 0  # no exception escaped the runner


def test_signal_handlers_are_left_alone_off_the_main_thread(harnesses: list[Harness]) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    h = start(harnesses, session("config"))
    h.read_event()
    assert {s: signal.getsignal(s) for s in before} == before
    h.runner.terminate()
    assert h.read_event()["done"] is True
    assert h.join() == 0


# -- the fd helpers and the endpoint ---------------------------------------------------


def through_a_pipe(data: bytes, *, blocking: bool, read_after: float) -> bytes:
    """What a reader gets of ``data`` written with :func:`write_all` into a pipe whose
    write end is (non-)blocking, reading only after ``read_after`` seconds."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, blocking)
    chunks: list[bytes] = []

    def drain() -> None:
        time.sleep(read_after)
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)  # a failure hangs no run
    reader.start()
    write_all(write_end, data)
    os.close(write_end)
    reader.join(5)
    os.close(read_end)
    return b"".join(chunks)


def test_write_all_writes_more_than_a_pipe_holds_at_once() -> None:
    data = os.urandom(1 << 20)
    assert through_a_pipe(data, blocking=True, read_after=0) == data


def test_write_all_waits_for_a_slow_reader_of_a_non_blocking_pipe() -> None:
    # A parent may share its own non-blocking pipe (Node does): a full pipe is the
    # reader's pace, as for zread, not an error. The reader comes once the pipe is full.
    data = os.urandom(1 << 20)
    assert through_a_pipe(data, blocking=False, read_after=0.2) == data


def test_a_stdout_that_cannot_be_written_is_named() -> None:
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError, match="No space left") as caught:
            ProcessEndpoint(full, err_fd=full).write(b"{}\n")
    finally:
        os.close(full)
    assert (caught.value.filename, caught.value.strerror) == ("stdout", os.strerror(28))


def test_write_line_adds_the_newline_and_never_raises() -> None:
    read_end, write_end = os.pipe()
    write_line(write_end, "zread-sim: één")
    assert os.read(read_end, 100) == "zread-sim: één\n".encode()
    os.close(read_end)
    write_line(write_end, "nobody reads this")  # EPIPE: swallowed
    os.close(write_end)
    write_line(write_end, "closed fd")  # EBADF: swallowed


def test_point_at_devnull_ends_the_readers_stream(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    point_at_devnull(write_end)
    os.write(write_end, b"gone")  # goes to /dev/null
    os.close(write_end)
    assert os.read(read_end, 10) == b""
    os.close(read_end)


def test_the_endpoint_says_when_the_reader_went_away() -> None:
    read_end, write_end = os.pipe()
    endpoint = ProcessEndpoint(write_end, err_fd=write_end)
    assert endpoint.write(b"one\n") is True
    assert os.read(read_end, 10) == b"one\n"
    os.close(read_end)
    assert endpoint.write(b"two\n") is False
    assert endpoint.gone
    assert endpoint.write(b"three\n") is False  # not tried again
    os.close(write_end)


def test_the_endpoint_writes_stderr_lines_and_closes_its_stdout() -> None:
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    endpoint = ProcessEndpoint(out_write, err_write)
    endpoint.stderr("a diagnostic")
    assert os.read(err_read, 100) == b"a diagnostic\n"
    endpoint.close_stdout()
    assert os.read(out_read, 10) == b""  # the reader sees the end
    assert endpoint.write(b"vanishes\n") is True  # into /dev/null, not an error
    for fd in (out_read, out_write, err_read, err_write):
        os.close(fd)


# -- the flow of one line ------------------------------------------------------------

STAGES = {
    "simulator.runners.stdio": "runner",
    "simulator.runners.live": "runner",
    "simulator.core.lines": "lines",
    "simulator.core.session": "session",
    "simulator.runners.output": "output",
}
"""Where a line may go between stdin and stdout, and the stage each module is."""


def test_one_line_crosses_five_modules_and_nothing_calls_back_into_the_session() -> None:
    """Trace every call the process runner makes between reading a command and writing
    its event. What the session consults to decide (envelope, chart, the chart's model,
    timing) and what the output stage consults (fault plan, framing) count as part of
    that stage; every other module the line passes through is named."""
    session = Session(load_chart("generate"), load_scenario("default"))
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    calls: list[tuple[str, str, str]] = []  # (module, function, caller's stage)
    tracing = threading.Event()
    stage_of_frame: dict[int, str] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not tracing.is_set():
            return
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back
        outer = stage_of_frame.get(id(caller), "") if caller is not None else ""
        ours = module.startswith(("simulator", "statecharts"))
        if outer in ("session", "output") or not ours:
            stage_of_frame[id(frame)] = outer  # a library call belongs to its caller's stage
        else:
            stage_of_frame[id(frame)] = STAGES.get(module, module)
        if ours:
            calls.append((module, frame.f_code.co_name, outer))

    def serve() -> None:
        threading.setprofile(None)
        import sys

        sys.setprofile(profile)
        with open(in_r, "rb", buffering=0) as stdin, open(out_w, "wb", buffering=0) as stdout:
            ProcessRunner(session, stdin, stdout).run()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    first = os.read(out_r, 1 << 16)
    assert json.loads(first)["vm"]["state"] == "select_action"
    tracing.set()
    os.write(in_w, b'{"type":"select_action","params":{"action":"generate"}}\n')
    answer = os.read(out_r, 1 << 16)
    tracing.clear()
    os.write(in_w, b'{"type":"quit"}\n')  # the end of input is not quit: say it
    os.close(in_w)
    while os.read(out_r, 1 << 16):  # to the end of the run's output
        pass
    thread.join(5)
    assert not thread.is_alive()
    os.close(out_r)
    assert json.loads(answer.splitlines()[0])["vm"]["state"] == "running"

    stops = {
        STAGES.get(module, module)
        for module, _, outer in calls
        if outer not in ("session", "output")
    }
    modules = {module for module, _, outer in calls if outer not in ("session", "output")}
    assert modules <= set(STAGES), modules
    assert len(modules) <= 5 and stops == {"runner", "lines", "session", "output"}
    # The output stage never calls into the session; the runner asks it only when
    # its next timer is due (and which timers were armed before this tick), or hands
    # it new input.
    assert not [c for c in calls if c[0] == "simulator.core.session" and c[2] == "output"]
    asked = {
        name
        for module, name, outer in calls
        if module == "simulator.core.session" and outer == "runner"
    }
    timers = {"advance", "step", "next_deadline", "next_timer", "armed", "speed", "idle_until"}
    assert asked <= {"feed", "__init__"} | timers, asked
