"""Tests for simulator.control: two Conns back to back, and one Conn against a recorder."""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.control import (
    INVALID_STRING,
    NOT_A_FRAME,
    NOT_UTF8,
    NUMBER_OUT_OF_RANGE,
    TOO_DEEP,
    Conn,
    ControlClosed,
    ControlEncodeError,
    ControlError,
)


@pytest.fixture(autouse=True, scope="module")
def _collections_walk_only_what_the_tests_make() -> Iterator[None]:
    """What the process held before these tests is left out of their ``gc.collect()``
    (frozen): a collection here looks for what a test left behind, and walking the
    rest of the heap made each one cost ~50 ms."""
    gc.freeze()
    yield
    gc.unfreeze()


async def settle(rounds: int = 10) -> None:
    """Let scheduled callbacks and handler tasks run."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def run(main: Callable[[], Awaitable[None]]) -> None:
    async def wrapped() -> None:
        await asyncio.wait_for(main(), timeout=5)

    asyncio.run(wrapped())


def linked() -> tuple[Conn, Conn, list[bytes], list[bytes]]:
    """Two Conns whose writes feed each other (via call_soon); also records the frames."""
    loop = asyncio.get_running_loop()
    a_out: list[bytes] = []
    b_out: list[bytes] = []
    conns: dict[str, Conn] = {}

    def write_a(frame: bytes) -> None:
        a_out.append(frame)
        loop.call_soon(conns["b"].handle_frame, frame)

    def write_b(frame: bytes) -> None:
        b_out.append(frame)
        loop.call_soon(conns["a"].handle_frame, frame)

    conns["a"] = Conn(write_a)
    conns["b"] = Conn(write_b)
    return conns["a"], conns["b"], a_out, b_out


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def request_line(request_id: str, subtype: str, **params: Any) -> bytes:
    request = {"subtype": subtype, **params}
    return line({"type": "control_request", "request_id": request_id, "request": request})


def success_line(request_id: str, payload: Any) -> bytes:
    response = {"subtype": "success", "request_id": request_id, "response": payload}
    return line({"type": "control_response", "response": response})


def error_line(request_id: str, error: str) -> bytes:
    response = {"subtype": "error", "request_id": request_id, "error": error}
    return line({"type": "control_response", "response": response})


def ids_of(frames: list[bytes]) -> list[str]:
    """The request_id of each frame (top level, or inside a control_response)."""
    decoded = [json.loads(f) for f in frames]
    return [d["response"]["request_id"] if "response" in d else d["request_id"] for d in decoded]


# -- exact frame bytes --------------------------------------------------------


def test_request_frame_bytes_and_success_payload() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("set_model", {"model": "x", "n": 1}))
        await settle()
        assert out == [
            b'{"type":"control_request","request_id":"req_1",'
            b'"request":{"subtype":"set_model","model":"x","n":1}}\n'
        ]
        assert conn.handle_frame(success_line("req_1", {"ok": True, "v": [1]})) is True
        assert await task == {"ok": True, "v": [1]}

    run(main)


def test_request_without_params_and_subtype_wins_over_params() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        t1 = asyncio.create_task(conn.request("interrupt"))
        t2 = asyncio.create_task(conn.request("interrupt", {"a": 1, "subtype": "other"}))
        await settle()
        assert out == [
            b'{"type":"control_request","request_id":"req_1","request":{"subtype":"interrupt"}}\n',
            b'{"type":"control_request","request_id":"req_2",'
            b'"request":{"subtype":"interrupt","a":1}}\n',
        ]
        t1.cancel()
        t2.cancel()
        await settle()

    run(main)


def test_success_response_bytes() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            return {"echo": request}

        conn.set_handler("ping", handler)
        assert conn.handle_frame(request_line("r9", "ping", x=2)) is True
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"success","request_id":"r9",'
            b'"response":{"echo":{"subtype":"ping","x":2}}}}\n'
        ]

    run(main)


def test_error_response_bytes_from_handler_exception() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def handler(request: dict[str, Any]) -> None:
            raise ValueError("boom")

        conn.set_handler("ping", handler)
        assert conn.handle_frame(request_line("r1", "ping")) is True
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":"r1",'
            b'"error":"boom"}}\n'
        ]

    run(main)


def test_cancel_frame_bytes_when_requester_is_cancelled() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("slow"))
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert out[1:] == [b'{"type":"control_cancel_request","request_id":"req_1"}\n']
        # The id is forgotten: a late response is ignored (still a control frame).
        assert conn.handle_frame(success_line("req_1", {})) is True
        assert len(out) == 2

    run(main)


def test_withdraw_writes_the_cancel_frames_before_it_returns() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        tasks = [asyncio.create_task(conn.request(name)) for name in ("a", "b")]
        await settle()
        assert conn.withdraw() == ["req_1", "req_2"]
        assert out[2:] == [  # written at once, not when the tasks next run
            b'{"type":"control_cancel_request","request_id":"req_1"}\n',
            b'{"type":"control_cancel_request","request_id":"req_2"}\n',
        ]
        for task in tasks:
            with pytest.raises(asyncio.CancelledError):
                await task
        assert len(out) == 4  # no second cancel frame as the tasks end
        assert conn.withdraw() == []
        assert conn.handle_frame(success_line("req_1", {})) is True  # late: ignored
        assert len(out) == 4

    run(main)


def test_abandon_answers_the_requests_being_handled_at_once_and_nothing_after() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        ran: list[str] = []

        async def slow(request: dict[str, Any]) -> str:
            ran.append(request["subtype"])
            await asyncio.sleep(0)
            return "late"

        conn.set_handler("slow", slow)
        line = b'{"type":"control_request","request_id":"%s","request":{"subtype":"slow"}}'
        assert conn.handle_frame(line % b"a") and conn.handle_frame(line % b"b")
        await asyncio.sleep(0)  # "a" and "b" are being handled, not answered
        assert out == [] and ran == ["slow", "slow"]
        assert conn.abandon("ended") == ["a", "b"]
        assert out == [  # written at once, not when the handlers next run
            b'{"type":"control_response","response":{"subtype":"error","request_id":"a","error":"ended"}}\n',
            b'{"type":"control_response","response":{"subtype":"error","request_id":"b","error":"ended"}}\n',
        ]
        await settle()
        assert len(out) == 2  # the handlers' own answers never come
        assert conn.abandon("again") == []
        conn.close()
        assert conn.handle_frame(line % b"c") and conn.abandon("closed") == []
        assert len(out) == 2

    run(main)


# -- requests -------------------------------------------------------------------


@pytest.mark.parametrize("params", [["a"], "s", 5, ("k", 1)])
def test_bad_params_raise_type_error_before_writing(params: Any) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        with pytest.raises(TypeError) as info:
            await conn.request("x", params)
        assert isinstance(info.value, ControlEncodeError)
        assert out == []

    run(main)


def test_ids_unique_over_many_concurrent_requests() -> None:
    async def main() -> None:
        a, b, a_out, _ = linked()

        async def echo(request: dict[str, Any]) -> dict[str, Any]:
            await asyncio.sleep(0)
            return {"n": request["n"]}

        b.set_handler("echo", echo)
        results = await asyncio.gather(*(a.request("echo", {"n": i}) for i in range(300)))
        assert results == [{"n": i} for i in range(300)]
        ids = ids_of(a_out)
        assert len(ids) == 300
        assert len(set(ids)) == 300

    run(main)


def test_handler_sees_request_and_payload_returns_to_requester() -> None:
    async def main() -> None:
        a, b, _, _ = linked()
        seen: list[dict[str, Any]] = []

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            seen.append(request)
            return {"mode": "plan", "nested": {"k": [1, 2]}}

        b.set_handler("set_permission_mode", handler)
        assert await a.request("set_permission_mode", {"mode": "plan"}) == {
            "mode": "plan",
            "nested": {"k": [1, 2]},
        }
        assert seen == [{"subtype": "set_permission_mode", "mode": "plan"}]

    run(main)


def test_none_result_is_null_and_missing_response_gives_empty_dict() -> None:
    async def main() -> None:
        a, b, _, b_out = linked()

        async def handler(request: dict[str, Any]) -> None:
            return None

        b.set_handler("interrupt", handler)
        assert await a.request("interrupt") is None  # Go marshals a nil result as null
        assert b_out == [
            b'{"type":"control_response","response":{"subtype":"success","request_id":"req_1",'
            b'"response":null}}\n'
        ]

        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("x"))
        await settle()
        response = {"subtype": "success", "request_id": "req_1"}
        assert conn.handle_frame(line({"type": "control_response", "response": response}))
        assert await task == {}

    run(main)


def test_handler_exception_becomes_control_error_on_requester() -> None:
    async def main() -> None:
        a, b, _, _ = linked()

        async def fails(request: dict[str, Any]) -> None:
            raise RuntimeError("disk full")

        async def fails_silently(request: dict[str, Any]) -> None:
            raise KeyError

        b.set_handler("fails", fails)
        b.set_handler("silent", fails_silently)
        with pytest.raises(ControlError) as info:
            await a.request("fails")
        assert info.value.message == "disk full"
        assert str(info.value) == "disk full"
        assert not isinstance(info.value, ControlClosed)
        with pytest.raises(ControlError) as info:
            await a.request("silent")
        assert info.value.message == "KeyError"

    run(main)


def test_unsupported_subtype() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        assert conn.handle_frame(request_line("r5", "nope")) is True
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":"r5",'
            b'"error":"Unsupported control request subtype: nope"}}\n'
        ]

        a, _, _, _ = linked()
        with pytest.raises(ControlError) as info:
            await a.request("mcp_status")
        assert info.value.message == "Unsupported control request subtype: mcp_status"

    run(main)


def test_error_response_raises_control_error_with_text() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("x"))
        await settle()
        assert conn.handle_frame(error_line("req_1", "not allowed")) is True
        with pytest.raises(ControlError) as info:
            await task
        assert info.value.message == "not allowed"

    run(main)


def test_concurrent_requests_answered_out_of_order() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        tasks = [asyncio.create_task(conn.request("q", {"i": i})) for i in range(3)]
        await settle()
        ids = ids_of(out)
        assert len(set(ids)) == 3
        conn.handle_frame(success_line(ids[2], {"i": 2}))
        conn.handle_frame(error_line(ids[0], "zero failed"))
        conn.handle_frame(success_line(ids[1], {"i": 1}))
        assert await tasks[2] == {"i": 2}
        assert await tasks[1] == {"i": 1}
        with pytest.raises(ControlError, match="zero failed"):
            await tasks[0]

    run(main)


def test_write_failure_on_request_raises_that_error() -> None:
    async def main() -> None:
        boom = BrokenPipeError("pipe closed")
        calls: list[bytes] = []

        def write(frame: bytes) -> None:
            calls.append(frame)
            if len(calls) == 1:
                raise boom

        conn = Conn(write)
        with pytest.raises(BrokenPipeError) as info:
            await conn.request("x")
        assert info.value is boom
        # The Conn still works afterwards.
        task = asyncio.create_task(conn.request("y"))
        await settle()
        conn.handle_frame(success_line(ids_of(calls)[1], {"ok": 1}))
        assert await task == {"ok": 1}
        # The failed request left nothing pending for close() to fail unobserved
        # (drop the traceback first: its frames would keep such a future alive).
        boom.__traceback__ = None
        del info
        errors: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        conn.close()
        gc.collect()
        await settle()
        assert errors == []

    run(main)


def test_write_failure_on_response_is_swallowed() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        attempts: list[bytes] = []

        def write(frame: bytes) -> None:
            attempts.append(frame)
            raise OSError("peer gone")

        conn = Conn(write)

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            return {}

        async def raises(request: dict[str, Any]) -> None:
            raise ValueError("x")

        conn.set_handler("ok", handler)
        conn.set_handler("raises", raises)
        assert conn.handle_frame(request_line("r1", "ok")) is True
        assert conn.handle_frame(request_line("r2", "raises")) is True
        assert conn.handle_frame(request_line("r3", "unknown")) is True
        await settle()
        gc.collect()
        await settle()
        assert sorted(ids_of(attempts)) == ["r1", "r2", "r3"]
        assert errors == []

    run(main)


# -- cancellation -----------------------------------------------------------------


def test_cancel_request_cancels_in_flight_handler_without_response() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        events: list[str] = []

        async def slow(request: dict[str, Any]) -> dict[str, Any]:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                events.append("cancelled")
                raise
            return {"late": True}

        async def stubborn(request: dict[str, Any]) -> dict[str, Any]:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                events.append("swallowed")
            return {"late": True}

        conn.set_handler("slow", slow)
        conn.set_handler("stubborn", stubborn)
        conn.handle_frame(request_line("r1", "slow"))
        conn.handle_frame(request_line("r2", "stubborn"))
        await settle()
        assert conn.handle_frame(line({"type": "control_cancel_request", "request_id": "r1"}))
        assert conn.handle_frame(line({"type": "control_cancel_request", "request_id": "r2"}))
        await settle()
        assert events == ["cancelled", "swallowed"]
        assert out == []

    run(main)


def test_cancel_for_unknown_id_is_ignored() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        gate = asyncio.Event()

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            await gate.wait()
            return {"done": True}

        conn.set_handler("wait", handler)
        conn.handle_frame(request_line("r1", "wait"))
        await settle()
        assert conn.handle_frame(line({"type": "control_cancel_request", "request_id": "zz"}))
        assert conn.handle_frame(line({"type": "control_cancel_request"})) is True
        gate.set()
        await settle()
        assert [json.loads(f)["response"] for f in out] == [
            {"subtype": "success", "request_id": "r1", "response": {"done": True}}
        ]

    run(main)


def test_response_for_unknown_id_is_ignored() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("x"))
        await settle()
        assert conn.handle_frame(success_line("req_999", {"wrong": True})) is True
        assert conn.handle_frame(line({"type": "control_response", "response": "?"})) is True
        await settle()
        assert not task.done()
        conn.handle_frame(success_line("req_1", {"right": True}))
        assert await task == {"right": True}
        assert len(out) == 1

    run(main)


def test_requester_cancellation_cancels_the_peer_handler() -> None:
    async def main() -> None:
        a, b, a_out, b_out = linked()
        started = asyncio.Event()
        events: list[str] = []

        async def slow(request: dict[str, Any]) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                events.append("cancelled")
                raise
            return {}

        b.set_handler("slow", slow)
        task = asyncio.create_task(a.request("slow"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert [json.loads(f)["type"] for f in a_out] == [
            "control_request",
            "control_cancel_request",
        ]
        assert events == ["cancelled"]
        assert b_out == []

    run(main)


# -- classification ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        b'{"vm":{},"type":"snapshot"}\n',
        '{"vm":{},"seq":3}',
        b'{"type":"event","request_id":"r1"}',
        b"garbage",
        "not json at all",
        b"",
        "",
        b"\n",
        b"[1,2,3]",
        '["control_request"]',
        b'"control_request"',
        b"42",
        b"null",
        b"\xff\xfe\xfa",
        b'{"type":"control_request"',
        b'{"type":[]}',
        b'{"type":{"control_request":1}}',
        b'{"type":["control_request"],"request_id":"r1","request":{"subtype":"x"}}',
        b'{"type":7}',
        b'{"type":null}',
    ],
)
def test_non_control_lines_return_false(text: bytes | str) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        assert conn.handle_frame(text) is False
        await settle()
        assert out == []

    run(main)


def test_control_lines_as_str_and_bytes_return_true() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        assert conn.handle_frame(request_line("r1", "nope").decode()) is True
        assert conn.handle_frame(request_line("r2", "nope")) is True
        await settle()
        assert ids_of(out) == ["r1", "r2"]

    run(main)


def test_malformed_control_requests() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        # No request_id string: one error response, the id written back when it can be.
        assert conn.handle_frame(line({"type": "control_request", "request": {"subtype": "x"}}))
        assert conn.handle_frame(
            line({"type": "control_request", "request_id": 7, "request": {"subtype": "x"}})
        )
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":null,'
            b'"error":"Malformed control request: request_id must be a string, got nothing"}}\n',
            b'{"type":"control_response","response":{"subtype":"error","request_id":7,'
            b'"error":"Malformed control request: request_id must be a string, got a number"}}\n',
        ]
        out.clear()
        # A request_id but no usable subtype: error response.
        assert conn.handle_frame(line({"type": "control_request", "request_id": "m1"}))
        assert conn.handle_frame(
            line({"type": "control_request", "request_id": "m2", "request": {"mode": "x"}})
        )
        assert conn.handle_frame(
            line({"type": "control_request", "request_id": "m3", "request": [1]})
        )
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":"'
            + rid.encode()
            + b'","error":"Malformed control request: missing request.subtype"}}\n'
            for rid in ("m1", "m2", "m3")
        ]

    run(main)


def test_unhashable_request_id_or_subtype_never_raises() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        for request_id in ([], {}, ["r1"], {"r1": 1}):
            frame = {"type": "control_request", "request_id": request_id, "request": {}}
            assert conn.handle_frame(line(frame)) is True
        assert conn.handle_frame(line({"type": "control_cancel_request", "request_id": []}))
        assert conn.handle_frame(line({"type": "control_response", "response": {"request_id": {}}}))
        await settle()
        assert [json.loads(f)["response"] for f in out] == [
            {
                "subtype": "error",
                "request_id": None,
                "error": f"Malformed control request: request_id must be a string, got {kind}",
            }
            for kind in ("an array", "an object", "an array", "an object")
        ]  # one answer a request; a cancellation and a response get none
        out.clear()
        for request_id, subtype in (("s1", []), ("s2", {}), ("s3", ["x"])):
            frame = {"type": "control_request", "request_id": request_id, "request": {}}
            frame["request"] = {"subtype": subtype}
            assert conn.handle_frame(line(frame)) is True
        await settle()
        assert [json.loads(f)["response"] for f in out] == [
            {
                "subtype": "error",
                "request_id": rid,
                "error": "Malformed control request: missing request.subtype",
            }
            for rid in ("s1", "s2", "s3")
        ]

    run(main)


def ascii_line(obj: dict[str, Any]) -> bytes:
    """A line with every non-ASCII character escaped, as a peer may send a lone surrogate."""
    return json.dumps(obj, ensure_ascii=True).encode() + b"\n"


@pytest.mark.parametrize(
    "request_body",
    [
        {"subtype": "nope\ud800"},
        {"subtype": "\udc00"},
        {"subtype": "known", "text": "x\ud800y"},
        {"subtype": "known", "deep": [{"a": ["\udfff"]}]},
        {"subtype": "known", "k\ud800": 1},
    ],
)
def test_a_request_holding_a_lone_surrogate_is_refused(request_body: dict[str, Any]) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        seen: list[dict[str, Any]] = []

        async def known(request: dict[str, Any]) -> dict[str, Any]:
            seen.append(request)
            return {}

        conn.set_handler("known", known)
        frame = {"type": "control_request", "request_id": "u1", "request": request_body}
        assert conn.handle_frame(ascii_line(frame)) is True
        assert conn.handle_frame(ascii_line(frame).decode()) is True  # the escape as a str
        await settle()
        assert seen == []
        expected = (
            b'{"type":"control_response","response":{"subtype":"error","request_id":"u1",'
            b'"error":"control: invalid string (lone surrogate)"}}\n'
        )
        assert out == [expected, expected]

    run(main)


def test_a_request_id_holding_a_lone_surrogate_is_answered_with_a_null_id() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def known(request: dict[str, Any]) -> dict[str, Any]:
            raise AssertionError("not called")

        conn.set_handler("known", known)
        for subtype in ("nope", "known"):
            frame = {"type": "control_request", "request_id": "r\ud800", "request": {}}
            frame["request"] = {"subtype": subtype}
            assert conn.handle_frame(ascii_line(frame)) is True
        cancel = {"type": "control_cancel_request", "request_id": "\ud800"}
        assert conn.handle_frame(ascii_line(cancel)) is True
        await settle()
        expected = (
            b'{"type":"control_response","response":{"subtype":"error","request_id":null,'
            b'"error":"control: invalid string (lone surrogate)"}}\n'
        )
        assert out == [expected, expected]  # the requests alone, once each

    run(main)


def test_a_valid_surrogate_pair_is_not_refused() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def echo(request: dict[str, Any]) -> dict[str, Any]:
            return {"text": request["text"]}

        conn.set_handler("echo", echo)
        frame = {"type": "control_request", "request_id": "p1", "request": {}}
        frame["request"] = {"subtype": "echo", "text": "\U0001f600"}
        assert conn.handle_frame(ascii_line(frame)) is True
        await settle()
        assert json.loads(out[0])["response"]["response"] == {"text": "\U0001f600"}

    run(main)


@pytest.mark.parametrize(
    "response",
    [
        {"subtype": "error", "error": "denied \ud800"},
        {"subtype": "success", "response": {"approve": True, "note": "\udc00"}},
    ],
)
def test_a_response_holding_a_lone_surrogate_fails_the_request(response: dict[str, Any]) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        pending = asyncio.ensure_future(conn.request("authorize"))
        await settle()
        frame = {"type": "control_response", "response": {**response, "request_id": "req_1"}}
        assert conn.handle_frame(ascii_line(frame)) is True
        with pytest.raises(ControlError) as caught:
            await pending
        assert caught.value.message == INVALID_STRING
        assert len(out) == 1

    run(main)


def test_handler_error_text_with_a_lone_surrogate_is_written_escaped() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        out: list[bytes] = []
        conn = Conn(out.append)

        async def raises(request: dict[str, Any]) -> None:
            raise ValueError("bad \ud800 text")

        async def returns(request: dict[str, Any]) -> dict[str, Any]:
            return {"text": "\udc00"}

        conn.set_handler("raises", raises)
        conn.set_handler("returns", returns)
        assert conn.handle_frame(request_line("h1", "raises")) is True
        assert conn.handle_frame(request_line("h2", "returns")) is True
        await settle()
        gc.collect()
        await settle()
        assert errors == []
        assert out[0] == (
            b'{"type":"control_response","response":{"subtype":"error","request_id":"h1",'
            b'"error":"bad \\\\ud800 text"}}\n'
        )
        assert out[1] == (
            b'{"type":"control_response","response":{"subtype":"error","request_id":"h2",'
            b'"error":"Control handler for returns returned a value that does not encode: '
            b'control: invalid string (lone surrogate)"}}\n'
        )

    run(main)


@pytest.mark.parametrize(
    ("subtype", "params"),
    [("x\ud800", None), ("x", {"text": "\udc00"}), ("x", {"\ud800": 1})],
)
def test_request_with_a_lone_surrogate_raises_type_error_before_writing(
    subtype: str, params: dict[str, Any] | None
) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        with pytest.raises(TypeError, match="control request does not encode"):
            await conn.request(subtype, params)
        assert out == []
        assert conn.handle_frame(success_line("req_1", {})) is True  # nothing left pending

    run(main)


def test_duplicate_in_flight_request_id_is_refused() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        gate = asyncio.Event()

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            await gate.wait()
            return {"n": request["n"]}

        conn.set_handler("w", handler)
        conn.handle_frame(request_line("d1", "w", n=1))
        conn.handle_frame(request_line("d1", "w", n=2))
        await settle()
        assert [json.loads(f)["response"]["subtype"] for f in out] == ["error"]
        gate.set()
        await settle()
        assert json.loads(out[1])["response"]["response"] == {"n": 1}

    run(main)


# -- close -----------------------------------------------------------------------


def test_close_fails_pending_with_control_closed() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        tasks = [asyncio.create_task(conn.request("x")) for _ in range(2)]
        await settle()
        conn.close()
        for task in tasks:
            with pytest.raises(ControlClosed):
                await task
        assert len(out) == 2  # no cancel frames on close

    run(main)


def test_close_fails_pending_with_given_error() -> None:
    async def main() -> None:
        conn = Conn(lambda frame: None)
        task = asyncio.create_task(conn.request("x"))
        await settle()
        err = EOFError("stdout closed")
        conn.close(err)
        with pytest.raises(EOFError) as info:
            await task
        assert info.value is err

    run(main)


def test_close_cancels_in_flight_handlers_without_responses() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        events: list[str] = []

        async def slow(request: dict[str, Any]) -> dict[str, Any]:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                events.append(request["request_id_hint"])
                raise
            return {}

        conn.set_handler("slow", slow)
        conn.handle_frame(request_line("r1", "slow", request_id_hint="r1"))
        conn.handle_frame(request_line("r2", "slow", request_id_hint="r2"))
        await settle()
        conn.close()
        await settle()
        assert sorted(events) == ["r1", "r2"]
        assert out == []

    run(main)


def test_request_after_close_raises_and_writes_nothing() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        conn.close()
        with pytest.raises(ControlClosed):
            await conn.request("x", {"a": 1})
        assert out == []

    run(main)


def test_close_is_idempotent_and_frames_after_close_do_nothing() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("x"))
        await settle()
        first = ConnectionResetError("first")
        conn.close(first)
        conn.close(RuntimeError("second"))
        conn.close()
        with pytest.raises(ConnectionResetError) as info:
            await task
        assert info.value is first

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            return {}

        conn.set_handler("ok", handler)
        assert conn.handle_frame(request_line("r1", "ok")) is True
        assert conn.handle_frame(request_line("r2", "unknown")) is True
        assert conn.handle_frame(success_line("req_1", {})) is True
        assert conn.handle_frame(b'{"vm":{}}') is False
        await settle()
        assert len(out) == 1  # only the original request
        with pytest.raises(ControlClosed):
            await conn.request("y")
        assert len(out) == 1

    run(main)


# -- any JSON value as a payload (handlers and requesters) ----------------------------

RESULTS_AND_BYTES = [
    ([1, "a", None, {"k": []}], b'[1,"a",null,{"k":[]}]'),
    ((1, 2), b"[1,2]"),
    ([], b"[]"),
    ("text", b'"text"'),
    ("", b'""'),
    (42, b"42"),
    (-7, b"-7"),
    (1.5, b"1.5"),
    (True, b"true"),
    (False, b"false"),
    (None, b"null"),
]


@pytest.mark.parametrize(("result", "encoded"), RESULTS_AND_BYTES)
def test_a_handler_may_return_any_json_value(result: Any, encoded: bytes) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def handler(request: dict[str, Any]) -> Any:
            return result

        conn.set_handler("value", handler)
        assert conn.handle_frame(request_line("v1", "value")) is True
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"success","request_id":"v1",'
            b'"response":' + encoded + b"}}\n"
        ]

    run(main)


@pytest.mark.parametrize("payload", [[1, 2], [], "ok", "", 3, 2.5, True, False, None])
def test_a_non_object_success_payload_is_returned_as_it_is(payload: Any) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.create_task(conn.request("x"))
        await settle()
        assert conn.handle_frame(success_line("req_1", payload)) is True
        assert await task == payload
        assert type(await task) is type(payload)

    run(main)


def test_non_object_payloads_round_trip_between_conns() -> None:
    async def main() -> None:
        a, b, _, _ = linked()

        async def echo_value(request: dict[str, Any]) -> Any:
            return request["value"]

        b.set_handler("echo", echo_value)
        for value in ([1, [2, {"x": None}]], "s", 0, -1.25, True, None):
            assert await a.request("echo", {"value": value}) == value

    run(main)


def test_int_keys_are_written_as_their_text_as_go_writes_map_int() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def handler(request: dict[str, Any]) -> Any:
            return {1: "a", -2: {3: True}}

        conn.set_handler("ints", handler)
        conn.handle_frame(request_line("i1", "ints"))
        task = asyncio.create_task(conn.request("x", {7: "seven"}))
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"success","request_id":"i1",'
            b'"response":{"1":"a","-2":{"3":true}}}}\n',
            b'{"type":"control_request","request_id":"req_1",'
            b'"request":{"subtype":"x","7":"seven"}}\n',
        ]
        task.cancel()
        await settle()

    run(main)


# -- frames escaped as Go's encoding/json escapes them --------------------------------


def test_request_frames_are_go_escaped() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        params = {"html": "<b>&</b>", "seps": "\u2028|\u2029", "u": "é😀", "<k&>": "\n\t\x01"}
        task = asyncio.create_task(conn.request("say<&>", params))
        await settle()
        assert out == [
            b'{"type":"control_request","request_id":"req_1","request":{'
            b'"subtype":"say\\u003c\\u0026\\u003e",'
            b'"html":"\\u003cb\\u003e\\u0026\\u003c/b\\u003e",'
            b'"seps":"\\u2028|\\u2029",'
            b'"u":"\xc3\xa9\xf0\x9f\x98\x80",'
            b'"\\u003ck\\u0026\\u003e":"\\n\\t\\u0001"}}\n'
        ]
        task.cancel()
        await settle()

    run(main)


def test_response_frames_are_go_escaped() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def returns(request: dict[str, Any]) -> Any:
            return {"a<b": "x>y & z\u2029"}

        async def raises(request: dict[str, Any]) -> None:
            raise ValueError("<script>&\u2028")

        conn.set_handler("returns", returns)
        conn.set_handler("raises", raises)
        conn.handle_frame(request_line("e1", "returns"))
        conn.handle_frame(request_line("e2", "raises"))
        conn.handle_frame(request_line("e3", "<nope>"))
        await settle()
        assert sorted(out) == sorted(
            [
                b'{"type":"control_response","response":{"subtype":"success","request_id":"e1",'
                b'"response":{"a\\u003cb":"x\\u003ey \\u0026 z\\u2029"}}}\n',
                b'{"type":"control_response","response":{"subtype":"error","request_id":"e2",'
                b'"error":"\\u003cscript\\u003e\\u0026\\u2028"}}\n',
                b'{"type":"control_response","response":{"subtype":"error","request_id":"e3",'
                b'"error":"Unsupported control request subtype: \\u003cnope\\u003e"}}\n',
            ]
        )

    run(main)


def test_request_ids_are_go_escaped_when_written_back() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        assert conn.handle_frame(request_line("<id&>", "nope")) is True
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error",'
            b'"request_id":"\\u003cid\\u0026\\u003e",'
            b'"error":"Unsupported control request subtype: nope"}}\n'
        ]

    run(main)


# -- nothing escapes handle_frame; request raises ControlError for what it is told -----


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _cyclic() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


class _Opaque:
    pass


UNENCODABLE = [
    pytest.param({1, 2}, id="set"),
    pytest.param({"a": frozenset()}, id="nested-frozenset"),
    pytest.param(float("nan"), id="nan"),
    pytest.param({"x": float("inf")}, id="inf"),
    pytest.param([float("-inf")], id="-inf"),
    pytest.param({(1,): 2}, id="tuple-key"),
    pytest.param({1.5: "a"}, id="float-key"),
    pytest.param({True: 1}, id="bool-key"),
    pytest.param({None: 1}, id="none-key"),
    pytest.param({1: "a", "1": "b"}, id="int-key-clash"),
    pytest.param(_Opaque(), id="object"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(_cyclic(), id="cycle"),
    pytest.param(_deep(100_000), id="deep"),
    pytest.param({"t": "\udc00"}, id="lone-surrogate"),
    pytest.param({"\ud800": 1}, id="lone-surrogate-key"),
]


def assert_go_frame(frame: bytes) -> Any:
    """One line of strict JSON (UTF-8, no NaN), with nothing Go would have escaped."""
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    text = frame.decode("utf-8")  # strict: a lone surrogate does not encode
    for char in "<>&\u2028\u2029":
        assert char not in text
    value = json.loads(text, parse_constant=_no_constant)
    assert isinstance(value, dict)
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        compact = compact.replace(char, f"\\u{ord(char):04x}")
    assert compact + "\n" == text  # compact, keys in the order written
    return value


def _no_constant(name: str) -> Any:
    raise AssertionError(f"not JSON: {name}")


@pytest.mark.parametrize("result", UNENCODABLE)
def test_a_result_that_does_not_encode_gets_an_error_response(result: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        out: list[bytes] = []
        conn = Conn(out.append)

        async def bad(request: dict[str, Any]) -> Any:
            return result

        conn.set_handler("bad", bad)
        assert conn.handle_frame(request_line("b1", "bad")) is True
        await settle()
        gc.collect()
        await settle()
        assert errors == []
        assert len(out) == 1
        response = assert_go_frame(out[0])["response"]
        assert response["subtype"] == "error" and response["request_id"] == "b1"
        assert response["error"].startswith(
            "Control handler for bad returned a value that does not encode: "
        )

    run(main)


def test_an_exception_whose_str_fails_still_gets_an_error_response() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def handler(request: dict[str, Any]) -> None:
            raise Unprintable

        conn.set_handler("u", handler)
        conn.handle_frame(request_line("u1", "u"))
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":"u1",'
            b'"error":"Unprintable"}}\n'
        ]

    run(main)


def test_a_handler_that_is_not_async_gets_an_error_response() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        conn.set_handler("sync", lambda request: {"not": "awaitable"})  # type: ignore[arg-type,return-value]
        conn.handle_frame(request_line("s1", "sync"))
        await settle()
        response = assert_go_frame(out[0])["response"]
        assert response["subtype"] == "error" and response["request_id"] == "s1"

    run(main)


def test_a_request_arriving_where_no_loop_runs_is_answered_with_an_error() -> None:
    out: list[bytes] = []
    conn = Conn(out.append)

    async def handler(request: dict[str, Any]) -> Any:
        raise AssertionError("not called")

    conn.set_handler("x", handler)
    assert conn.handle_frame(request_line("n1", "x")) is True
    assert conn.handle_frame(line({"type": "control_cancel_request", "request_id": "n1"}))
    assert conn.handle_frame(success_line("req_1", {}))
    assert out == [
        b'{"type":"control_response","response":{"subtype":"error","request_id":"n1",'
        b'"error":"control: cannot run the x handler: no running event loop"}}\n'
    ]


def test_frames_for_a_closed_loop_never_raise() -> None:
    """A request (and a handler) left pending on a loop that has been closed since."""
    out: list[bytes] = []
    conn = Conn(out.append)

    async def slow(request: dict[str, Any]) -> Any:
        await asyncio.sleep(10)

    conn.set_handler("slow", slow)
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda _loop, context: None)  # the tasks die pending
    pending = [loop.create_task(conn.request("x")) for _ in range(2)]
    loop.call_soon(conn.handle_frame, request_line("h1", "slow"))
    loop.run_until_complete(asyncio.sleep(0.01))
    assert len(out) == 2  # the two requests; the handler sleeps
    loop.close()
    assert conn.handle_frame(success_line("req_1", {"late": True})) is True
    assert conn.handle_frame(line({"type": "control_cancel_request", "request_id": "h1"}))
    conn.close()  # req_2 and any handler left
    assert conn.closed
    del pending
    gc.collect()


UNENCODABLE_PARAMS = [
    pytest.param("x", {"s": {1}}, id="set"),
    pytest.param("x", {(1,): 2}, id="tuple-key"),
    pytest.param("x", {1.5: 2}, id="float-key"),
    pytest.param("x", {"f": float("nan")}, id="nan"),
    pytest.param("x", {"f": [float("inf")]}, id="inf"),
    pytest.param("x", {"o": _Opaque()}, id="object"),
    pytest.param("x", {"d": _deep(100_000)}, id="deep"),
    pytest.param("x", {"c": _cyclic()}, id="cycle"),
    pytest.param("x", {"t": "\udfff"}, id="lone-surrogate"),
    pytest.param("x\ud800", None, id="lone-surrogate-subtype"),
    pytest.param(5, None, id="int-subtype"),
    pytest.param(None, {}, id="none-subtype"),
    pytest.param("x", ["a"], id="list-params"),
    pytest.param("x", 0, id="int-params"),
]


@pytest.mark.parametrize(("subtype", "params"), UNENCODABLE_PARAMS)
def test_a_request_that_does_not_encode_raises_control_encode_error(
    subtype: Any, params: Any
) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        with pytest.raises(ControlEncodeError) as info:
            await conn.request(subtype, params)
        assert isinstance(info.value, ControlError) and isinstance(info.value, TypeError)
        assert info.value.message == str(info.value) and info.value.message.startswith("control")
        assert out == []
        assert conn.handle_frame(success_line("req_1", {})) is True  # nothing left pending
        # The Conn still works.
        task = asyncio.create_task(conn.request("ok"))
        await settle()
        conn.handle_frame(success_line(ids_of(out)[0], [1]))
        assert await task == [1]

    run(main)


def test_a_request_where_no_loop_runs_raises_control_error() -> None:
    out: list[bytes] = []
    conn = Conn(out.append)
    coroutine = conn.request("x")
    with pytest.raises(ControlError, match="running asyncio event loop"):
        coroutine.send(None)
    assert out == []


# -- lines that are not Go's JSON, or not UTF-8 -----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        b'{"type":"control_cancel_request","request_id":"r1","x":NaN}',
        '{"type":"control_cancel_request","x":Infinity}',
        b'{"type":"control_response","response":{"request_id":"req_1","n":-Infinity}}',
        json.dumps({"type": "control_cancel_request"}).encode("utf-16"),
        json.dumps({"type": "control_cancel_request"}).encode("utf-32"),
        json.dumps({"type": "control_cancel_request"}).encode("utf-16-le"),
        b"\xef\xbb\xbf" + json.dumps({"type": "control_cancel_request"}).encode(),
        b'{"type":"control_request\xff","request_id":"r1","request":{"subtype":"x"}}',
        None,
        42,
        ["control_request"],
    ],
)
def test_lines_go_would_not_decode_are_not_control_frames(text: Any) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        assert conn.handle_frame(text) is False
        await settle()
        assert out == []

    run(main)


def test_bytes_that_are_not_utf8_in_a_control_frame_are_refused() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)

        async def known(request: dict[str, Any]) -> Any:
            raise AssertionError("not called")

        conn.set_handler("known", known)
        frame = b'{"type":"control_request","request_id":"b1","request":{"subtype":"known",'
        assert conn.handle_frame(frame + b'"t":"\xff\xfe"}}') is True
        assert conn.handle_frame(frame + b'"t":"\xed\xa0\x80"}}') is True  # an encoded surrogate
        bad_id = b'{"type":"control_request","request_id":"\xc3","request":{"subtype":"known"}}'
        assert conn.handle_frame(bad_id) is True
        await settle()
        expected = (
            b'{"type":"control_response","response":{"subtype":"error","request_id":"b1",'
            b'"error":"control: invalid string (bytes that are not UTF-8)"}}\n'
        )
        assert out == [
            expected,
            expected,
            expected.replace(b'"b1"', b"null"),  # an id that cannot be written back
        ]

        task = asyncio.create_task(conn.request("x"))
        await settle()
        response = b'{"type":"control_response","response":{"subtype":"success",'
        assert conn.handle_frame(response + b'"request_id":"req_1","response":"\x80"}}') is True
        with pytest.raises(ControlError) as info:
            await task
        assert info.value.message == NOT_UTF8

    run(main)


def test_bytearray_and_memoryview_lines_are_read_as_bytes() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        assert conn.handle_frame(bytearray(request_line("a1", "nope"))) is True
        assert conn.handle_frame(memoryview(request_line("a2", "nope"))) is True
        await settle()
        assert ids_of(out) == ["a1", "a2"]

    run(main)


# -- properties ----------------------------------------------------------------------

_SPECIAL = st.sampled_from(list('<>&"\\\n\t\x00\x1f\x7f\u2028\u2029é\U0001f600'))
_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
TEXT = st.text(st.one_of(st.characters(), _SPECIAL, _SURROGATES), max_size=6)
"""Any str, lone surrogates and what Go escapes included."""
CLEAN_TEXT = st.text(st.one_of(st.characters(codec="utf-8"), _SPECIAL), max_size=6)
"""Any str that UTF-8 can encode."""

_NAMES = st.sampled_from(
    [
        "control_request",
        "control_response",
        "control_cancel_request",
        "success",
        "error",
        "echo",
        "value",
        "raises",
        "slow",
        "nope",
        "r1",
        "req_1",
        "req_2",
    ]
)
_KEYS = st.sampled_from(["type", "request_id", "subtype", "request", "response", "error"])
_LEAVES = st.one_of(
    _NAMES,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    _LEAVES,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_KEYS | TEXT, children, max_size=4)
    ),
    max_leaves=12,
)
"""JSON values, keys and strings drawn among the channel's own names."""
CLEAN_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | CLEAN_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(CLEAN_TEXT, children, max_size=3)
    ),
    max_leaves=8,
)
"""JSON values that UTF-8 can encode."""

_REQUEST_BODY = st.fixed_dictionaries(
    {}, optional={"subtype": _NAMES | JSON, "x": JSON, "request_id": JSON}
)
_RESPONSE_BODY = st.fixed_dictionaries(
    {},
    optional={
        "subtype": st.sampled_from(["success", "error"]) | JSON,
        "request_id": st.sampled_from(["req_1", "req_2", "req_3"]) | JSON,
        "response": JSON,
        "error": JSON,
    },
)
FRAMES = st.fixed_dictionaries(
    {},
    optional={
        "type": _NAMES | JSON,
        "request_id": _NAMES | JSON,
        "request": _REQUEST_BODY | JSON,
        "response": _RESPONSE_BODY | JSON,
        "subtype": JSON,
    },
)
"""JSON objects with the control keys, each of any JSON type or a likely value."""


def _as_line(value: Any, ascii_only: bool, as_bytes: bool) -> bytes | str:
    text = json.dumps(value, ensure_ascii=ascii_only)
    # A lone surrogate, unescaped, as the three bytes UTF-8 would give it (not UTF-8).
    return text.encode("utf-8", "surrogatepass") if as_bytes else text


def lines_of(values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes | str]:
    return st.builds(_as_line, values, st.booleans(), st.booleans())


_DEEP = st.builds(
    lambda depth, opener: (
        '{"type":"control_request","request_id":"deep","request":{"subtype":"echo","x":'
        + opener * depth
        + ("]" if opener == "[" else "}") * depth
        + "}}"
    ),
    st.integers(1, 3000),
    st.sampled_from(["[", '{"a":']),
)
LINES = st.one_of(
    lines_of(FRAMES),
    lines_of(JSON),
    st.text(),
    st.binary(),
    _DEEP,
)
"""Any line: frames and JSON of every shape, text, bytes, nesting past the decoder."""

RESULTS = st.one_of(
    JSON,
    st.sampled_from(
        [{1, 2}, float("nan"), float("inf"), {(1,): 2}, {1.5: 0}, _Opaque(), b"x", _cyclic()]
    ),
    st.dictionaries(st.integers(), JSON, max_size=2),
)
"""What a handler may return: JSON values, and values the encoder must refuse."""


def install_handlers(conn: Conn, results: list[Any], messages: list[str]) -> None:
    async def echo(request: dict[str, Any]) -> Any:
        return request

    async def value(request: dict[str, Any]) -> Any:
        return results.pop() if results else None

    async def raises(request: dict[str, Any]) -> None:
        raise ValueError(messages.pop() if messages else "")

    async def slow(request: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return request.get("x")

    for name, handler in (("echo", echo), ("value", value), ("raises", raises), ("slow", slow)):
        conn.set_handler(name, handler)


@given(
    lines=st.lists(LINES, max_size=6),
    results=st.lists(RESULTS, max_size=3),
    messages=st.lists(TEXT, max_size=2),
)
def test_handle_frame_never_raises_and_writes_only_go_frames(
    lines: list[bytes | str], results: list[Any], messages: list[str]
) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        install_handlers(conn, list(results), list(messages))
        pending = [asyncio.ensure_future(conn.request("q")) for _ in range(2)]  # req_1, req_2
        await settle(2)
        for text in lines:
            assert conn.handle_frame(text) in (True, False)
        await settle()
        for frame in out:
            assert_go_frame(frame)
        conn.close()
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for outcome in outcomes:
            assert not isinstance(outcome, BaseException) or isinstance(outcome, ControlError)

    run(main)
    # And where no loop runs at all.
    out: list[bytes] = []
    conn = Conn(out.append)
    install_handlers(conn, list(results), list(messages))
    for text in lines:
        assert conn.handle_frame(text) in (True, False)
    for frame in out:
        assert_go_frame(frame)


_REQUEST_FRAMES = st.builds(
    lambda request_id, request: {
        "type": "control_request",
        "request_id": request_id,
        "request": request,
    },
    st.sampled_from(["a", "b", "<&>"]) | CLEAN_TEXT,
    st.one_of(
        st.fixed_dictionaries(
            {"subtype": st.sampled_from(["echo", "value", "raises", "slow", "nope"])},
            optional={"x": JSON},
        ),
        _REQUEST_BODY,
        JSON,
    ),
)
"""control_request frames with a request_id we can write back (no lone surrogate),
most of them for a handler."""
_NOISE = st.one_of(
    lines_of(
        st.fixed_dictionaries({"type": st.just("control_response"), "response": _RESPONSE_BODY})
    ),
    lines_of(JSON),
    st.text(max_size=10),
    st.binary(max_size=10),
)
"""Lines that are neither requests nor cancellations."""


@given(
    frames=st.lists(st.tuples(_REQUEST_FRAMES, st.booleans(), st.booleans()), max_size=6),
    noise=st.lists(_NOISE, max_size=3),
    results=st.lists(RESULTS, max_size=8),
    messages=st.lists(TEXT, max_size=3),
)
def test_every_request_with_a_string_id_gets_exactly_one_response(
    frames: list[tuple[dict[str, Any], bool, bool]],
    noise: list[bytes | str],
    results: list[Any],
    messages: list[str],
) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        install_handlers(conn, list(results), list(messages))
        expected = collections.Counter(frame["request_id"] for frame, _, _ in frames)
        lines = [_as_line(frame, ascii_only, as_bytes) for frame, ascii_only, as_bytes in frames]
        for index, text in enumerate(noise):
            lines.insert(index * 3, text)
        for text in lines:
            conn.handle_frame(text)
        await settle(20)
        responses = [assert_go_frame(frame) for frame in out]
        assert all(r["type"] == "control_response" for r in responses)
        assert collections.Counter(r["response"]["request_id"] for r in responses) == expected

    run(main)


@given(
    subtype=TEXT,
    params=st.none() | st.dictionaries(TEXT | st.integers() | _KEYS, RESULTS, max_size=4),
    payload=CLEAN_JSON,
)
def test_request_writes_one_go_frame_or_raises_control_encode_error(
    subtype: str, params: dict[Any, Any] | None, payload: Any
) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        task = asyncio.ensure_future(conn.request(subtype, params))
        await settle(2)
        if task.done():
            with pytest.raises(ControlEncodeError):
                task.result()
            assert out == []
            return
        assert len(out) == 1
        frame = assert_go_frame(out[0])
        body = {"subtype": subtype, **{k: v for k, v in (params or {}).items() if k != "subtype"}}
        assert frame == {
            "type": "control_request",
            "request_id": "req_1",
            "request": json.loads(json.dumps(body)),
        }
        assert conn.handle_frame(success_line("req_1", payload)) is True
        assert await task == payload

    run(main)


# -- any number, any nesting: one answer, in the simulator's words ---------------------

_PYTHON_WORDS = ("sys.set_int_max_str_digits", "Exceeds the limit", "recursion", "Traceback")


def _body(fault: bytes) -> bytes:
    return (
        b'{"type":"control_request","request_id":"n1","request":{"subtype":"known","fault":'
        + fault
        + b"}}"
    )


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        pytest.param(b"9" * 5000, NUMBER_OUT_OF_RANGE, id="int-5000-digits"),
        pytest.param(b"-" + b"9" * 400, NUMBER_OUT_OF_RANGE, id="int-400-digits"),
        pytest.param(b"1e400", NUMBER_OUT_OF_RANGE, id="float-1e400"),
        pytest.param(b"[-1e999]", NUMBER_OUT_OF_RANGE, id="float-minus-1e999"),
        pytest.param(b"[" * 63 + b"]" * 63, TOO_DEEP, id="level-65"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, TOO_DEEP, id="nested-100000"),
        pytest.param(b'{"a":' * 5000 + b"1" + b"}" * 5000, TOO_DEEP, id="objects-5000"),
        pytest.param(b'"\\udfff"', INVALID_STRING, id="lone-surrogate"),
        pytest.param(b'"\xff"', NOT_UTF8, id="not-utf8"),
    ],
)
def test_a_request_whatever_it_holds_gets_one_error_response(fault: bytes, error: str) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        called: list[dict[str, Any]] = []

        async def known(request: dict[str, Any]) -> dict[str, Any]:
            called.append(request)
            return {}

        conn.set_handler("known", known)
        assert conn.handle_frame(_body(fault)) is True
        await settle()
        assert called == []
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":"n1",'
            b'"error":' + json.dumps(error, ensure_ascii=False).encode() + b"}}\n"
        ]
        assert not any(words in out[0].decode() for words in _PYTHON_WORDS)

    run(main)


def test_the_largest_numbers_that_fit_are_taken() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        seen: list[dict[str, Any]] = []

        async def known(request: dict[str, Any]) -> dict[str, Any]:
            seen.append(request)
            return {}

        conn.set_handler("known", known)
        big = str(int(sys.float_info.max)).encode()
        assert conn.handle_frame(_body(b"[" + big + b",-" + big + b",1.7e308,1e-400]"))
        # The frame is level 1, its request 2, the fault's outer list 3: 62 lists reach 64.
        assert conn.handle_frame(_body(b"[" * 62 + b"]" * 62).replace(b'"n1"', b'"n2"'))
        await settle()
        assert [json.loads(f)["response"]["subtype"] for f in out] == ["success", "success"]
        assert seen[0]["fault"] == [int(sys.float_info.max), -int(sys.float_info.max), 1.7e308, 0.0]

    run(main)


@pytest.mark.parametrize(
    ("request_id", "written", "kind"),
    [
        (b"5", b"5", "a number"),
        (b"-2.5", b"-2.5", "a number"),
        (b"9" * 5000, b"null", "a number"),
        (b"1e400", b"null", "a number"),
        (b"null", b"null", "null"),
        (b"true", b"null", "a boolean"),
        (b"[" * 10_000 + b"]" * 10_000, b"null", "an array"),
    ],
)
def test_a_request_id_that_is_not_a_string_gets_one_error_response(
    request_id: bytes, written: bytes, kind: str
) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        frame = b'{"type":"control_request","request_id":' + request_id
        assert conn.handle_frame(frame + b',"request":{"subtype":"snapshot"}}') is True
        await settle()
        assert out == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":'
            + written
            + b',"error":"Malformed control request: request_id must be a string, got '
            + kind.encode()
            + b'"}}\n'
        ]

    run(main)


def test_a_response_holding_what_no_frame_may_fails_the_request_with_its_words() -> None:
    async def main() -> None:
        conn = Conn(lambda frame: None)
        for request_id, payload, error in (
            ("req_1", b"9" * 5000, NUMBER_OUT_OF_RANGE),
            ("req_2", b"[" * 2000 + b"]" * 2000, TOO_DEEP),
        ):
            task = asyncio.create_task(conn.request("authorize"))
            await settle()
            response = b'{"type":"control_response","response":{"subtype":"success",'
            frame = response + b'"request_id":"' + request_id.encode() + b'","response":'
            assert conn.handle_frame(frame + payload + b"}}") is True
            with pytest.raises(ControlError) as info:
                await task
            assert info.value.message == error

    run(main)


def test_a_deep_line_that_is_not_a_frame_is_passed_on() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        deep = b"[" * 100_000 + b"]" * 100_000
        assert conn.handle_frame(b'{"type":"save","params":' + deep + b"}") is False
        assert conn.handle_frame(deep) is False
        assert conn.handle_frame(b'{"type":"control_request","x":' + b"[" * 100_000) is False
        await settle()
        assert out == []

    run(main)


def test_refuse_answers_a_line_that_is_not_a_frame_once_with_a_null_id() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        conn.refuse()
        conn.refuse("control: line exceeds 1048576 bytes")
        conn.close()
        conn.refuse()  # closed: nothing
        assert [json.loads(f)["response"] for f in out] == [
            {"subtype": "error", "request_id": None, "error": NOT_A_FRAME},
            {
                "subtype": "error",
                "request_id": None,
                "error": "control: line exceeds 1048576 bytes",
            },
        ]

    run(main)


def test_calm_waits_until_fewer_requests_are_being_handled() -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        gate = asyncio.Event()

        async def held(request: dict[str, Any]) -> dict[str, Any]:
            await gate.wait()
            return {}

        conn.set_handler("held", held)
        for index in range(3):
            conn.handle_frame(request_line(f"h{index}", "held"))
        await conn.calm(4)  # 3 < 4: at once
        waiter = asyncio.create_task(conn.calm(3))
        await settle()
        assert not waiter.done() and out == []
        gate.set()
        await asyncio.wait_for(waiter, 1)
        await settle()
        assert sorted(ids_of(out)) == ["h0", "h1", "h2"]

    run(main)
