"""Frame a JSON payload so it survives a stream merged with diagnostics.

A port of the Go package ``clijson``. A command run with ``--json`` usually has
stdout and stderr merged into one buffer, so any warning or banner breaks a
reader that expects the whole buffer to be JSON. This module owns the wire
format that fixes that: ``emit`` brackets the document with marker lines,
``emit_chunk`` writes one streamed piece of a result as one marked line, and
``extract`` / ``chunk_payload`` / ``unmarshal`` recover them from the mix.

It also owns the JSON both sides use, spelled as Go's ``encoding/json`` spells it
(written and read by :mod:`simulator.clijson_codec`), so a payload reads the same
whichever binary wrote it:

- Writing (``emit``, ``emit_chunk``): compact, Go's notation for floats, dict keys in
  insertion order; NaN, infinities, cycles and values JSON has no type for raise
  :class:`PayloadEncodeError`; nesting has no limit. ``framed`` and
  ``chunk_line``, which take ready-made JSON and which every path goes through,
  escape ``<`` ``>`` ``&`` U+2028 U+2029 (``\\u003c``...) as Go's
  ``json.HTMLEscape`` does: no payload can hold a marker.
- Reading (``unmarshal``): invalid UTF-8 and an escaped lone surrogate are U+FFFD;
  NaN, Infinity and numbers beyond a float are refused; nesting deeper than
  Python's recursion limit (Go allows 10000) is refused; every failure is a
  :class:`FrameError`. ``extract`` is linear in the size of its input.

Errors hang from :class:`ClijsonError`: :class:`FrameError` (nothing usable read)
and its kinds, :class:`PayloadEncodeError` (nothing written), and
:class:`ShortWriteError` (the writer took part of a write, ``io.ErrShortWrite``).

It must do no I/O beyond the writer it is given (no printing, logging or
files), and must not change the markers: they are a wire format shared with
differently versioned readers and writers. It is written by hand because no
library does this framing; it needs only the standard library and
:mod:`simulator.clijson_codec`, which is as standalone as it is.
"""

from __future__ import annotations

import codecs
import re
from collections import deque
from typing import Any, Protocol

from simulator.clijson_codec import ClijsonError, PayloadEncodeError, decode, marshal

__all__ = [
    "BEGIN_MARKER",
    "CHUNK_MARKER",
    "END_MARKER",
    "ClijsonError",
    "FrameError",
    "NoPayloadError",
    "PayloadDecodeError",
    "PayloadEncodeError",
    "ShortWriteError",
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
_HEAD_STEP = 16384
"""Bytes of output decoded at a time while quoting its head."""

_HTML_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)
"""What Go's encoding/json escapes in any JSON text it writes (json.HTMLEscape)."""

_WHITESPACE = re.compile(r"\s+")


class _Writer(Protocol):
    def write(self, data: bytes, /) -> object: ...


class FrameError(ClijsonError, ValueError):
    """No usable JSON document could be recovered from a command's output."""

    def __init__(self, message: str, output_head: str) -> None:
        super().__init__(message)
        self.output_head = output_head


class NoPayloadError(FrameError):
    """The output held neither a frame nor anything the fallback recognises, or its
    frame was empty (Go's ``ErrNoPayload``)."""


class TruncatedFrameError(FrameError):
    """A begin marker had no end after it, or an end marker no begin before it."""


class PayloadDecodeError(FrameError):
    """A payload was found but is not valid JSON (or nests too deeply to decode)."""

    def __init__(self, message: str, output_head: str, payload: bytes) -> None:
        super().__init__(message, output_head)
        self.payload = payload


class ShortWriteError(ClijsonError, OSError):
    """The writer reported writing fewer bytes than it was given, and no error
    (Go's ``io.ErrShortWrite``). The rest was not written again: the document must
    go in one write."""


# -- writing -----------------------------------------------------------------------------


def _html_escape(payload: bytes) -> bytes:
    for raw, escaped in _HTML_ESCAPES:
        payload = payload.replace(raw, escaped)
    return payload


def _write(w: _Writer, data: bytes) -> None:
    written = w.write(data)
    if isinstance(written, int) and not isinstance(written, bool) and written < len(data):
        raise ShortWriteError(f"clijson: short write: {written} of {len(data)} bytes written")
    # A buffered writer (sys.stdout.buffer) would otherwise hold a chunk back
    # until exit, defeating streaming. Flushing is still I/O on ``w`` only.
    flush = getattr(w, "flush", None)
    if callable(flush):
        flush()


def framed(payload: bytes) -> bytes:
    """The framed document around ``payload``, a JSON text.

    ``<`` ``>`` ``&`` U+2028 U+2029 in ``payload`` are escaped (``\\u003c``...), as
    Go's ``json.HTMLEscape`` does, so it cannot hold a marker; valid JSON means the
    same after. It starts with a newline, so the begin marker is on a line of its own
    even after a diagnostic that left its line unfinished.
    """
    return b"\n" + _BEGIN + b"\n" + _html_escape(bytes(payload)) + b"\n" + _END + b"\n"


def chunk_line(payload: bytes) -> bytes:
    """One chunk line carrying ``payload``, a JSON text, escaped as :func:`framed`
    escapes it; a CR or LF in it (whitespace between JSON tokens) becomes a space,
    so the chunk stays one line."""
    data = _html_escape(bytes(payload)).replace(b"\r", b" ").replace(b"\n", b" ")
    return _CHUNK + data + b"\n"


def emit(w: _Writer, obj: Any) -> None:
    """Write ``obj`` to ``w`` as a framed JSON document (:func:`framed`), in one write.

    The payload is marshalled before anything is written, so a value that cannot
    be serialised raises :class:`PayloadEncodeError` and writes nothing. A write
    that reports fewer bytes than it was given raises :class:`ShortWriteError`.
    """
    _write(w, framed(marshal(obj)))


def emit_chunk(w: _Writer, obj: Any) -> None:
    """Write ``obj`` to ``w`` as one streamed chunk line, in one write call.

    Raises as :func:`emit` does. No leading newline: ``chunk_payload`` finds the
    marker anywhere in a line, so a chunk after an unfinished diagnostic is still
    read, and a newline would only add an empty line to the output a person sees.
    """
    _write(w, chunk_line(marshal(obj)))


# -- reading -----------------------------------------------------------------------------


def _one_line(data: bytes, limit: int = _HEAD_LIMIT) -> str:
    """``data`` decoded (bad UTF-8 replaced), whitespace runs as one space, stripped,
    and cut to ``limit`` characters plus "..."; only the head of ``data`` is read."""
    data = data.lstrip()  # ASCII whitespace, which the collapse would drop anyway
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = ""
    for start in range(0, len(data), _HEAD_STEP):
        piece = decoder.decode(data[start : start + _HEAD_STEP])
        text = _WHITESPACE.sub(" ", text + piece).lstrip()
        if len(text.rstrip()) > limit:
            return text[:limit] + "..."
    text = _WHITESPACE.sub(" ", text + decoder.decode(b"", final=True)).strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _describe(head: str) -> str:
    return f'the output began: "{head}"' if head else "the output was empty"


def _marker_pattern(marker: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(marker) + rb"(?=[ \t\r\x0b\x0c]*(?:\n|\Z))")


_BEGIN_LINE = _marker_pattern(_BEGIN)
_END_LINE = _marker_pattern(_END)
"""A marker that ends its line: only whitespace after it before the newline or the end."""
_RFIND_TRIES = 16


def _first_marker(buf: bytes, marker: re.Pattern[bytes], start: int = 0) -> int:
    """Where the first marker at or after ``start`` that ends its line begins, or -1."""
    match = marker.search(buf, start)
    return -1 if match is None else match.start()


def _last_marker(buf: bytes, marker: bytes, pattern: re.Pattern[bytes]) -> int:
    """Where the last ``marker`` that ends its line (``pattern``) begins, or -1."""
    end = len(buf)
    for _ in range(_RFIND_TRIES):  # the usual case: the last one, or one of the last few
        at = buf.rfind(marker, 0, end)
        if at < 0 or pattern.match(buf, at):
            return at
        end = at + len(marker) - 1
    # Many quoted markers at the end: let the regex engine walk them all, in C.
    last = deque(pattern.finditer(buf), maxlen=1)
    return last[0].start() if last else -1


def extract(buf: bytes) -> bytes:
    """Recover the JSON document from ``buf``, which may also hold diagnostics.

    A marker counts where it ends a line: only whitespace (``\\r`` included) may
    follow it before the newline or the end of ``buf``, and anything may precede
    it on its line (a diagnostic that left its line unfinished). A marker followed
    by other text on its line is quoted prose, not a marker. The last begin marker
    decides: its payload is what lies between it and the first end marker after it,
    stripped; with no end after it the frame is truncated, and with nothing but
    whitespace in it there is no payload. End markers with no begin before them are
    truncation too. Without any marker, the span from the first ``{`` to the last
    ``}`` is returned, for writers that predate framing.

    Raises :class:`TruncatedFrameError` or :class:`NoPayloadError`. Linear time.
    """
    buf = bytes(buf)
    begin = _last_marker(buf, _BEGIN, _BEGIN_LINE)
    if begin >= 0:
        start = begin + len(_BEGIN)
        end = _first_marker(buf, _END_LINE, start)
        if end < 0:
            head = _one_line(buf)
            raise TruncatedFrameError(
                f"clijson: begin marker with no end marker after it; {_describe(head)}", head
            )
        payload = buf[start:end].strip()
        if not payload:
            head = _one_line(buf)
            raise NoPayloadError(
                f"clijson: no JSON payload in output (the frame is empty); {_describe(head)}",
                head,
            )
        return payload
    if _first_marker(buf, _END_LINE) >= 0:
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
    cannot contain it and a diagnostic quoting it can only come first. A str
    is encoded as UTF-8; a lone surrogate in it is taken as the byte it stands
    for (``surrogateescape``), or else kept as is (``surrogatepass``).
    """
    if isinstance(line, str):
        try:
            data = line.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = line.encode("utf-8", "surrogatepass")
    else:
        data = bytes(line)
    at = data.rfind(_CHUNK)
    if at < 0:
        return None
    return data[at + len(_CHUNK) :].strip()


def unmarshal(buf: bytes) -> Any:
    """Extract the payload from ``buf`` and decode it as JSON as Go reads it
    (:func:`simulator.clijson_codec.decode`).

    Raises :class:`FrameError`: what :func:`extract` raises, or
    :class:`PayloadDecodeError` when the payload does not decode.
    """
    payload = extract(buf)
    try:
        return decode(payload)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a refused number
        reason = "exceeded max depth" if isinstance(exc, RecursionError) else str(exc)
        head = _one_line(buf)
        message = (
            f'clijson: payload does not parse: {reason}; payload: "{_one_line(payload)}"; '
            f"{_describe(head)}"
        )
        raise PayloadDecodeError(message, head, payload) from exc
