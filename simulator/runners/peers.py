"""A control peer on the Unix socket: its requests read with back-pressure, its answers
through a bounded outbound queue, its going away without noise.

Owns: :class:`SocketPeer`, one connection to ``--control unix:PATH`` from accept to
close.

- **Lines.** The socket carries control frames alone, one a line of at most
  :data:`~simulator.core.envelope.MAX_LINE_BYTES` (1 MiB, as stdin). Every line that
  is not blank gets exactly one answer: a request its response, and a line that is not
  a control frame, or a longer one, an error response whose request_id is null
  (:meth:`simulator.control.Conn.refuse`).
- **Back-pressure.** Before it reads the peer's next request, the peer waits while
  :data:`MAX_HANDLING` of its requests are being handled, or while more than
  :data:`OUTBOX_HIGH` bytes wait unwritten to it (then until no more than
  :data:`OUTBOX_LOW` do). Meanwhile its requests wait in the kernel's socket buffer,
  and its own writes block: a peer that never reads its responses costs the process
  at most the outbound queue, the responses of the requests being handled and one
  read (:data:`READ_SIZE`), however much it sends. The session, the other peers and
  stdin go on.
- **Going away.** At the end of a peer's stream (it stopped sending), what it sent is
  still answered, then the connection closes. A peer that resets the connection, even
  with requests pending, ends quietly: its Conn is closed (its requests cancelled,
  ours failed), nothing more is written to it, nothing is printed (asyncio's
  ``socket.send() raised exception.`` warnings included). One still connected when
  the run ends is closed as quietly.

Back-pressure rather than dropping the peer: a slow test harness is a normal client,
and one that reads late still gets every answer.

Must not: know the admin API (the caller's ``connect`` installs it) or the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from simulator.control import Conn, ControlClosed, Write
from simulator.core.envelope import MAX_LINE_BYTES
from simulator.core.lines import LineBuffer

OUTBOX_HIGH: Final = 256 * 1024
"""Bytes waiting unwritten to a peer past which its requests are no longer read."""

OUTBOX_LOW: Final = 64 * 1024
"""Bytes waiting unwritten to a peer below which reading its requests resumes."""

MAX_HANDLING: Final = 16
"""Requests of one peer handled at once; the next waits to be read."""

READ_SIZE: Final = 1 << 16
"""How much of a peer's stream is read at a time (and buffered before the socket's
reading pauses)."""

TOO_LONG: Final = f"control: line exceeds {MAX_LINE_BYTES} bytes"
"""The error response to a line longer than a frame may be."""

_BLANK: Final = b" \t\r\n"


class SocketPeer:
    """One peer on the control socket; :meth:`serve` runs it to its end."""

    __slots__ = ("_reader", "_writer", "conn", "gone")

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connect: Callable[[Write], Conn] = Conn,
    ) -> None:
        """``connect`` makes the peer's Conn from the function that writes to it (the
        admin API's :func:`~simulator.runners.admin.connect`)."""
        self._reader = reader
        self._writer = writer
        writer.transport.set_write_buffer_limits(high=OUTBOX_HIGH, low=OUTBOX_LOW)
        self.gone = False
        """The connection is over: nothing more is written to it."""
        self.conn = connect(self._write)

    def _write(self, data: bytes) -> None:
        if self.gone or self._writer.transport.is_closing():
            self.gone = True
            raise ControlClosed()  # a response is dropped; a request of ours fails
        self._writer.write(data)

    async def serve(self) -> None:
        """Read and answer the peer's lines until it goes away; then close."""
        lines = LineBuffer()
        try:
            while data := await self._reader.read(READ_SIZE):
                for line in lines.push(data):
                    self._take(line)
                    await self._room()
            for line in lines.finish():
                self._take(line)
            # The end of its stream: what it asked is still answered (a half-closed
            # peer reads on), then the connection closes.
            await self.conn.calm(1)
            await self._writer.drain()
        except OSError:  # reset, or lost while waiting to drain: it vanished
            pass
        except asyncio.CancelledError:
            # The run is over with the peer still connected. Ending here, not cancelled:
            # asyncio's server asks a cancelled connection task for its exception and
            # prints a traceback for the CancelledError it gets.
            pass
        finally:
            self.gone = True
            self.conn.close()
            self._writer.close()

    def _take(self, line: bytes) -> None:
        """One line: a frame to the Conn; exactly one error response for anything else."""
        if len(line.removesuffix(b"\r")) > MAX_LINE_BYTES:
            self.conn.refuse(TOO_LONG)
        elif line.strip(_BLANK) and not self.conn.handle_frame(line):
            self.conn.refuse()

    async def _room(self) -> None:
        """Wait until the peer may send another request (the module docstring)."""
        await self.conn.calm(MAX_HANDLING)
        if self._writer.transport.get_write_buffer_size() > OUTBOX_HIGH:
            await self._writer.drain()  # until OUTBOX_LOW; ConnectionError if it vanished
