"""``--frame`` / ``ZREAD_SIM_FRAME=1`` end to end: events as clijson chunk lines, the
final event also as a framed document, readable from a stream merged with stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from simulator import clijson

CHUNK = clijson.CHUNK_MARKER.encode()
BEGIN = clijson.BEGIN_MARKER.encode()
END = clijson.END_MARKER.encode()
GENERATE = {"type": "select_action", "params": {"action": "generate"}}


def compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def run(
    command: str,
    *args: str,
    commands: Sequence[Any] = (),
    env: Mapping[str, str] | None = None,
    merged: bool = False,
    scenario: str = "default",
) -> subprocess.CompletedProcess[bytes]:
    """``python -m simulator <command> --stdio --speed 0`` fed ``commands`` at once."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    environ["ZREAD_SIM_FILES"] = "0"  # the bytes on stdout alone, run after run
    environ.update(env or {})
    argv = [sys.executable, "-m", "simulator", command, "--stdio", "--speed", "0"]
    argv += ["--scenario", scenario, *args]
    return subprocess.run(
        argv,
        input=b"".join(compact(c) + b"\n" for c in commands),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        env=environ,
        timeout=30,
    )


_PLAIN: dict[tuple[str, tuple[str, ...], bytes, str], list[bytes]] = {}
"""The runs without framing made so far: a run at speed 0 gives the same events every
time, so each is made once for the module's tests that compare against it."""


def plain_events(
    command: str, *args: str, commands: Sequence[Any] = (), scenario: str = "default"
) -> list[bytes]:
    """The event lines of the same run without framing (newline included)."""
    key = (command, args, b"".join(compact(c) + b"\n" for c in commands), scenario)
    if key not in _PLAIN:
        done = run(command, *args, commands=commands, scenario=scenario)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines(keepends=True)
        _PLAIN[key] = [line for line in lines if line.startswith(b"{")]
    return list(_PLAIN[key])


def check_framed(out: bytes, events: list[bytes]) -> None:
    """``out`` is exactly: one chunk line per event, then the last event framed."""
    lines = out.split(b"\n")
    chunks = lines[: len(events)]
    for chunk, event in zip(chunks, events, strict=True):
        assert chunk.startswith(CHUNK), chunk[:80]
        assert clijson.chunk_payload(chunk) == event[:-1]
    assert lines[len(events) :] == [b"", BEGIN, events[-1][:-1], END, b""]
    assert clijson.extract(out) == events[-1][:-1]
    assert clijson.unmarshal(out) == json.loads(events[-1])


def test_frame_writes_each_event_as_a_chunk_and_the_last_also_framed() -> None:
    events = plain_events("generate", "-y")
    assert len(events) > 20 and json.loads(events[-1])["done"] is True
    framed = run("generate", "-y", "--frame")
    assert framed.returncode == 0 and framed.stderr == b""
    check_framed(framed.stdout, events)


def test_zread_sim_frame_is_the_flag() -> None:
    by_flag = run("generate", "--frame", commands=[GENERATE]).stdout
    by_variable = run("generate", commands=[GENERATE], env={"ZREAD_SIM_FRAME": "1"}).stdout
    assert by_variable == by_flag
    check_framed(by_flag, plain_events("generate", commands=[GENERATE]))
    for off in ("0", "false", ""):
        plain = run("generate", commands=[GENERATE], env={"ZREAD_SIM_FRAME": off}).stdout
        assert CHUNK not in plain and BEGIN not in plain
        assert plain.splitlines(keepends=True) == plain_events("generate", commands=[GENERATE])


def test_a_single_event_command_is_a_chunk_and_a_frame() -> None:
    (event,) = plain_events("version")
    out = run("version", env={"ZREAD_SIM_FRAME": "true"}).stdout
    check_framed(out, [event])
    assert clijson.unmarshal(out)["done"] is True


def test_frame_variable_that_is_not_a_switch_is_refused() -> None:
    done = run("version", env={"ZREAD_SIM_FRAME": "x"})
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr == b"zread-sim: ZREAD_SIM_FRAME: expected 1 or 0 (true/false), got 'x'\n"


def test_noisy_scenario_merged_with_stderr_is_still_readable() -> None:
    """stdout and stderr in one pipe, diagnostics on both: every chunk still reads, and
    unmarshal of the whole buffer is the done event."""
    events = plain_events("generate", "-y", scenario="noisy")
    merged = run("generate", "-y", "--frame", scenario="noisy", merged=True)
    assert merged.returncode == 0
    out = merged.stdout
    payloads = [clijson.chunk_payload(line) for line in out.split(b"\n")]
    chunks = [p for p in payloads if p is not None]
    assert chunks == [event[:-1] for event in events]
    assert all(isinstance(json.loads(chunk), dict) for chunk in chunks)
    noise = [
        line
        for line in out.split(b"\n")
        if line and CHUNK not in line and line not in (BEGIN, END, events[-1][:-1])
    ]
    assert len(noise) >= 5  # the scenario is noisy, on both streams
    done = clijson.unmarshal(out)
    assert done == json.loads(events[-1])
    assert done["done"] is True and done["vm"]["done_total"] == 16


def test_frame_with_control_stdio_frames_events_only() -> None:
    """Control frames stay plain lines; every event is a chunk; the last also framed."""
    snapshot = {"type": "control_request", "request_id": "s1", "request": {"subtype": "snapshot"}}
    bogus = {"type": "control_request", "request_id": "s2", "request": {"subtype": "bogus"}}
    done = run("generate", "--frame", "--control", "stdio", commands=[snapshot, bogus, GENERATE])
    assert done.returncode == 0, done.stderr
    events = plain_events("generate", commands=[GENERATE])
    lines = done.stdout.split(b"\n")
    control = [line for line in lines if line.startswith(b'{"type":"control_response"')]
    assert sorted(json.loads(line)["response"]["request_id"] for line in control) == ["s1", "s2"]
    assert all(CHUNK not in line for line in control)
    rest = b"".join(line + b"\n" for line in lines if line not in control)[:-1]
    check_framed(rest, events)
    assert clijson.unmarshal(done.stdout)["done"] is True


@pytest.mark.parametrize("variable", [False, True])
def test_frame_survives_a_split_fault(variable: bool, tmp_path: Any) -> None:
    """Written in pieces, each chunk line still arrives whole to a line reader."""
    scenario = tmp_path / "split.toml"
    scenario.write_text('[[faults]]\nkind = "split"\npieces = 3\npause = 0.0\n')
    env = {"ZREAD_SIM_FRAME": "1"} if variable else {}
    args = () if variable else ("--frame",)
    out = run("generate", "-y", *args, scenario=str(scenario), env=env).stdout
    check_framed(out, plain_events("generate", "-y"))
