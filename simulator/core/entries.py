"""One line a client sent, as a session records it: :class:`JournalEntry`.

Owns: the entry every session (a chart's, a cassette's) records for each line it reads,
kept in its :class:`~simulator.core.transcript.Transcript`, handed to a ``--journal``
file, and printed in a test's assertion message: the line, when it came, what the
session expected then, and why it was refused, if it was. Printed (``str``, ``repr``)
or turned into JSON, any API key's value in the line is redacted
(:mod:`simulator.core.secrets`).

Must not: decide whether a line is accepted (the session does) or write anything.
"""

from __future__ import annotations

from typing import Any

import msgspec

from simulator.core.secrets import redact_line


class JournalEntry(msgspec.Struct, frozen=True):
    """One line the client sent, and what the session expected when it arrived.

    ``line`` is the line as sent; printed (``str``, ``repr``, so in an assertion
    message) any API key's value in it is redacted (:mod:`simulator.core.secrets`).
    """

    time: float
    line: bytes
    state: str
    waiting_for: tuple[str, ...]
    after_done: bool
    error: str
    """Why the line was refused (the event's ``error``), or ``""`` when accepted."""

    def as_json(self) -> dict[str, Any]:
        """The entry as plain JSON-ready data, the API key redacted: ``t`` (session
        seconds), ``line`` (text; bytes that are not UTF-8 as ``\\xNN`` escapes,
        ``backslashreplace``), ``state``, ``waiting_for``, ``after_done``, ``error``."""
        return {
            "t": self.time,
            "line": redact_line(self.line).decode("utf-8", "backslashreplace"),
            "state": self.state,
            "waiting_for": list(self.waiting_for),
            "after_done": self.after_done,
            "error": self.error,
        }

    def __repr__(self) -> str:
        return (
            f"JournalEntry(time={self.time!r}, line={redact_line(self.line)!r}, "
            f"state={self.state!r}, waiting_for={self.waiting_for!r}, "
            f"after_done={self.after_done!r}, error={self.error!r})"
        )

    def __str__(self) -> str:
        sent = redact_line(self.line).decode("utf-8", "replace")
        if len(sent) > 200:
            sent = sent[:200] + "..."
        expected = ", ".join(self.waiting_for) or "nothing (wait for the next event)"
        if self.after_done:
            expected = "nothing: the session was done"
        return (
            f"at t={self.time:.3f}s in state {self.state}: sent {sent}; "
            f"expected {expected}: {self.error}"
        )
