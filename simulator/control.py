"""The stream-json control channel: request/response frames sharing the stdio pipes.

Owns: the control-frame multiplexer (`Conn`), i.e. classifying a line as a control
frame, matching responses to our pending requests by id, dispatching incoming
requests to registered handlers, honouring control_cancel_request, and encoding the
three frame shapes byte for byte.

Must not: know about processes, sessions, events or commands; read or sleep; decode
anything that is not a control frame (`handle_frame` returns False and the caller
passes the line on). It is a pure state machine over one `write(frame)` function.

Frames (compact JSON, one line each, key order as written):
    {"type":"control_request","request_id":ID,"request":{"subtype":S,...}}
    {"type":"control_response","response":{"subtype":"success","request_id":ID,"response":{...}}}
    {"type":"control_response","response":{"subtype":"error","request_id":ID,"error":"..."}}
    {"type":"control_cancel_request","request_id":ID}

Request ids are "req_<n>" from a per-Conn counter, so they are unique per Conn.

A line is a control frame when it is a JSON object whose "type" is one of the three
strings above; any other "type" (a list, a number, another string) is not. JSON may
spell strings UTF-8 cannot encode (a lone surrogate such as "\\ud800"): a frame holding
one is refused, as a request with an `INVALID_STRING` error response (ignored when the
request_id itself holds it: nobody to answer), as a response by failing our request
with `INVALID_STRING`. Every frame written encodes as UTF-8.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["INVALID_STRING", "Conn", "ControlClosed", "ControlError", "Handler", "Write"]

Write = Callable[[bytes], None]
Handler = Callable[[dict[str, Any]], Awaitable[Any]]

_CONTROL_TYPES = frozenset({"control_request", "control_response", "control_cancel_request"})
_SURROGATE = re.compile("[\ud800-\udfff]")

INVALID_STRING = "control: invalid string (lone surrogate)"


class ControlError(Exception):
    """An error control_response (or a local failure of a control request)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ControlClosed(ControlError):
    """A request made on, or failed by, a closed Conn."""

    def __init__(self, message: str = "control: connection closed") -> None:
        super().__init__(message)


def _encode(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _has_lone_surrogate(value: object) -> bool:
    """Whether a string anywhere in decoded JSON (keys included) holds a lone surrogate."""
    stack = [value]
    while stack:  # no recursion: json.loads accepts nesting deeper than a walk could take
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class Conn:
    """One control-channel multiplexer emitting frames through `write`."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._handlers: dict[str, Handler] = {}
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def set_handler(self, subtype: str, handler: Handler) -> None:
        """Register the responder for incoming requests of `subtype`."""
        self._handlers[subtype] = handler

    # -- outgoing requests --------------------------------------------------

    async def request(self, subtype: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one control request and return the success payload of its response.

        Raises TypeError (nothing written) if params is not a dict or None or does
        not encode, ControlError on an error response, ControlClosed (or the close
        error) if the Conn is or becomes closed, and whatever `write` raised.
        `subtype` wins over a "subtype" key in params.
        """
        if params is not None and not isinstance(params, dict):
            raise TypeError(f"control params must be a dict or None, not {type(params).__name__}")
        if self._closed:
            raise ControlClosed()
        request_id = f"req_{next(self._ids)}"
        body = {"subtype": subtype, **{k: v for k, v in (params or {}).items() if k != "subtype"}}
        try:
            frame = _encode({"type": "control_request", "request_id": request_id, "request": body})
        except ValueError as exc:  # a circular reference, a lone surrogate
            raise TypeError(f"control request does not encode: {exc}") from None
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future  # before write: the peer may answer at once
        try:
            self._write(frame)
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        try:
            return await future
        except asyncio.CancelledError:
            if self._pending.pop(request_id, None) is not None and not self._closed:
                self._send({"type": "control_cancel_request", "request_id": request_id})
            raise
        finally:
            self._pending.pop(request_id, None)

    # -- incoming frames ----------------------------------------------------

    def handle_frame(self, line: bytes | str) -> bool:
        """Route one line; False means it is not a control frame (pass it on)."""
        try:
            frame = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(frame, dict):
            return False
        kind = frame.get("type")
        if not isinstance(kind, str) or kind not in _CONTROL_TYPES:
            return False
        if self._closed:
            return True
        if kind == "control_request":
            self._on_request(frame)
        elif kind == "control_response":
            self._on_response(frame.get("response"))
        else:
            request_id = frame.get("request_id")
            task = self._inflight.pop(request_id, None) if isinstance(request_id, str) else None
            if task is not None:
                task.cancel()
        return True

    def _on_request(self, frame: dict[str, Any]) -> None:
        request_id = frame.get("request_id")
        if not isinstance(request_id, str) or _SURROGATE.search(request_id):
            return  # nobody to answer (an id we cannot write back is no id)
        if _has_lone_surrogate(frame):
            self._respond_error(request_id, INVALID_STRING)
            return
        request = frame.get("request")
        subtype = request.get("subtype") if isinstance(request, dict) else None
        if not isinstance(request, dict) or not isinstance(subtype, str):
            self._respond_error(request_id, "Malformed control request: missing request.subtype")
            return
        if request_id in self._inflight:
            self._respond_error(request_id, f"Duplicate control request_id: {request_id}")
            return
        handler = self._handlers.get(subtype)
        if handler is None:
            self._respond_error(request_id, f"Unsupported control request subtype: {subtype}")
            return
        task = asyncio.get_running_loop().create_task(
            self._run_handler(request_id, subtype, handler, request)
        )
        self._inflight[request_id] = task

    async def _run_handler(
        self, request_id: str, subtype: str, handler: Handler, request: dict[str, Any]
    ) -> None:
        try:
            result = await handler(request)
        except asyncio.CancelledError:
            return  # cancelled by the peer or by close(): no response at all
        except Exception as exc:
            error: str | None = _error_text(exc)
        else:
            error = None
            if result is None:
                result = {}
            elif not isinstance(result, dict):
                error = f"Control handler for {subtype} returned {type(result).__name__}, not dict"
        if self._inflight.get(request_id) is not asyncio.current_task():
            return  # cancelled (even if the handler swallowed it) or closed meanwhile
        del self._inflight[request_id]
        if error is not None:
            self._respond_error(request_id, error)
            return
        response = {"subtype": "success", "request_id": request_id, "response": result}
        try:
            payload = _encode({"type": "control_response", "response": response})
        except (TypeError, ValueError) as exc:
            self._respond_error(request_id, _error_text(exc))
            return
        self._send_bytes(payload)

    def _on_response(self, response: object) -> None:
        if not isinstance(response, dict) or not isinstance(response.get("request_id"), str):
            return
        future = self._pending.pop(response["request_id"], None)
        if future is None or future.done():
            return
        if _has_lone_surrogate(response):
            future.set_exception(ControlError(INVALID_STRING))
            return
        if response.get("subtype") == "success":
            payload = response.get("response", {})
            if isinstance(payload, dict):
                future.set_result(payload)
            else:
                future.set_exception(ControlError("Malformed control response: payload not object"))
            return
        error = response.get("error")
        if not isinstance(error, str):
            error = "control request failed" if error is None else json.dumps(error)
        future.set_exception(ControlError(error))

    # -- closing and writing ------------------------------------------------

    def close(self, err: BaseException | None = None) -> None:
        """Fail pending requests with err (ControlClosed if None), cancel handlers."""
        if self._closed:
            return
        self._closed = True
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(err if err is not None else ControlClosed())
        inflight, self._inflight = self._inflight, {}
        for task in inflight.values():
            task.cancel()

    def _respond_error(self, request_id: str, message: str) -> None:
        if _SURROGATE.search(message):  # a handler's text: written escaped, never unencodable
            message = message.encode("utf-8", "backslashreplace").decode()
        response = {"subtype": "error", "request_id": request_id, "error": message}
        self._send({"type": "control_response", "response": response})

    def _send(self, frame: dict[str, Any]) -> None:
        self._send_bytes(_encode(frame))

    def _send_bytes(self, payload: bytes) -> None:
        try:
            self._write(payload)
        except Exception:  # the peer is gone; a response has nobody left to fail
            return
