"""Tests for simulator.runners.pipes: a session behind real OS pipes, in this process.

The client side here uses nothing but the file objects and asyncio streams it is given,
as it would with ``subprocess.Popen`` or ``asyncio.create_subprocess_exec``; the bytes
are compared with those of a real ``python -m simulator`` process.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from simulator.runners.pipes import AsyncPipeProcess, FilePipeProcess, spawn, spawn_async

pytestmark = pytest.mark.timeout(30)

SELECT_GENERATE = b'{"type":"select_action","params":{"action":"generate"}}\n'


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def gate_answer(event: dict[str, Any]) -> bytes | None:
    """What a well-behaved client answers to ``event`` (None: wait for the next one)."""
    if event["done"]:
        return None
    vm, waiting_for = event["vm"], event["waiting_for"]
    if "select_action" in waiting_for:
        action = "resume" if vm["select_action"]["scenario"] == "has_draft" else "generate"
        return encode({"type": "select_action", "params": {"action": action}})
    if "retry" in waiting_for:
        failed = [t["id"] for t in vm["pages"]["tasks"] if t["state"] == "failed"]
        return encode({"type": "retry", "params": {"task_id": failed[0]}})
    if "retry_catalog" in waiting_for:
        return encode({"type": "retry_catalog"})
    if "select_version" in waiting_for:
        return encode({"type": "select_version", "params": {"current": True}})
    if vm.get("state") == "serving":
        return encode({"type": "quit"})
    if "select_region" in waiting_for:
        return encode({"type": "select_region", "params": {"region": "global"}})
    if "select_model" in waiting_for:
        return encode({"type": "select_model", "params": {"model": vm["avail_models"][-1]}})
    if "download" in waiting_for:
        return encode({"type": "download"})
    if "restart" in waiting_for:
        return encode({"type": "restart"})
    if "update_fields" in waiting_for:
        return encode({"type": "save"})
    return None


def converse(readline: Callable[[], bytes], write: Callable[[bytes], None]) -> list[bytes]:
    """Read events, answering each gate; every line until the done event."""
    lines = []
    while True:
        line = readline()
        assert line.endswith(b"\n"), (line, lines[-1:])
        lines.append(line)
        event = json.loads(line)
        answer = gate_answer(event)
        if answer is not None:
            write(answer)
        if event["done"]:
            return lines


def converse_with(process: FilePipeProcess | subprocess.Popen[bytes]) -> bytes:
    """Talk to ``process`` until done, close its stdin, return its whole stdout."""
    assert process.stdin is not None and process.stdout is not None
    stdin = process.stdin

    def write(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    lines = converse(process.stdout.readline, write)
    stdin.close()
    rest = process.stdout.read()
    return b"".join(lines) + rest


def run_process(argv: list[str], scenario: str, seed: int, input: bytes | None) -> bytes:
    """``python -m simulator`` itself; its whole stdout (input None: converse)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    cmd = [sys.executable, "-m", "simulator", *argv, "--stdio", "--speed", "0"]
    cmd += ["--scenario", scenario, "--seed", str(seed)]
    if input is not None:
        done = subprocess.run(cmd, input=input, capture_output=True, env=env, timeout=20)
        assert done.returncode == 0, done.stderr
        return done.stdout
    with subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    ) as popen:
        out = converse_with(popen)
        assert popen.wait(20) == 0
    return out


def run_spawn(argv: list[str], scenario: str, seed: int, input: bytes | None) -> bytes:
    with spawn(*argv, scenario=scenario, seed=seed, speed=0) as process:
        if input is None:
            out = converse_with(process)
        else:
            process.stdin.write(input)
            process.stdin.close()
            out = process.stdout.read()
        assert process.wait(10) == 0
    return out


def events_of(stdout: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


# -- spawn -------------------------------------------------------------------------------


def test_spawn_gives_event_lines_and_takes_commands() -> None:
    with spawn("generate", speed=0) as process:
        first = process.stdout.readline()
        event = json.loads(first)
        assert first.endswith(b"\n") and event["vm"]["state"] == "select_action"
        assert event["waiting_for"] == ["select_action", "cancel", "quit"]
        assert process.poll() is None
        process.stdin.write(SELECT_GENERATE)
        process.stdin.flush()
        events = [json.loads(process.stdout.readline())]
        assert events[0]["vm"]["state"] == "running" and events[0]["error"] == ""
        while not events[-1]["done"]:
            events.append(json.loads(process.stdout.readline()))
        assert events[-1]["vm"]["state"] == "done" and events[-1]["vm"]["done_total"] == 16
        assert process.stdout.read() == b""  # nothing after done, and stdout ends
        assert process.wait(5) == 0 and process.returncode == 0


def test_a_scenarios_http_faults_meet_the_browse_server_behind_pipes() -> None:
    import urllib.error
    import urllib.request

    from simulator.scenario import load_scenario

    faulty = load_scenario(
        "faulty", text='extends = "default"\n[[faults.http]]\npath = "/"\nstatus = 500\n'
    )
    with spawn("browse", "--port", "0", scenario=faulty, speed=0) as process:
        event: dict[str, Any] = {}
        while event.get("vm", {}).get("state") != "serving":
            event = json.loads(process.stdout.readline())
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(event["vm"]["url"] + "/", timeout=5)
        assert failed.value.code == 500
        process.terminate()


def test_a_rejected_command_gets_its_one_answer_through_the_pipe() -> None:
    with spawn("config", speed=0) as process:
        first = process.stdout.readline()
        process.stdin.write(b'{"type":"download"}\n')
        process.stdin.flush()
        rejected = process.stdout.readline()
        assert json.loads(rejected)["error"] == 'command "download" not allowed in state editing'
        assert rejected.rsplit(b',"done":', 1)[0] == first.rsplit(b',"done":', 1)[0]


def test_closing_stdin_is_not_quit_terminate_is() -> None:
    process = spawn("generate", "-y", speed=1)
    first = json.loads(process.stdout.readline())
    assert first["vm"]["state"] == "running"
    process.stdin.close()
    second = json.loads(process.stdout.readline())  # the run goes on
    assert second["done"] is False and process.poll() is None
    process.terminate()
    events = events_of(process.stdout.read())
    assert events and events[-1]["done"] is True and events[-1]["waiting_for"] == []
    assert events[-1]["vm"]["state"] == "running"  # quit: the vm as it stood
    assert events[-1]["vm"]["done_total"] < 16
    assert process.wait(5) == 0
    process.close()
    assert process.stdout.closed and process.stdin.closed


def test_close_before_done_quits_and_releases_both_ends() -> None:
    process = spawn("login", speed=0)
    assert json.loads(process.stdout.readline())["vm"]["state"] == "select_region"
    process.close()
    assert process.returncode == 0 and process.poll() == 0
    assert process.stdin.closed and process.stdout.closed


# -- spawn_async -------------------------------------------------------------------------


def run_async(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), 20))


async def read_event(process: AsyncPipeProcess) -> dict[str, Any]:
    line = await process.stdout.readline()
    assert line.endswith(b"\n"), line
    event: dict[str, Any] = json.loads(line)
    return event


def test_spawn_async_reads_events_and_takes_a_command() -> None:
    async def main() -> None:
        process = await spawn_async("generate", speed=0)
        first = await read_event(process)
        assert first["vm"]["state"] == "select_action"
        assert process.returncode is None
        process.stdin.write(SELECT_GENERATE)
        await process.stdin.drain()
        event = await read_event(process)
        assert event["vm"]["state"] == "running"
        while not event["done"]:
            event = await read_event(process)
        assert event["vm"]["done_total"] == 16
        await process.close()
        assert process.returncode == 0
        assert await process.stdout.read() == b""

    run_async(main)


def test_spawn_async_close_quits_with_returncode_0() -> None:
    async def main() -> None:
        process = await spawn_async("update", scenario="default", speed=0)
        event = await read_event(process)
        while "download" not in event["waiting_for"]:
            event = await read_event(process)
        await process.close()
        assert process.returncode == 0
        final = json.loads(await process.stdout.readline())
        assert final["done"] is True and final["vm"]["state"] == "has_update"
        assert await process.stdout.read() == b""
        assert await process.wait() == 0

    run_async(main)


def test_spawn_async_gives_the_same_bytes_as_spawn() -> None:
    async def main() -> bytes:
        process = await spawn_async("generate", "-y", scenario="failing-pages", seed=7, speed=0)
        lines = []
        while True:
            line = await process.stdout.readline()
            lines.append(line)
            event = json.loads(line)
            answer = gate_answer(event)
            if answer is not None:
                process.stdin.write(answer)
                await process.stdin.drain()
            if event["done"]:
                break
        await process.close()
        assert process.returncode == 0
        return b"".join(lines) + await process.stdout.read()

    out = run_async(main)
    assert out == run_spawn(["generate", "-y"], "failing-pages", 7, None)
    assert len(events_of(out)) > 20


# -- the same bytes as the process -------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "scenario", "input"),
    [
        (["generate"], "default", SELECT_GENERATE),
        (["generate"], "draft", b'{"type":"select_action","params":{"action":"resume"}}\n'),
        (["generate", "-y"], "failing-pages", None),
        (["generate"], "catalog-error", None),
        (
            ["config"],
            "default",
            b'{"type":"update_fields","params":{"fields":{"language":"<fr>"}}}\n'
            b'{"type":"bogus"}\nnot json\n\n{"type":"save"}\n',
        ),
        (["login"], "default", None),
        (["update"], "default", None),
        (["update"], "up-to-date", b""),
        (["version"], "default", b""),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_pipes_carry_the_bytes_of_the_real_process(
    argv: list[str], scenario: str, input: bytes | None
) -> None:
    expected = run_process(argv, scenario, 7, input)
    got = run_spawn(argv, scenario, 7, input)
    assert got == expected
    events = events_of(got)
    assert events[-1]["done"] is True and sum(e["done"] for e in events) == 1


def test_browse_over_pipes_matches_the_process_but_for_the_port() -> None:
    port = re.compile(rb"http://127\.0\.0\.1:\d+")
    expected = run_process(["browse"], "versions", 7, None)
    got = run_spawn(["browse"], "versions", 7, None)
    assert port.search(got) and port.search(expected)
    assert port.sub(b"URL", got) == port.sub(b"URL", expected)


def test_close_ends_a_session_stuck_in_a_hang() -> None:
    process = spawn("generate", "-y", scenario="hang", speed=0)
    for _ in range(3):
        assert process.stdout.readline()
    process.close()
    assert process.returncode == -15  # as a process ended by SIGTERM
    assert not process._thread.is_alive()


def test_kill_ends_the_session_at_once_as_sigkill_does() -> None:
    process = spawn("generate", speed=0)
    assert process.stdout.readline()  # waiting at select_action
    process.kill()
    assert process.wait(5) == -9
    assert process.stdout.read() == b""  # no final event: nothing after the kill
    process.close()
