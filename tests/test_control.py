"""Tests for simulator.control: two Conns back to back, and one Conn against a recorder."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from simulator.control import INVALID_STRING, Conn, ControlClosed, ControlError


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


# -- requests -------------------------------------------------------------------


@pytest.mark.parametrize("params", [["a"], "s", 5, ("k", 1)])
def test_bad_params_raise_type_error_before_writing(params: Any) -> None:
    async def main() -> None:
        out: list[bytes] = []
        conn = Conn(out.append)
        with pytest.raises(TypeError):
            await conn.request("x", params)
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


def test_none_result_and_missing_response_give_empty_dict() -> None:
    async def main() -> None:
        a, b, _, b_out = linked()

        async def handler(request: dict[str, Any]) -> None:
            return None

        b.set_handler("interrupt", handler)
        assert await a.request("interrupt") == {}
        assert json.loads(b_out[0])["response"]["response"] == {}

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


def test_non_dict_result_is_an_error_naming_the_type() -> None:
    async def main() -> None:
        a, b, _, _ = linked()

        async def handler(request: dict[str, Any]) -> int:
            return 42

        b.set_handler("bad", handler)
        with pytest.raises(ControlError) as info:
            await a.request("bad")
        assert "int" in info.value.message
        assert "bad" in info.value.message

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
        # No request_id string: nobody to answer, still a control frame.
        assert conn.handle_frame(line({"type": "control_request", "request": {"subtype": "x"}}))
        assert conn.handle_frame(
            line({"type": "control_request", "request_id": 7, "request": {"subtype": "x"}})
        )
        await settle()
        assert out == []
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
        assert out == []  # nobody to answer
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


def test_a_request_id_holding_a_lone_surrogate_is_ignored() -> None:
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
        assert out == []

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
        second = json.loads(out[1])["response"]
        assert second["subtype"] == "error" and "surrogates not allowed" in second["error"]

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
