"""Frame a JSON payload so it survives a stream merged with diagnostics.

A port of the Go package ``clijson``. A command run with ``--json`` usually has
stdout and stderr merged into one buffer, so any warning or banner breaks a
reader that expects the whole buffer to be JSON. This module owns the wire
format that fixes that: ``emit`` brackets the document with marker lines,
``emit_chunk`` writes one streamed piece of a result as one marked line, and
``extract`` / ``chunk_payload`` / ``unmarshal`` recover them from the mix.

It must do no I/O beyond the writer it is given (no printing, logging or
files), and must not change the markers: they are a wire format shared with
differently versioned readers and writers. It is written by hand because no
library does this framing; it needs only ``json`` and ``re``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

__all__ = [
    "BEGIN_MARKER",
    "CHUNK_MARKER",
    "END_MARKER",
    "FrameError",
    "NoPayloadError",
    "PayloadDecodeError",
    "TruncatedFrameError",
    "chunk_line",
    "chunk_payload",
    "emit",
    "emit_chunk",
    "extract",
    "framed",
    "unmarshal",
]

BEGIN_MARKER = "<<<cloop-json:begin>>>"
END_MARKER = "<<<cloop-json:end>>>"
CHUNK_MARKER = "<<<cloop-json:chunk>>>"

_BEGIN = BEGIN_MARKER.encode()
_END = END_MARKER.encode()
_CHUNK = CHUNK_MARKER.encode()

_HEAD_LIMIT = 200
# Characters Go's encoding/json escapes inside strings, plus lone surrogates
# (which UTF-8 cannot carry; escaping them keeps the round trip lossless).
_ESCAPE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")
_WHITESPACE = re.compile(r"\s+")


class _Writer(Protocol):
    def write(self, data: bytes, /) -> object: ...


class FrameError(ValueError):
    """No usable JSON document could be recovered from a command's output."""

    def __init__(self, message: str, output_head: str) -> None:
        super().__init__(message)
        self.output_head = output_head


class NoPayloadError(FrameError):
    """The output held neither a frame nor anything the fallback recognises."""


class TruncatedFrameError(FrameError):
    """A begin marker had no end after it, or an end marker no begin before it."""


class PayloadDecodeError(FrameError):
    """A payload was found but is not valid JSON."""

    def __init__(self, message: str, output_head: str, payload: bytes) -> None:
        super().__init__(message, output_head)
        self.payload = payload


def _marshal(obj: Any) -> bytes:
    """Compact JSON that can never contain a marker (``<`` ``>`` are escaped)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _flush(w: _Writer) -> None:
    # A buffered writer (sys.stdout.buffer) would otherwise hold a chunk back
    # until exit, defeating streaming. Flushing is still I/O on ``w`` only.
    flush = getattr(w, "flush", None)
    if callable(flush):
        flush()


def framed(payload: bytes) -> bytes:
    """The framed document around ``payload``: compact JSON with ``<`` ``>`` escaped.

    It starts with a newline, so the begin marker is on a line of its own even after
    a diagnostic that left its line unfinished.
    """
    return b"\n" + _BEGIN + b"\n" + payload + b"\n" + _END + b"\n"


def chunk_line(payload: bytes) -> bytes:
    """One chunk line carrying ``payload`` (compact JSON with ``<`` ``>`` escaped)."""
    return _CHUNK + payload + b"\n"


def emit(w: _Writer, obj: Any) -> None:
    """Write ``obj`` to ``w`` as a framed JSON document (:func:`framed`), in one write.

    The payload is marshalled before anything is written, so a value that
    cannot be serialised raises (TypeError/ValueError) and writes nothing.
    """
    w.write(framed(_marshal(obj)))
    _flush(w)


def emit_chunk(w: _Writer, obj: Any) -> None:
    """Write ``obj`` to ``w`` as one streamed chunk line, in one write call.

    No leading newline: ``chunk_payload`` finds the marker anywhere in a line,
    so a chunk after an unfinished diagnostic is still read, and a newline
    would only add an empty line to the output a person sees.
    """
    w.write(chunk_line(_marshal(obj)))
    _flush(w)


def _one_line(data: bytes, limit: int = _HEAD_LIMIT) -> str:
    text = _WHITESPACE.sub(" ", data.decode("utf-8", errors="replace")).strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _describe(head: str) -> str:
    return f'the output began: "{head}"' if head else "the output was empty"


def extract(buf: bytes) -> bytes:
    """Recover the JSON document from ``buf``, which may also hold diagnostics.

    Markers count only on a line of their own (surrounding whitespace and
    ``\\r`` allowed). The last begin marker decides: its payload runs to the
    first end marker after it; with no end after it the frame is truncated.
    End markers with no begin before them are truncation too. Without any
    marker, the span from the first ``{`` to the last ``}`` is returned, for
    writers that predate framing.
    """
    lines = buf.split(b"\n")
    begins = [i for i, line in enumerate(lines) if line.strip() == _BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == _END]
    if begins:
        start = begins[-1]
        after = [i for i in ends if i > start]
        if not after:
            head = _one_line(buf)
            raise TruncatedFrameError(
                f"clijson: begin marker with no end marker after it; {_describe(head)}", head
            )
        return b"\n".join(lines[start + 1 : after[0]]).strip()
    if ends:
        head = _one_line(buf)
        raise TruncatedFrameError(
            f"clijson: end marker with no begin marker before it; {_describe(head)}", head
        )
    first, last = buf.find(b"{"), buf.rfind(b"}")
    if first < 0 or last < first:
        head = _one_line(buf)
        raise NoPayloadError(f"clijson: no JSON payload in output; {_describe(head)}", head)
    return buf[first : last + 1].strip()


def chunk_payload(line: bytes | str) -> bytes | None:
    """The JSON a chunk line carries, or None when the line is not one.

    The marker is looked for anywhere in the line (a diagnostic may have left
    its line unfinished) and its last occurrence is used, since the payload
    cannot contain it and a diagnostic quoting it can only come first.
    """
    data = line.encode("utf-8") if isinstance(line, str) else line
    at = data.rfind(_CHUNK)
    if at < 0:
        return None
    return data[at + len(_CHUNK) :].strip()


def unmarshal(buf: bytes) -> Any:
    """Extract the payload from ``buf`` and decode it as JSON."""
    payload = extract(buf)
    try:
        return json.loads(payload)
    except ValueError as exc:  # JSONDecodeError, or UnicodeDecodeError
        head = _one_line(buf)
        message = (
            f'clijson: payload does not parse: {exc}; payload: "{_one_line(payload)}"; '
            f"{_describe(head)}"
        )
        raise PayloadDecodeError(message, head, payload) from exc
