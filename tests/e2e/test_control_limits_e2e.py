"""The control channel at its edges, over real ``--control`` processes: every malformed
request answered exactly once in the simulator's words, on stdin and on a socket; a
peer that vanishes with requests pending costs nothing on stderr; a peer that never
reads its responses is held back instead of growing the process.

(Memory is read from ``/proc/<pid>/status``: the bounds are on memory, with margin.)
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time
from typing import Any

import pytest

from simulator.control import NOT_A_FRAME
from simulator.tools.remote import Remote

from .test_control_e2e import GENERATE, Sim, send_escaped
from .test_control_e2e import sock_path as sock_path  # a fixture: used by its name

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.cold,  # the memory read is the process's own
]

PYTHON_WORDS = (
    "sys.set_int_max_str_digits",
    "Exceeds the limit",
    "maximum recursion",
    "Traceback",
    "not allowed in state",
)
"""What no answer to a control request may say: Python's words, or zread's for a line
that is not a command."""

DIGITS = "9" * 5000


def malformed() -> list[tuple[bytes, Any, str]]:
    """(line, request_id written back, start of the error) for each malformed request."""
    head = b'{"type":"control_request","request_id":'
    snapshot = b',"request":{"subtype":"snapshot"}}'

    def inject(request_id: str, fault: bytes) -> bytes:
        body = b',"request":{"subtype":"inject","fault":{"kind":"diagnostic","after_event":'
        return head + f'"{request_id}"'.encode() + body + fault + b"}}}"

    return [
        (inject("big", DIGITS.encode()), "big", "control: number out of range"),
        (inject("neg", b"-" + DIGITS.encode()), "neg", "control: number out of range"),
        (inject("inf", b"1e400"), "inf", "control: number out of range"),
        (inject("deep", b"[" * 100_000 + b"]" * 100_000), "deep", "control: frame nested"),
        (inject("obj", b'{"a":' * 3000 + b"1" + b"}" * 3000), "obj", "control: frame nested"),
        (inject("bytes", b'"\xff\xfe"'), "bytes", "control: invalid string (bytes that"),
        (inject("lone", b'"\\ud800"'), "lone", "control: invalid string (lone surrogate)"),
        (head + b"7" + snapshot, 7, "Malformed control request: request_id must be a string"),
        (head + DIGITS.encode() + snapshot, None, "Malformed control request: request_id"),
        (head + b"1e400" + snapshot, None, "Malformed control request: request_id"),
        (head + b"null" + snapshot, None, "Malformed control request: request_id"),
        (b'{"type":"control_request"' + snapshot, None, "Malformed control request: request_id"),
        (head + b'"nosub","request":{"subtype":' + DIGITS.encode() + b"}}", "nosub", "control:"),
    ]


def check_answers(answers: list[dict[str, Any]]) -> None:
    """One error response per malformed request, in order, in the simulator's words."""
    cases = malformed()
    assert len(answers) == len(cases), answers
    for answer, (_, request_id, error) in zip(answers, cases, strict=True):
        assert answer["subtype"] == "error" and answer["request_id"] == request_id, answer
        assert answer["error"].startswith(error), answer
        assert not any(words in answer["error"] for words in PYTHON_WORDS), answer


def test_every_malformed_request_on_stdin_gets_one_error_response() -> None:
    with Sim.start("generate") as sim:
        first = sim.next_event()
        assert sim.popen.stdin is not None
        for line, _, _ in malformed():
            sim.popen.stdin.write(line + b"\n")
        sim.popen.stdin.flush()
        assert sim.ok("snapshot")["vm"] == first["vm"]  # after every answer: nothing changed
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
        check_answers([f["response"] for f in sim.frames[: len(malformed())]])
        assert len(sim.frames) == len(malformed()) + 1
        assert len(sim.events) == len([e for e in sim.events if not e["error"]])  # none refused
        assert sim.noise == []
    assert sim.stderr == ""


def read_answers(peer: socket.socket, count: int, timeout: float = 10.0) -> list[bytes]:
    peer.settimeout(timeout)
    data = b""
    while data.count(b"\n") < count:
        chunk = peer.recv(1 << 16)
        assert chunk, f"the simulator closed the connection after {data!r}"
        data += chunk
    return data.splitlines()


def test_every_malformed_request_on_a_socket_gets_one_error_response(sock_path: str) -> None:
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        first = sim.next_event()
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + 10
        while peer.connect_ex(sock_path) != 0:
            assert time.monotonic() < deadline, "no socket"
            time.sleep(0.02)
        with peer:
            lines = [line for line, _, _ in malformed()]
            peer.sendall(b"\n".join([*lines, b"not json", b'{"type":[]}', b""]))
            answers = [json.loads(raw)["response"] for raw in read_answers(peer, len(lines) + 2)]
            check_answers(answers[: len(lines)])
            assert [a["error"] for a in answers[len(lines) :]] == [NOT_A_FRAME, NOT_A_FRAME]
            peer.sendall(b'{"type":"control_request","request_id":"s","request":')
            peer.sendall(b'{"subtype":"snapshot"}}\n')
            (snapshot,) = read_answers(peer, 1)
            assert json.loads(snapshot)["response"]["response"]["vm"] == first["vm"]
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
        assert sim.lines == sim.event_lines
    assert sim.stderr == ""


def test_a_numeric_request_id_comes_back_as_sent() -> None:
    with Sim.start("config") as sim:
        sim.next_event()
        send_escaped(sim, {"type": "control_request", "request_id": 1.5, "request": {}})
        assert sim.next_frame()["response"] == {
            "subtype": "error",
            "request_id": 1.5,
            "error": "Malformed control request: request_id must be a string, got a number",
        }
        sim.send({"type": "quit"})
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0


def test_a_socket_peer_that_resets_with_requests_pending_is_not_a_word_on_stderr(
    sock_path: str,
) -> None:
    request = b'{"type":"control_request","request_id":"r%d","request":{"subtype":"snapshot"}}\n'
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        sim.next_event()
        deadline = time.monotonic() + 10
        for trial in range(5):
            peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            while peer.connect_ex(sock_path) != 0:
                assert time.monotonic() < deadline, "no socket"
                time.sleep(0.02)
            peer.sendall(b"".join(request % n for n in range(50)))
            if trial % 2:
                time.sleep(0.01)  # some answered, some not
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.close()  # a reset, not a close: the answers have nowhere to go
        time.sleep(0.3)
        sim.send(GENERATE)
        sim.until_done()
        sim.rest()
        assert sim.wait() == 0
    assert sim.stderr == ""


# -- a peer that never reads -----------------------------------------------------------

UNREAD = 16_000
"""Requests a peer on stdin sends without reading a response: ~1.3 MB, of which the
stdin pipe and one read (128 KiB) go in before it is held back, under half the quarter
the test allows; their answers, kept, would take some 20 MB, four times :data:`BOUND_KB`."""

UNREAD_SOCKET = 26_000
"""The same on a socket (~2 MB), whose peer keeps its own send buffer small
(:data:`PEER_SNDBUF`): what goes in before it is held back is then the simulator's
(its read buffer, and the requests whose answers fill its outbound queue and its send
buffer: ~270 KiB), about half the quarter the test allows."""

PEER_SNDBUF = 4096
"""The socket peer's send buffer (the kernel doubles it): what it holds is not the
simulator's, and a small one proves the point with fewer requests."""

BOUND_KB = 5 * 1024


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def requests(count: int) -> bytes:
    frame = b'{"type":"control_request","request_id":"u%d","request":{"subtype":"%s"}}\n'
    subtypes = (b"snapshot", *(b"pause", b"resume") * 4)  # a snapshot is the larger answer
    return b"".join(frame % (n, subtypes[n % len(subtypes)]) for n in range(count))


def push_until_held(fd: int, payload: memoryview, seconds: float = 1.5) -> int:
    """Write ``payload`` to a non-blocking ``fd`` until it has been refused for
    ``seconds`` (or is all written); how much went."""
    os.set_blocking(fd, False)
    sent = 0
    refused_since: float | None = None
    while sent < len(payload):
        try:
            sent += os.write(fd, payload[sent:])
            refused_since = None
        except BlockingIOError:
            now = time.monotonic()
            refused_since = refused_since or now
            if now - refused_since > seconds:
                break
            time.sleep(0.02)
    return sent


def count_answers(fd: int, count: int, prefix: bytes, timeout: float = 30.0) -> int:
    """Read ``fd`` (blocking, with a deadline) until ``count`` lines start with
    ``prefix``; how many did. Read by the bufferful: after each read the reader lets
    the answers gather for a moment, so tens of thousands take a few thousand reads."""
    os.set_blocking(fd, True)
    deadline = time.monotonic() + timeout
    found, rest = 0, b""
    while found < count and time.monotonic() < deadline:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        data = rest + data
        end = data.rfind(b"\n") + 1
        whole, rest = data[:end], data[end:]
        found += whole.startswith(prefix) + whole.count(b"\n" + prefix)
        time.sleep(0.002)
    return found


RESPONSE = b'{"type":"control_response"'


def send_rest_and_count(write_fd: int, rest: memoryview, read_fd: int, count: int) -> int:
    """Write ``rest`` to ``write_fd`` (blocking now) while a thread reads ``read_fd``;
    how many control responses it read (:func:`count_answers`)."""
    got: list[int] = []
    reader = threading.Thread(
        target=lambda: got.append(count_answers(read_fd, count, RESPONSE)), daemon=True
    )
    reader.start()
    os.set_blocking(write_fd, True)
    while rest:
        rest = rest[os.write(write_fd, rest) :]
    reader.join(timeout=60)
    return got[0] if got else -1


def test_unread_responses_on_stdin_hold_the_peer_back_not_the_memory() -> None:
    payload = memoryview(requests(UNREAD))
    with Sim.start("generate", speed=1) as sim:
        sim.next_event()
        sim.ok("snapshot")  # every import and first answer made
        assert sim.popen.stdin is not None
        before = rss_kb(sim.popen.pid)
        sent = push_until_held(sim.popen.stdin.fileno(), payload)
        grown = rss_kb(sim.popen.pid) - before
        assert sent < len(payload) // 4, "its requests were all read while it read nothing"
        assert grown < BOUND_KB, f"RSS grew by {grown} kB"
        assert sim.popen.stdout is not None
        stdin, stdout = sim.popen.stdin.fileno(), sim.popen.stdout.fileno()
        # held back, then every one answered
        assert send_rest_and_count(stdin, payload[sent:], stdout, UNREAD) == UNREAD


def test_unread_responses_on_a_socket_hold_the_peer_back_not_the_memory(
    sock_path: str,
) -> None:
    payload = memoryview(requests(UNREAD_SOCKET))
    with Sim.start("generate", speed=1, control=f"unix:{sock_path}") as sim:
        sim.next_event()
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PEER_SNDBUF)
        deadline = time.monotonic() + 10
        while peer.connect_ex(sock_path) != 0:
            assert time.monotonic() < deadline, "no socket"
            time.sleep(0.02)
        with peer:
            peer.sendall(b'{"type":"control_request","request_id":"w","request":')
            peer.sendall(b'{"subtype":"snapshot"}}\n')
            read_answers(peer, 1)  # every import and first answer made
            before = rss_kb(sim.popen.pid)
            sent = push_until_held(peer.fileno(), payload)
            grown = rss_kb(sim.popen.pid) - before
            assert sent < len(payload) // 4, "its requests were all read while it read nothing"
            assert grown < BOUND_KB, f"RSS grew by {grown} kB"
            with Remote(sock_path) as other:  # another peer is not held back
                assert other.snapshot()["command"] == "generate"
            fd = peer.fileno()
            assert send_rest_and_count(fd, payload[sent:], fd, UNREAD_SOCKET) == UNREAD_SOCKET
        with Remote(sock_path) as other:
            other.resume()  # the last request may have paused it
            other.set_speed(0)
        sim.send(GENERATE)
        sim.until_done(timeout=30)
        sim.rest()
        assert sim.wait() == 0
    assert sim.stderr == ""


def test_responses_held_behind_a_split_pause_hold_stdin_back() -> None:
    count = 10_000
    frame = b'{"type":"control_request","request_id":"h%d","request":{"subtype":"resume"}}\n'
    payload = memoryview(b"".join(frame % n for n in range(count)))
    with Sim.start("config", speed=1) as sim:
        sim.next_event()
        split = {"kind": "split", "pieces": 2, "pause": 3.0}
        assert sim.ok("inject", fault=split) == {"injected": "fault", "id": "fault-1"}
        sim.send({"type": "nope"})  # its event: half of it, then a 3 s pause
        assert sim.partial().startswith(b'{"vm":')
        assert sim.popen.stdin is not None and sim.popen.stdout is not None
        sent = push_until_held(sim.popen.stdin.fileno(), payload, seconds=1.0)
        assert sent < len(payload) // 4, "stdin was read all the same"
        stdin, stdout = sim.popen.stdin.fileno(), sim.popen.stdout.fileno()
        # every one answered once the pause was over
        assert send_rest_and_count(stdin, payload[sent:], stdout, count) == count


def test_peers_still_connected_when_the_run_ends_are_closed_quietly(sock_path: str) -> None:
    with Sim.start("generate", control=f"unix:{sock_path}") as sim:
        sim.next_event()
        with Remote(sock_path) as idle, Remote(sock_path) as busy:
            assert idle.snapshot()["command"] == "generate"
            busy.set_speed(0)
            sim.send(GENERATE)
            sim.until_done()
            sim.rest()
            assert sim.wait() == 0
    assert sim.stderr == ""
