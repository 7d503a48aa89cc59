"""A byte stream cut into command lines: what a runner does with what it reads.

Owns: :class:`LineBuffer`, which keeps at most one line's limit of a partial line and
hands over each complete line without its newline, so a runner can read any amount at
a time and a client cannot make it hold an unbounded line.

Must not: decode anything: a line goes to ``Session.feed`` as bytes.
"""

from __future__ import annotations

from simulator.core.envelope import MAX_LINE_BYTES

_LONGEST = MAX_LINE_BYTES + 1
"""The longest line kept whole: the limit, and a ``\\r`` that may come before the newline."""


class LineBuffer:
    """Splits a byte stream into command lines, never holding more than one line's limit.

    A line longer than :data:`MAX_LINE_BYTES` (a ``\\r`` before its newline not
    counted) comes out once, cut to ``MAX_LINE_BYTES + 2`` bytes (so the session can
    reject it for its length), and the rest of it, up to its newline, is skipped as it
    arrives.
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._skipping = False

    def push(self, data: bytes) -> list[bytes]:
        """Feed bytes; return the complete lines they finish, without newlines."""
        lines: list[bytes] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if not self._skipping:
                self._pending += piece
                if len(self._pending) > _LONGEST:
                    lines.append(bytes(self._pending[: _LONGEST + 1]))
                    self._pending.clear()
                    self._skipping = True
            if end < 0:
                break
            if not self._skipping:
                lines.append(bytes(self._pending))
            self._pending.clear()
            self._skipping = False
            start = end + 1
        return lines

    def finish(self) -> list[bytes]:
        """At end of input: the unterminated last line, if any."""
        rest = b"" if self._skipping else bytes(self._pending)
        self._pending.clear()
        self._skipping = False
        return [rest] if rest else []
