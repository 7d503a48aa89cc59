"""A blocking client of the admin API, for tests that steer a simulator they did not start.

Owns: :class:`Remote`, which connects to a simulator started with
``--control unix:PATH`` (or ``ZREAD_SIM_CONTROL=unix:PATH``), sends control requests
and waits for their responses: ``snapshot()``, ``inject(failure=...)`` or
``inject(fault=...)`` (answered with the entry's id), ``faults()``, ``remove(id)``,
``reset()``, ``set_timing(name, timing)``, ``set_speed(x)``, ``pause()``, ``resume()``,
``quit()``. It can
also answer the simulator's own requests, login's ``authorize``, through
``on_authorize``.

Written on plain sockets rather than on ``simulator.control.Conn`` so a synchronous
test needs no event loop; the frames are the same.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from simulator.errors import MisuseError

__all__ = ["Remote", "RemoteError"]


class RemoteError(MisuseError):
    """The simulator answered with an error, or could not be reached in time."""


class Remote:
    """One connection to a simulator's admin API over a Unix socket."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 10.0,
        on_authorize: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self.on_authorize = on_authorize
        """Called with login's ``authorize`` request; returns whether to approve."""
        self.cancelled: list[str] = []
        """Request ids the simulator cancelled (``control_cancel_request``)."""
        self._ids = itertools.count(1)
        self._sock: socket.socket | None = None
        self._buffer = b""

    def connect(self) -> Remote:
        """Connect, waiting up to ``timeout`` for the simulator to start listening."""
        deadline = time.monotonic() + self.timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
            except OSError as err:
                sock.close()
                if time.monotonic() > deadline:
                    raise RemoteError(f"no simulator listens on {self.path}: {err}") from None
                time.sleep(0.02)
                continue
            self._sock = sock
            return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Remote:
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the admin API ---------------------------------------------------------------

    def request(self, subtype: str, **params: Any) -> dict[str, Any]:
        """Send one control request; its success payload, or RemoteError."""
        if self._sock is None:
            self.connect()
        request_id = f"remote_{next(self._ids)}"
        frame = {
            "type": "control_request",
            "request_id": request_id,
            "request": {"subtype": subtype, **params},
        }
        self._send(frame)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._read_frame(deadline)
            if message.get("type") == "control_response":
                response = message.get("response", {})
                if response.get("request_id") != request_id:
                    continue
                if response.get("subtype") == "success":
                    return dict(response.get("response") or {})
                raise RemoteError(str(response.get("error", "control request failed")))
            self._answer(message)

    def snapshot(self) -> dict[str, Any]:
        return self.request("snapshot")

    def inject(
        self,
        *,
        failure: dict[str, Any] | None = None,
        fault: dict[str, Any] | None = None,
        http: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Inject one failure, stdio fault or HTTP fault (a scenario's entry); the answer
        names it (``injected``) and gives its ``id``."""
        given = {k: v for k, v in (("failure", failure), ("fault", fault), ("http", http)) if v}
        if len(given) != 1:
            raise ValueError("inject takes exactly one of failure=, fault= and http=")
        return self.request("inject", **given)

    def faults(self) -> list[dict[str, Any]]:
        """Every failure and fault still to come, each with its ``id``, ``kind``,
        ``source``, ``where``, ``left`` and ``fired``."""
        return list(self.request("faults")["faults"])

    def remove(self, entry_id: str) -> dict[str, Any]:
        """Remove the failure or fault ``entry_id`` (an id :meth:`faults` lists)."""
        return self.request("remove", id=entry_id)

    def reset(self) -> dict[str, Any]:
        """Remove every failure and fault, the scenario's included."""
        return self.request("reset")

    def set_timing(self, name: str, timing: dict[str, Any]) -> dict[str, Any]:
        """Draw the delay ``name`` from ``timing`` (as in a scenario's ``[timing]``, e.g.
        ``{"fixed": 5.0}``) from now on; timers already pending keep their deadline."""
        return self.request("set_timing", name=name, timing=timing)

    def set_speed(self, speed: float) -> dict[str, Any]:
        return self.request("set_speed", speed=speed)

    def pause(self) -> dict[str, Any]:
        return self.request("pause")

    def resume(self) -> dict[str, Any]:
        return self.request("resume")

    def quit(self) -> dict[str, Any]:
        return self.request("quit")

    def serve(self, seconds: float) -> None:
        """Answer the simulator's requests for ``seconds`` (e.g. while login waits)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self._answer(self._read_frame(deadline))
            except RemoteError:
                return

    # -- inside ------------------------------------------------------------------------

    def _answer(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "control_cancel_request":
            self.cancelled.append(str(message.get("request_id")))
            return
        if kind != "control_request":
            return
        request = message.get("request", {})
        request_id = message.get("request_id")
        if request.get("subtype") == "authorize" and self.on_authorize is not None:
            approve = bool(self.on_authorize(request))
            response = {
                "subtype": "success",
                "request_id": request_id,
                "response": {"approve": approve},
            }
        else:
            error = f"Unsupported control request subtype: {request.get('subtype')}"
            response = {"subtype": "error", "request_id": request_id, "error": error}
        with contextlib.suppress(RemoteError):  # gone meanwhile: what it sent is still read
            self._send({"type": "control_response", "response": response})

    def _send(self, frame: dict[str, Any]) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
        except OSError as err:
            raise RemoteError(f"the simulator is gone: {err.strerror or err}") from None

    def _read_frame(self, deadline: float) -> dict[str, Any]:
        assert self._sock is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RemoteError("no answer from the simulator in time")
            self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(1 << 16)
            except TimeoutError:
                raise RemoteError("no answer from the simulator in time") from None
            except OSError as err:
                raise RemoteError(f"the simulator is gone: {err.strerror or err}") from None
            if not data:
                raise RemoteError("the simulator closed the control connection")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        return message if isinstance(message, dict) else {}
