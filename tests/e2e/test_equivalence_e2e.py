"""Virtual time gives the same event sequence as the process at speed 0.

For every built-in scenario and every command, one reactive reference client (it
answers gates and nothing else, right after reading the event that opens one) talks to
a real ``python -m simulator CMD --stdio --speed 0 --scenario NAME --seed 7`` process
and to ``simulator.runners.virtual.start(CMD, scenario=NAME, seed=7, speed=0)``. At a gate no
timer is pending, so the point where the answer lands is the same in both runs, and the
event bytes must be identical (browse's ephemeral port aside).

Transport faults are the process runner's alone: a scenario whose ``[[faults]]`` end the
stream (``exit``, ``hang``) yields a prefix of the virtual events, one that adds noise
(``diagnostic``, ``stderr``) yields the same events between its noise.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from simulator.runners.virtual import start
from simulator.scenario import Scenario, builtin_names, load_scenario
from simulator.tools.client import ReferenceClient

COMMANDS: list[tuple[str, ...]] = [
    ("generate",),
    ("generate", "-y"),
    ("browse",),
    ("config",),
    ("login",),
    ("update",),
    ("version",),
]
SEED = 7
QUIET = 0.3
"""How long a hung process must stay silent before the client stops reading (at speed 0
one that is not hung writes its next event within milliseconds)."""
TIMEOUT = 15.0
"""How long any other process may take for its next byte (speed 0: normally ms)."""

STREAM_ENDING = {"exit", "hang"}
NOISE = {"diagnostic", "stderr"}
_PORT = re.compile(rb'"url":"http://127\.0\.0\.1:\d+')


def normalise(line: bytes) -> bytes:
    """The line with browse's ephemeral port taken out."""
    return _PORT.sub(b'"url":"http://127.0.0.1:PORT', line)


# -- the two runs ------------------------------------------------------------------------


def virtual_run(argv: tuple[str, ...], scenario: str, seed: int | None) -> list[bytes]:
    """The event lines of the in-process session, driven by the reference client."""
    kwargs: dict[str, Any] = {} if seed is None else {"seed": seed}
    client = ReferenceClient()
    with start(*argv, scenario=scenario, speed=0, ignore_faults=True, **kwargs) as session:
        while True:
            event = session.wait_for(lambda _: True)
            line = client.answer(event)
            if line is not None:
                session.send_line(line.rstrip(b"\n"))
            if event["done"]:
                break
        assert not session.violations, [str(v) for v in session.violations]
        assert session.now == 0.0
        return [normalise(t.data) for t in session.transcript if t.direction == "out"]


@dataclass
class ProcessRun:
    stdout: bytes
    """Everything read from stdout (normalised)."""
    events: list[bytes]
    """The complete JSON event lines, in order (normalised)."""
    returncode: int | None
    """None: still running when the client gave up (a hang)."""


def process_run(
    argv: tuple[str, ...], scenario: str, seed: int | None, *, hang_after: int = 0
) -> ProcessRun:
    """Run the real process with the reference client; what it wrote.

    With ``hang_after``, the client stops reading once that many events came and
    nothing more follows for ``QUIET`` seconds (the process hangs; it is killed).
    """
    cmd = [sys.executable, "-m", "simulator", *argv, "--stdio", "--speed", "0"]
    cmd += ["--scenario", scenario]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    env["ZREAD_SIM_FILES"] = "0"  # the protocol alone: virtual time writes no files either
    popen = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert popen.stdin is not None and popen.stdout is not None
    fd = popen.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    client = ReferenceClient()
    buffer = bytearray()
    stdout = bytearray()
    events: list[bytes] = []
    try:
        while True:
            hung = bool(hang_after) and len(events) >= hang_after
            if not selector.select(QUIET if hung else TIMEOUT):
                if hung:
                    break
                raise AssertionError(f"{cmd}: no byte within {TIMEOUT} s after {events[-1:]}")
            data = os.read(fd, 1 << 16)
            if not data:
                break
            stdout += data
            buffer += data
            while b"\n" in buffer:
                end = buffer.index(b"\n") + 1
                line = bytes(buffer[:end])
                del buffer[:end]
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # noise on stdout, not an event
                if not isinstance(event, dict) or "vm" not in event:
                    continue
                events.append(normalise(line))
                answer = client.answer(event)
                if answer is not None and not popen.stdin.closed:
                    try:
                        popen.stdin.write(answer)
                        popen.stdin.flush()
                    except BrokenPipeError:
                        pass
        try:
            returncode: int | None = popen.wait(0.2 if hang_after else TIMEOUT)
        except subprocess.TimeoutExpired:
            returncode = None
        return ProcessRun(normalise(bytes(stdout)), events, returncode)
    finally:
        selector.close()
        if popen.poll() is None:
            popen.kill()
        popen.wait(5)
        for stream in (popen.stdin, popen.stdout):
            with contextlib.suppress(OSError):
                stream.close()


# -- what the process must have written --------------------------------------------------


def stream_end(scenario: Scenario) -> tuple[int, int, int | None] | None:
    """(n, events kept, exit code or None for a hang) of the fault that ends the stream."""
    ends = [f for f in scenario.faults if f.kind in STREAM_ENDING]
    if not ends:
        return None
    (fault,) = ends
    assert fault.after_event and fault.probability == 1.0, "only a fixed point is handled here"
    if fault.kind == "hang":
        return fault.after_event, fault.after_event, None
    kept = fault.after_event - 1 if fault.mid_line else fault.after_event
    return fault.after_event, kept, fault.code


def mismatch(
    argv: tuple[str, ...], scenario: Scenario, virtual: list[bytes], run: ProcessRun
) -> str | None:
    """Why the process run does not match the virtual one, or None."""
    kinds = {f.kind for f in scenario.faults}
    unhandled = kinds - STREAM_ENDING - NOISE
    if unhandled:
        return f"faults {sorted(unhandled)} change event lines; teach this test about them"
    expected, returncode = virtual, 0
    end = stream_end(scenario)
    if end is not None and len(virtual) >= end[0]:
        expected, returncode = virtual[: end[1]], end[2]
    if run.events != expected:
        for i, (got, want) in enumerate(zip(run.events, expected, strict=False)):
            if got != want:
                return f"{' '.join(argv)}: event {i} differs:\n process {got!r}\n virtual {want!r}"
        return (
            f"{' '.join(argv)}: {len(run.events)} process events, {len(expected)} expected; "
            f"last process {run.events[-1:]!r}"
        )
    if run.returncode != returncode:
        return f"{' '.join(argv)}: exit {run.returncode}, expected {returncode}"
    if not kinds and run.stdout != b"".join(virtual):
        return f"{' '.join(argv)}: stdout holds more than the events: {run.stdout[-200:]!r}"
    return None


def compare(scenario_name: str, commands: list[tuple[str, ...]], seed: int | None) -> None:
    scenario = load_scenario(scenario_name)
    hangs = [f.after_event for f in scenario.faults if f.kind == "hang"]
    hang_after = hangs[0] if hangs else 0
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = [
            pool.submit(process_run, argv, scenario_name, seed, hang_after=hang_after)
            for argv in commands
        ]
        virtuals = [virtual_run(argv, scenario_name, seed) for argv in commands]
        problems = [
            problem
            for argv, virtual, run in zip(commands, virtuals, runs, strict=True)
            if (problem := mismatch(argv, scenario, virtual, run.result())) is not None
        ]
    assert not problems, f"scenario {scenario_name}:\n" + "\n".join(problems)


# -- the tests ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scenario", builtin_names())
def test_virtual_time_gives_the_events_of_the_process_at_speed_0(scenario: str) -> None:
    compare(scenario, COMMANDS, SEED)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scenario", ["default", "flaky-pages", "failing-pages"])
def test_the_default_seed_is_the_same_in_both(scenario: str) -> None:
    # No --seed for the process, no seed= for start(): both must mean seed 0.
    compare(scenario, [("generate",), ("generate", "-y")], None)
    assert virtual_run(("generate", "-y"), scenario, None) == virtual_run(
        ("generate", "-y"), scenario, 0
    )


def test_the_comparison_can_fail() -> None:
    # Guard against a vacuous pass: other seeds give other bytes, and the check sees it.
    started = time.monotonic()
    scenario = load_scenario("flaky-pages")
    virtual = virtual_run(("generate", "-y"), "flaky-pages", SEED)
    other = process_run(("generate", "-y"), "flaky-pages", SEED + 1)
    assert mismatch(("generate", "-y"), scenario, virtual, other) is not None
    same = process_run(("generate", "-y"), "flaky-pages", SEED)
    assert mismatch(("generate", "-y"), scenario, virtual, same) is None
    assert time.monotonic() - started < 30
