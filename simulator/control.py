"""The stream-json control channel: request/response frames sharing the stdio pipes.

Owns: the control-frame multiplexer (`Conn`), i.e. classifying a line as a control
frame, matching responses to our pending requests by id, dispatching incoming
requests to registered handlers, honouring control_cancel_request, and answering
every request exactly once. The bytes of a frame, both ways, are
:mod:`simulator.control_frames`'.

Must not: know about processes, sessions, events or commands; read or sleep; decode
anything that is not a control frame (`handle_frame` returns False and the caller
passes the line on). It is a pure state machine over one `write(frame)` function.

Frames (compact JSON, one line each, key order as written):
    {"type":"control_request","request_id":ID,"request":{"subtype":S,...}}
    {"type":"control_response","response":{"subtype":"success","request_id":ID,"response":V}}
    {"type":"control_response","response":{"subtype":"error","request_id":ID,"error":"..."}}
    {"type":"control_cancel_request","request_id":ID}

V is any JSON value: a handler may return a dict, list, str, number, bool or None
(written as null), and `request` returns the peer's V as decoded (`{}` when a success
response has no "response" key at all).

Request ids are "req_<n>" from a per-Conn counter, so they are unique per Conn.

Every frame goes through one encoder, written as Go's encoding/json writes it; only a
float keeps Python's spelling (`1.0` where Go writes `1`: the admin payloads promise
floats). It refuses what Go cannot marshal or JSON cannot hold: NaN and infinities,
keys other than str and int (int keys are written as their decimal text, as Go
writes map[int]T), values other than dict, list, tuple, str, int, float, bool and
None, cycles, and lone surrogates (no frame written is invalid UTF-8).

A line is a control frame when it is a JSON object whose "type" is one of the three
strings above; any other "type" (a list, a number, another string) is not, nor is a
line JSON does not allow (Python's NaN/Infinity extensions included). Bytes are
read as UTF-8 only. Whatever else a frame holds, it is decoded: a number of any
length, nesting of any depth. A frame the simulator cannot take as it is gets one
error text (`control_frames.frame_problem`'s), as a request with an error response, as a response
by failing our request with that text:

- bytes that are not UTF-8: `NOT_UTF8`;
- a number beyond what a 64-bit float holds (an integer of 4,300 digits, `1e400`):
  `NUMBER_OUT_OF_RANGE` (Go's decoder refuses them too);
- nesting deeper than `MAX_DEPTH`: `TOO_DEEP`;
- a string JSON spells but UTF-8 cannot encode (a lone surrogate such as
  "\\ud800"): `INVALID_STRING`.

A request whose request_id is not a string (a number, null, missing) gets one error
response too, its request_id written back as sent when it is a string or a number
that fits, null otherwise. A line that is not a control frame at all can be answered
with `refuse`, by a transport that carries nothing else (a socket). `calm` lets a
transport wait, before it reads a peer's next request, until few of its requests
are being handled (back-pressure: :mod:`simulator.runners.peers`).

`handle_frame` never raises, whatever the line: a handler that raises, or returns a
value the encoder refuses, gets an error response for its request id; so does a
request arriving where no event loop runs to call its handler; a frame for a loop
closed since is dropped. `request` raises only `ControlError`s for its caller's
mistakes and the peer's answers (`ControlEncodeError`, also a TypeError, when subtype
or params cannot be written, and nothing is written), with two exceptions, failures
of the transport it was given: the error passed to `close(err)`, and whatever
`write` raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from simulator.control_frames import (
    CONTROL_TYPES,
    INVALID_STRING,
    MAX_DEPTH,
    NOT_A_FRAME,
    NOT_UTF8,
    NUMBER_OUT_OF_RANGE,
    TOO_DEEP,
    Unencodable,
    decode,
    encode,
    error_text,
    has_surrogate,
    id_back,
    kind_of,
)

__all__ = [
    "INVALID_STRING",
    "MAX_DEPTH",
    "NOT_A_FRAME",
    "NOT_UTF8",
    "NUMBER_OUT_OF_RANGE",
    "TOO_DEEP",
    "Conn",
    "ControlClosed",
    "ControlEncodeError",
    "ControlError",
    "Handler",
    "Write",
]

Write = Callable[[bytes], None]
Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class ControlError(Exception):
    """An error control_response (or a local failure of a control request)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ControlClosed(ControlError):
    """A request made on, or failed by, a closed Conn."""

    def __init__(self, message: str = "control: connection closed") -> None:
        super().__init__(message)


class ControlEncodeError(ControlError, TypeError):
    """A request whose subtype or params cannot be written as a frame; nothing was
    written. Also a TypeError, which is what `request` raised for it before."""


class Conn:
    """One control-channel multiplexer emitting frames through `write`."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._handlers: dict[str, Handler] = {}
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def set_handler(self, subtype: str, handler: Handler) -> None:
        """Register the responder for incoming requests of `subtype`.

        It returns the success payload: any value the encoder writes (a dict, list,
        str, number, bool, or None for null); raising, or returning a value the
        encoder refuses, answers with an error response instead."""
        self._handlers[subtype] = handler

    # -- outgoing requests --------------------------------------------------

    async def request(self, subtype: str, params: dict[str, Any] | None = None) -> Any:
        """Send one control request and return the success payload of its response:
        any JSON value, as decoded (`{}` when the response carries none).

        Raises ControlEncodeError (a ControlError and a TypeError; nothing written)
        if subtype is not a str, params is not a dict or None, or either does not
        encode; ControlError on an error response, or when no event loop runs;
        ControlClosed if the Conn is or becomes closed (or the error given to
        `close`); and whatever `write` raised. `subtype` wins over a "subtype" key
        in params.
        """
        if not isinstance(subtype, str):
            raise ControlEncodeError(f"control subtype must be a str, not {type(subtype).__name__}")
        if params is not None and not isinstance(params, dict):
            raise ControlEncodeError(
                f"control params must be a dict or None, not {type(params).__name__}"
            )
        if self._closed:
            raise ControlClosed()
        request_id = f"req_{next(self._ids)}"
        try:
            extra = {k: v for k, v in (params or {}).items() if k != "subtype"}
            body = {"subtype": subtype, **extra}
            frame = encode({"type": "control_request", "request_id": request_id, "request": body})
        except Exception as exc:  # Unencodable, or a dict subclass of its own
            raise ControlEncodeError(
                f"control request does not encode: {error_text(exc)}"
            ) from None
        try:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        except RuntimeError:
            raise ControlError("control: request needs a running asyncio event loop") from None
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

    def withdraw(self) -> list[str]:
        """Withdraw every request still waiting for its response, now: its
        control_cancel_request is written before this returns (not when the waiting
        task next runs), and the waiting `request` raises CancelledError. Returns the
        ids withdrawn. A caller about to write its last word uses it, so that nothing
        of the channel comes after that."""
        pending, self._pending = self._pending, {}
        for request_id, future in pending.items():
            if not self._closed:
                self._send({"type": "control_cancel_request", "request_id": request_id})
            with contextlib.suppress(RuntimeError):  # "Event loop is closed"
                future.cancel()
        return list(pending)

    def abandon(self, message: str) -> list[str]:
        """Answer every request of the peer still being handled with an error response
        ``message``, now, and cancel its handler (its own answer is never written).
        Returns their ids. With `withdraw`, what a caller about to write its last word
        uses: every request is answered once, and nothing of the channel comes after."""
        inflight, self._inflight = self._inflight, {}
        for request_id, task in inflight.items():
            if not self._closed:
                self._respond_error(request_id, message)
            _cancel(task)
        return list(inflight)

    # -- incoming frames ----------------------------------------------------

    def handle_frame(self, line: bytes | bytearray | memoryview | str) -> bool:
        """Route one line; False means it is not a control frame (pass it on).

        Never raises: a request is answered (one response, an error when it is
        malformed, see the module docstring), a response or a cancellation taken or
        dropped, never the caller's problem."""
        try:
            frame, problem = decode(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(frame, dict):
            return False
        kind = frame.get("type")
        if not isinstance(kind, str) or kind not in CONTROL_TYPES:
            return False
        if self._closed:
            return True
        if kind == "control_request":
            self._on_request(frame, problem)
        elif kind == "control_response":
            self._on_response(frame.get("response"), problem)
        else:
            request_id = frame.get("request_id")
            task = self._inflight.pop(request_id, None) if isinstance(request_id, str) else None
            if task is not None:
                _cancel(task)
        return True

    def refuse(self, message: str = NOT_A_FRAME) -> None:
        """Answer a line that is not a control frame (or is too long to be one) with
        one error response whose request_id is null: for a transport that carries
        control frames alone. Nothing once closed."""
        if not self._closed:
            self._respond_error(None, message)

    async def calm(self, limit: int) -> None:
        """Return once fewer than ``limit`` of the peer's requests are being handled:
        a transport waits for it before it reads the peer's next request."""
        while True:
            running = [task for task in self._inflight.values() if not task.done()]
            if len(running) < limit:
                return
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)

    def _on_request(self, frame: dict[str, Any], problem: str) -> None:
        request_id = frame.get("request_id")
        if not isinstance(request_id, str):
            kind = "nothing" if "request_id" not in frame else kind_of(request_id)
            message = f"Malformed control request: request_id must be a string, got {kind}"
            self._respond_error(id_back(request_id), message)
            return
        if problem:
            self._respond_error(id_back(request_id), problem)
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
        runner = self._run_handler(request_id, subtype, handler, request)
        try:
            task = asyncio.get_running_loop().create_task(runner)
        except Exception as exc:  # no running loop (or a task factory that failed)
            runner.close()
            self._respond_error(request_id, f"control: cannot run the {subtype} handler: {exc}")
            return
        self._inflight[request_id] = task

    async def _run_handler(
        self, request_id: str, subtype: str, handler: Handler, request: dict[str, Any]
    ) -> None:
        try:
            result = await handler(request)
        except asyncio.CancelledError:
            return  # cancelled by the peer or by close(): no response at all
        except Exception as exc:
            error = error_text(exc)
        else:
            error = ""
        if self._inflight.get(request_id) is not asyncio.current_task():
            return  # cancelled (even if the handler swallowed it) or closed meanwhile
        del self._inflight[request_id]
        if not error:
            response = {"subtype": "success", "request_id": request_id, "response": result}
            try:
                payload = encode({"type": "control_response", "response": response})
            except Unencodable as exc:
                error = (
                    f"Control handler for {subtype} returned a value that does not encode: {exc}"
                )
            else:
                self._send_bytes(payload)
                return
        self._respond_error(request_id, error)

    def _on_response(self, response: object, problem: str) -> None:
        if not isinstance(response, dict) or not isinstance(response.get("request_id"), str):
            return
        future = self._pending.pop(response["request_id"], None)
        if future is None or future.done():
            return
        if problem:
            _settle(future, error=ControlError(problem))
        elif response.get("subtype") == "success":
            _settle(future, result=response.get("response", {}))
        else:
            error = response.get("error")
            if not isinstance(error, str):
                error = "control request failed" if error is None else json.dumps(error)
            _settle(future, error=ControlError(error))

    # -- closing and writing ------------------------------------------------

    def close(self, err: BaseException | None = None) -> None:
        """Fail pending requests with err (ControlClosed if None), cancel handlers."""
        if self._closed:
            return
        self._closed = True
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                _settle(future, error=err if err is not None else ControlClosed())
        inflight, self._inflight = self._inflight, {}
        for task in inflight.values():
            _cancel(task)

    def _respond_error(self, request_id: object, message: str) -> None:
        if has_surrogate(message):  # a handler's text: written escaped, never unencodable
            message = message.encode("utf-8", "backslashreplace").decode()
        response = {"subtype": "error", "request_id": request_id, "error": message}
        self._send({"type": "control_response", "response": response})

    def _send(self, frame: dict[str, Any]) -> None:
        try:
            payload = encode(frame)
        except Unencodable:  # not reached: our own frames hold only what encodes
            return
        self._send_bytes(payload)

    def _send_bytes(self, payload: bytes) -> None:
        try:
            self._write(payload)
        except Exception:  # the peer is gone; a response has nobody left to fail
            return


def _settle(
    future: asyncio.Future[Any], *, result: object = None, error: BaseException | None = None
) -> None:
    """Complete a pending request's future; its loop may be closed meanwhile (then
    the state is set, and only waking its waiter fails: nobody is left to wake)."""
    with contextlib.suppress(RuntimeError):  # "Event loop is closed"
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel a handler's task; its loop may be closed meanwhile (nothing left to run)."""
    with contextlib.suppress(RuntimeError):  # "Event loop is closed"
        task.cancel()
