"""``generate --stdio`` end to end: real processes, real pipes, raw bytes.

The reader is local to this file (a selector on the stdout fd with a timeout), so a
missing event fails the test instead of hanging it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import NOBODY_ANSWERS, Proc

KEYS = ["vm", "waiting_for", "done", "error"]
SELECT = ["select_action", "cancel", "quit"]
RUNNING = ["quit", "cancel"]
CATALOG_GATE = ["quit", "retry_catalog"]
RETRY_GATE = ["quit", "retry", "skip_all"]
PAGES = 16
MAX_CONCURRENT = 4
ROOT = Path(__file__).resolve().parents[2]
GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}

Event = dict[str, Any]


def go_json(obj: Any) -> bytes:
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for char, escape in GO_ESCAPES.items():
        text = text.replace(char, escape)
    return text.replace("\u2029", "\\u2029").encode()


def has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(has_float(v) for v in value)
    return False


def check_line(raw: bytes) -> Event:
    """One stdout line: compact JSON as Go writes it, one newline, keys in order."""
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1, raw
    event = json.loads(raw)
    assert isinstance(event, dict)
    assert list(event) == KEYS, raw
    assert raw == go_json(event) + b"\n", raw
    assert not has_float(event), raw
    assert not re.search(rb"\d\.0[,}\]]", raw), raw
    assert isinstance(event["waiting_for"], list)
    assert isinstance(event["error"], str)
    if event["done"]:
        assert event["waiting_for"] == [], raw
    return event


class Generate:
    """``python -m simulator generate --stdio`` on pipes; always killed on exit."""

    def __init__(self, *args: str, speed: float = 0, scenario: str = "default") -> None:
        argv = [sys.executable, "-m", "simulator", "generate", "--stdio"]
        argv += ["--speed", str(speed), "--scenario", scenario, *args]
        env = {
            k: v
            for k, v in os.environ.items()
            if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
        }
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.popen.stdout is not None
        self._fd = self.popen.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = b""
        self.raw: list[bytes] = []
        self.events: list[Event] = []

    def __enter__(self) -> Generate:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=5)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._selector.close()

    def _fill(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._selector.select(remaining):
            raise AssertionError(f"no event in time; {len(self.raw)} so far: {self.raw[-1:]!r}")
        data = os.read(self._fd, 1 << 16)
        self._buffer += data
        return bool(data)

    def read(self, timeout: float = 5.0) -> Event:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if not self._fill(deadline):
                raise AssertionError(f"stdout closed; unterminated {self._buffer[:200]!r}")
        line, _, self._buffer = self._buffer.partition(b"\n")
        raw = line + b"\n"
        event = check_line(raw)
        self.raw.append(raw)
        self.events.append(event)
        return event

    @property
    def last(self) -> Event:
        return self.events[-1]

    def until(self, predicate: Any, timeout: float = 5.0) -> Event:
        deadline = time.monotonic() + timeout
        if self.events and predicate(self.last):
            return self.last
        while True:
            event = self.read(max(0.01, deadline - time.monotonic()))
            if predicate(event) or event["done"]:
                return event

    def until_done(self, timeout: float = 5.0) -> Event:
        event = self.until(lambda e: e["done"], timeout)
        assert event["done"]
        return event

    def send(self, type_: str, **params: Any) -> None:
        self.write(json.dumps({"type": type_, "params": params}).encode() + b"\n")

    def write(self, data: bytes) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(data)
        self.popen.stdin.flush()

    def close_stdin(self) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.close()

    def ends_cleanly(self) -> None:
        """After done: one done event, last; nothing more on stdout; exit code 0."""
        assert [e["done"] for e in self.events] == [False] * (len(self.events) - 1) + [True]
        rest = self._buffer
        deadline = time.monotonic() + 3.0
        while self._fill(deadline):
            rest = self._buffer
        assert rest == b"", rest
        assert self.popen.wait(timeout=3) == 0


def running(event: Event) -> int:
    return sum(t["state"] == "running" for t in event["vm"]["pages"]["tasks"])


def check_run(proc: Generate) -> None:
    """Whole-run invariants over the events read."""
    done = 0
    for event in proc.events:
        pages = event["vm"]["pages"]
        assert pages["done"] >= done
        done = pages["done"]
        assert running(event) <= MAX_CONCURRENT
        if pages["tasks"]:
            assert [t["id"] for t in pages["tasks"]] == list(range(1, PAGES + 1))


def test_select_action_generate_runs_to_done() -> None:
    with Generate() as proc:
        first = proc.read()
        assert first["vm"]["state"] == "select_action"
        assert first["waiting_for"] == SELECT
        assert first["vm"]["select_action"]["scenario"] == "has_wiki"
        assert first["vm"]["select_action"]["next_action"] == "browse"
        assert first["vm"]["select_action"]["wiki_date"]
        proc.send("select_action", action="generate")
        answer = proc.read()
        assert answer["error"] == ""
        assert answer["vm"]["state"] == "running"
        assert answer["waiting_for"] == RUNNING
        final = proc.until_done()
        assert final["vm"]["state"] == "done"
        assert final["vm"]["done_total"] == PAGES
        assert final["vm"]["pages"]["done"] == PAGES
        statuses = [e["vm"]["catalog"]["status"] for e in proc.events]
        assert statuses[0] == "idle"
        assert "running" in statuses
        assert statuses[-1] == "done"
        check_run(proc)
        proc.ends_cleanly()


@pytest.mark.parametrize("flag", ["-y", "--yes"])
def test_yes_needs_no_input(flag: str) -> None:
    with Generate(flag, scenario="empty") as proc:
        first = proc.read()
        assert first["vm"]["state"] == "running"
        assert first["vm"]["select_action"]["scenario"] == "empty"
        final = proc.until_done()
        assert final["vm"]["done_total"] == PAGES
        check_run(proc)
        proc.ends_cleanly()


def test_draft_action_resume() -> None:
    with Generate("--draft-action", "resume", scenario="draft") as proc:
        first = proc.read()
        assert first["vm"]["state"] == "running"
        assert first["vm"]["catalog"]["status"] == "resumed"
        tasks = first["vm"]["pages"]["tasks"]
        assert [t["state"] for t in tasks[:6]] == ["resumed"] * 6
        assert first["vm"]["pages"]["done"] == 6
        final = proc.until_done()
        assert final["vm"]["done_total"] == PAGES
        assert [t["state"] for t in final["vm"]["pages"]["tasks"][:6]] == ["resumed"] * 6
        check_run(proc)
        proc.ends_cleanly()


def test_draft_action_cancel_is_one_done_event() -> None:
    with Generate("--draft-action", "cancel", scenario="draft") as proc:
        event = proc.read()
        assert event["done"] is True
        assert event["vm"]["state"] == "done"
        assert event["vm"]["done_total"] == 0
        proc.ends_cleanly()


def test_failing_pages_with_retry_commands() -> None:
    with Generate("-y", scenario="failing-pages") as proc:
        gate = proc.until(lambda e: e["vm"]["pages"]["waiting_retry"])
        assert gate["waiting_for"] == RETRY_GATE
        failed = {t["id"]: t["error"] for t in gate["vm"]["pages"]["tasks"] if t["error"]}
        assert failed == {
            3: "page: the model returned 502 Bad Gateway",
            7: "page: context length exceeded",
        }
        # A task that did not fail: rejected, the vm and waiting_for repeated byte for byte.
        previous = proc.raw[-1]
        proc.send("retry", task_id=1)
        rejected = proc.read()
        assert rejected["error"].startswith("invalid params: ")
        assert rejected["done"] is False
        assert (
            proc.raw[-1][: proc.raw[-1].rindex(b',"done":')]
            == (previous[: previous.rindex(b',"done":')])
        )
        proc.send("retry", task_id=3)
        answer = proc.read()
        assert answer["error"] == ""
        assert answer["waiting_for"] == RUNNING
        assert answer["vm"]["pages"]["waiting_retry"] is False
        gate = proc.until(lambda e: e["vm"]["pages"]["waiting_retry"])
        assert gate["waiting_for"] == RETRY_GATE
        states = {t["id"]: t["state"] for t in gate["vm"]["pages"]["tasks"]}
        assert (states[3], states[7]) == ("done", "failed")
        proc.send("retry", task_id=7)
        final = proc.until_done()
        assert final["vm"]["state"] == "done"
        assert final["vm"]["done_total"] == PAGES
        check_run(proc)
        proc.ends_cleanly()


def test_catalog_error_with_retry_catalog() -> None:
    with Generate("-y", scenario="catalog-error") as proc:
        gate = proc.until(lambda e: e["vm"]["catalog"]["status"] == "error")
        assert gate["waiting_for"] == CATALOG_GATE
        assert gate["vm"]["catalog"]["auto_retry"] == 2  # the retries, not the attempts
        assert gate["vm"]["catalog"]["error"] == "catalog: the model returned no JSON"
        proc.send("retry_catalog")
        answer = proc.read()
        assert answer["error"] == ""
        assert answer["vm"]["catalog"]["status"] == "running"
        final = proc.until_done()
        assert final["vm"]["done_total"] == PAGES
        check_run(proc)
        proc.ends_cleanly()


def test_skip_failed_ends_by_itself() -> None:
    with Generate("-y", "--skip-failed", scenario="failing-pages") as proc:
        final = proc.until_done()
        assert final["vm"]["state"] == "done"
        assert final["vm"]["done_total"] == PAGES - 2
        # The driver skips by itself: no event offers a gate nobody would take.
        for event in proc.events:
            assert not {"retry", "skip_all"} & set(event["waiting_for"]), event
            assert event["vm"]["pages"]["waiting_retry"] is False, event
        assert [t["state"] for t in final["vm"]["pages"]["tasks"]].count("failed") == 2
        check_run(proc)
        proc.ends_cleanly()


def test_skip_all_at_the_gate() -> None:
    with Generate("-y", scenario="failing-pages") as proc:
        proc.until(lambda e: e["vm"]["pages"]["waiting_retry"])
        proc.send("skip_all")
        final = proc.read()
        assert final["done"] is True
        assert final["vm"]["done_total"] == PAGES - 2
        proc.ends_cleanly()


def test_cancel_mid_run() -> None:
    with Generate("-y", speed=0.1) as proc:
        before = proc.until(lambda e: e["vm"]["pages"]["tasks"] and running(e) > 0)
        assert not before["done"]
        proc.send("cancel")
        final = proc.until_done()
        assert final["vm"]["state"] == "done"
        assert final["vm"]["done_total"] == proc.events[-2]["vm"]["pages"]["done"]
        assert final["vm"]["done_total"] < PAGES
        proc.ends_cleanly()


def test_end_of_stdin_mid_run_is_not_quit_the_run_goes_on_to_done() -> None:
    with Proc("generate", "-y", speed=0.1) as proc:
        proc.read_until(lambda e: e["vm"]["catalog"]["tool_name"] != "")
        proc.close_stdin()
        final = proc.read_until_done(timeout=30)
        assert final["vm"]["state"] == "done"
        assert final["vm"]["done_total"] == 16
        assert final["error"] == ""
        proc.finish()
        assert NOBODY_ANSWERS not in proc.stderr  # it never had to wait for an answer


def test_a_null_stdin_runs_a_whole_generate() -> None:
    """What a desktop hub does: ``generate --stdio --yes`` with stdin set to null."""
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "generate", "--stdio", "--yes", "--speed", "0"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["done"] is True and last["vm"]["state"] == "done"


def test_end_of_stdin_at_the_gate_waits_until_a_signal() -> None:
    with Proc("generate") as proc:
        first = proc.read_event()
        proc.close_stdin()
        assert "waiting for select_action, cancel, quit" in proc.wait_stderr(NOBODY_ANSWERS)
        proc.assert_waiting()
        proc.terminate()
        final = proc.read_event()
        assert final["done"] is True
        assert final["vm"] == first["vm"]
        proc.finish()


def test_quit_at_the_retry_gate() -> None:
    with Generate("-y", scenario="failing-pages") as proc:
        gate = proc.until(lambda e: e["vm"]["pages"]["waiting_retry"])
        proc.send("quit")
        final = proc.read()
        assert final["done"] is True
        assert final["waiting_for"] == []
        assert final["vm"] == gate["vm"]
        proc.ends_cleanly()


def test_rejected_lines_over_the_pipe() -> None:
    with Generate(scenario="empty") as proc:
        proc.read()
        proc.write(b"not json\n\n")
        bad = proc.read()
        assert bad["error"].startswith("invalid JSON: ")
        proc.send("select_action", action="browse")
        bad = proc.read()
        assert bad["error"].startswith("invalid params: ")
        proc.send("retry", task_id=1)
        bad = proc.read()
        assert bad["error"] == 'command "retry" not allowed in state select_action'
        assert len({raw[: raw.rindex(b',"done":')] for raw in proc.raw}) == 1
        proc.send("cancel")
        final = proc.read()
        assert final["done"] is True
        assert final["vm"]["state"] == "done"
        proc.ends_cleanly()


def test_whole_run_bytes_at_a_real_speed() -> None:
    # Speed 0.05 of ~7 s: timers on the real clock, events written as they happen.
    with Generate("-y", "--seed", "3", speed=0.05, scenario="flaky-pages") as proc:
        final = proc.until_done(timeout=10)
        assert final["vm"]["done_total"] == PAGES
        assert len(proc.events) > PAGES
        check_run(proc)
        proc.ends_cleanly()


def test_a_non_blocking_stdout_is_written_at_its_readers_pace(tmp_path: Path) -> None:
    # A parent may hand zread its own non-blocking pipe (Node does). Here the pipe
    # fills (50 pages: far more than a pipe holds) long before anyone reads it.
    scenario = tmp_path / "pages.toml"
    scenario.write_text('extends = "default"\n[world.project]\npages = 50\n')
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    argv = [sys.executable, "-m", "simulator", "generate", "--stdio", "-y", "--speed", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    proc = subprocess.Popen(
        [*argv, "--no-files", "--scenario", str(scenario)],
        stdin=subprocess.DEVNULL,
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(write_end)
    try:
        time.sleep(0.5)
        with os.fdopen(read_end, "rb") as reader:
            lines = reader.read().splitlines()
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None and proc.stderr.read() == b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
    assert sum(len(line) for line in lines) > 1 << 16
    assert json.loads(lines[-1])["done"] is True
