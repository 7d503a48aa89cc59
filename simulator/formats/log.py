"""A line of ``log/zread.log``.

Owns: :func:`encode_line`, the bytes one log call appends: the local time (ISO 8601 to
the second, with its offset), ``zread-sim``, the text with its line breaks turned into
spaces, and one newline, so one call is one line and lines of several processes never
interleave (the writer appends them with one ``write``).

Must not: do I/O or read the clock.
"""

from __future__ import annotations

import datetime as dt


def encode_line(when: dt.datetime, text: str) -> bytes:
    """One log line: ``<local time> zread-sim <text>\\n``."""
    stamp = when.astimezone().isoformat(timespec="seconds")
    flat = " ".join(text.rstrip("\r\n").splitlines())
    return f"{stamp} zread-sim {flat}\n".encode()
