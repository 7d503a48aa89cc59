"""simulator.runners.controlled: the ``--control`` address, and the process loop with a
control peer run in this process on OS pipes (no child process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.launch import build_session
from simulator.runners import controlled
from simulator.runners.admin import SESSION_ENDED
from simulator.runners.controlled import (
    SUN_PATH_MAX,
    ControlAddressError,
    _bind_private,
    parse_address,
)
from simulator.runners.stdio import ProcessEndpoint

GENERATE = b'{"type":"select_action","params":{"action":"generate"}}'


# -- parse_address ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("stdio", ("stdio", "")),
        ("unix:/tmp/x.sock", ("unix", "/tmp/x.sock")),
        ("unix:relative/path", ("unix", "relative/path")),
        ("unix:unix:odd", ("unix", "unix:odd")),
    ],
)
def test_parse_address(value: str, parsed: tuple[str, str]) -> None:
    assert parse_address(value) == parsed


@pytest.mark.parametrize("value", ["", "unix:", "STDIO", "stdio:", "tcp:127.0.0.1:1", "/tmp/x"])
def test_parse_address_refuses(value: str) -> None:
    with pytest.raises(ControlAddressError) as caught:
        parse_address(value)
    assert str(caught.value) == f"--control takes stdio or unix:PATH, got {value!r}"
    assert isinstance(caught.value, ValueError)


def test_a_path_longer_than_a_socket_address_is_refused() -> None:
    fits = "/" + "a" * (SUN_PATH_MAX - 1)
    assert parse_address(f"unix:{fits}") == ("unix", fits)
    longer = fits + "b"
    with pytest.raises(ControlAddressError) as caught:
        parse_address(f"unix:{longer}")
    assert str(caught.value) == (
        f"--control unix:{longer}: {SUN_PATH_MAX + 1} bytes, longer than a socket address "
        f"can be ({SUN_PATH_MAX} bytes here); give a shorter path"
    )
    # bytes, not characters: a name in UTF-8 counts each of its bytes
    assert parse_address("unix:" + "é" * (SUN_PATH_MAX // 2))[0] == "unix"
    with pytest.raises(ControlAddressError, match="longer than a socket address"):
        parse_address("unix:" + "é" * (SUN_PATH_MAX // 2 + 1))


# -- serve on pipes, in this process -------------------------------------------


def serve(
    command: str, args: tuple[str, ...], address: str, stdin: bytes, *, speed: float = 0.0
) -> tuple[int, bytes]:
    """Run ``serve`` with ``stdin`` on a pipe (then closed); the code and stdout.

    A thread drains stdout: the process endpoint's writes block, as a process's do.
    """
    session = build_session(command, args, speed=speed)
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.write(in_write, stdin)
    os.close(in_write)
    chunks: list[bytes] = []

    def drain() -> None:
        while data := os.read(out_read, 1 << 16):
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = asyncio.run(
            asyncio.wait_for(
                controlled.serve(
                    session, address, endpoint=ProcessEndpoint(out_write), in_fd=in_read
                ),
                10,
            )
        )
    finally:
        os.close(in_read)
        os.close(out_write)
        reader.join(timeout=5)
        os.close(out_read)
    return code, b"".join(chunks)


def control_line(request_id: str, subtype: str, **params: Any) -> bytes:
    request = {"subtype": subtype, **params}
    frame = {"type": "control_request", "request_id": request_id, "request": request}
    return json.dumps(frame).encode() + b"\n"


def test_serve_over_stdio_separates_frames_from_events() -> None:
    stdin = control_line("a", "snapshot") + GENERATE + b"\n" + control_line("b", "nope")
    code, out = serve("generate", (), "stdio", stdin)
    assert code == 0
    lines = out.splitlines()
    frames = [json.loads(line) for line in lines if line.startswith(b'{"type":')]
    events = [json.loads(line) for line in lines if line.startswith(b'{"vm":')]
    assert len(frames) + len(events) == len(lines)
    by_id = {f["response"]["request_id"]: f["response"] for f in frames}
    assert by_id["a"]["subtype"] == "success" and by_id["a"]["response"]["command"] == "generate"
    assert by_id["b"] == {
        "subtype": "error",
        "request_id": "b",
        "error": "Unsupported control request subtype: nope",
    }
    assert events[0]["vm"]["state"] == "select_action"
    assert events[-1]["done"] is True and events[-1]["vm"]["done_total"] == 16


def test_over_stdio_a_control_quit_is_answered_before_done_and_nothing_follows() -> None:
    """Two quits in one read: both answered, then the done:true event, the last line."""
    code, out = serve(
        "generate", (), "stdio", control_line("1", "quit") + control_line("2", "quit")
    )
    assert code == 0
    first, *frames, last = out.splitlines()
    assert json.loads(first)["vm"]["state"] == "select_action"
    assert [json.loads(frame)["response"] for frame in frames] == [
        {"subtype": "success", "request_id": "1", "response": {"done": True}},
        {"subtype": "success", "request_id": "2", "response": {"done": True}},
    ]
    assert json.loads(last)["done"] is True


def test_over_stdio_a_request_still_handled_when_a_line_quits_is_answered_before_done() -> None:
    """The snapshot's handler has not run when the quit line ends the session: it is
    answered with an error at once, before done:true, and never again."""
    code, out = serve("generate", (), "stdio", control_line("s", "snapshot") + b'{"type":"quit"}\n')
    assert code == 0
    first, frame, last = out.splitlines()
    assert json.loads(frame)["response"] == {
        "subtype": "error",
        "request_id": "s",
        "error": SESSION_ENDED,
    }
    assert json.loads(last)["done"] is True and json.loads(last)["vm"] == json.loads(first)["vm"]


def test_a_socket_peer_is_answered_after_done_too(short_dir: str) -> None:
    """A socket is a stream of its own: what its peer sent with its quit is answered,
    the quit first, whatever stdout has written meanwhile."""
    path = os.path.join(short_dir, "c.sock")
    answers: list[bytes] = []

    def peer() -> None:
        deadline = time.monotonic() + 10
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(control_line("q", "quit") + control_line("s", "snapshot"))
            while data := sock.recv(1 << 16):
                answers.append(data)

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    code, out = serve("generate", (), f"unix:{path}", b"")
    thread.join(timeout=10)
    assert code == 0
    assert json.loads(out.splitlines()[-1])["done"] is True
    quit_, snapshot = (json.loads(line)["response"] for line in b"".join(answers).splitlines())
    assert quit_ == {"subtype": "success", "request_id": "q", "response": {"done": True}}
    assert snapshot["request_id"] == "s" and snapshot["response"]["state"] == "select_action"


def test_stdin_is_watched_only_while_input_is_awaited() -> None:
    """While the loop holds what was read (behind a split event's pause: ``_unheld``),
    input waiting on stdin wakes nothing: the loop does not watch it meanwhile."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        reads = controlled._reads(read_fd, lambda: True)
        try:
            os.write(write_fd, b"one\n")
            assert await anext(reads) == b"one\n"
            os.write(write_fd, b"two\n")  # comes while the first is held
            assert loop.remove_reader(read_fd) is False  # not watched meanwhile
            assert await anext(reads) == b"two\n"
        finally:
            os.close(write_fd)
        try:
            assert await anext(reads) == b""  # the end of input
            assert loop.remove_reader(read_fd) is False
        finally:
            await reads.aclose()
            os.close(read_fd)

    asyncio.run(asyncio.wait_for(main(), 10))


@pytest.fixture
def short_dir() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="zsa-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_serve_refuses_a_path_that_is_not_a_socket(short_dir: str) -> None:
    path = Path(short_dir, "c.sock")
    path.write_text("data")
    with pytest.raises(ControlAddressError, match="exists and is not a socket"):
        serve("version", (), f"unix:{path}", b"")
    assert path.read_text() == "data"


def test_serve_refuses_a_live_socket(short_dir: str) -> None:
    path = os.path.join(short_dir, "c.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(path)
        live.listen()
        with pytest.raises(ControlAddressError, match="another process is listening"):
            serve("version", (), f"unix:{path}", b"")
        assert os.path.exists(path)


def test_serve_replaces_a_stale_socket_and_removes_it_at_the_end(short_dir: str) -> None:
    path = os.path.join(short_dir, "c.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    code, out = serve("version", (), f"unix:{path}", b"")
    assert code == 0
    (line,) = out.splitlines()
    assert json.loads(line)["done"] is True
    assert not os.path.exists(path)


def test_a_listener_that_never_answers_is_refused_in_time(short_dir: str) -> None:
    """A socket whose listener's backlog is full: connect() would wait for ever."""
    path = os.path.join(short_dir, "c.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as busy:
        busy.bind(path)
        busy.listen(0)
        waiting = []
        for _ in range(8):  # fill the backlog: connections nobody accepts
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            with contextlib.suppress(OSError):  # the last ones find the backlog full
                client.connect(path)
            waiting.append(client)
        started = time.monotonic()
        with pytest.raises(ControlAddressError, match="another process is listening"):
            controlled._prepare_socket_path(path)
        assert time.monotonic() - started < 10
        assert os.path.exists(path)
        for client in waiting:
            client.close()


@pytest.mark.parametrize("length", [20, 100])
def test_a_control_socket_is_0600_from_its_first_moment_short_path_or_long(
    length: int,
) -> None:
    folder = tempfile.mkdtemp(prefix="zs")
    try:
        deep = os.path.join(folder, "d" * max(1, length - len(folder) - 8))
        os.mkdir(deep)
        path = os.path.join(deep, "c.sock")
        umask = os.umask(0o022)
        os.umask(umask)
        listener = _bind_private(path)
        try:
            mode = os.stat(path).st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
            assert os.listdir(deep) == ["c.sock"]  # no folder of its own left behind
            assert os.umask(umask) == umask  # as it was
        finally:
            listener.close()
    finally:
        shutil.rmtree(folder)
