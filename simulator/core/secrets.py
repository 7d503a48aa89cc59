"""Secrets kept out of what the simulator itself prints or records.

Owns: :func:`redact_line` (one JSON line, as bytes) and :func:`redact` (decoded JSON):
the value of every key that names an API key (``llm_api_key``, ``api_key``), and the
``value`` and ``initial`` of the config field whose ``json_key`` names one, become
:data:`REDACTED`. An empty value stays empty, so "is a key set?" can still be read.

The events a session writes are zread's output and keep what zread shows, and the
journal and a virtual session's transcript keep the lines byte for byte; what is
redacted is what the simulator prints of them (a journal entry's or a transcript
line's ``str`` and ``repr``, so any assertion message) and the control channel's
``snapshot``.

A redacted line is encoded as the envelope encodes (compact, Go's escaping), so a line
differs from the one on the wire only in the redacted values.

Must not: do I/O. A line that is not JSON is redacted from its text, after each key.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from simulator.core.envelope import encode_vm

__all__ = ["REDACTED", "redact", "redact_line"]

REDACTED: Final = "***"

_MARK: Final = b"api_key"
_FIELD_KEYS: Final = ("value", "initial")
_AFTER_KEY: Final = re.compile(rb'(api_key\\?"\s*:\s*\\?")((?:[^"\\]|\\.)+)')


def _secret_key(key: object) -> bool:
    return isinstance(key, str) and key.endswith("api_key")


def redact(value: Any) -> Any:
    """``value`` (decoded JSON) with every API key's value replaced; a new object."""
    if isinstance(value, list):
        return [redact(item) for item in value]
    if not isinstance(value, dict):
        return value
    field = _secret_key(value.get("json_key"))
    return {
        key: REDACTED
        if (_secret_key(key) or (field and key in _FIELD_KEYS)) and isinstance(item, str) and item
        else redact(item)
        for key, item in value.items()
    }


def redact_line(line: bytes) -> bytes:
    """``line`` (one JSON text) with every API key's value replaced.

    A line with no API key's value in it comes back as it is (the same object).
    """
    if _MARK not in line:
        return line
    try:
        doc = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return _AFTER_KEY.sub(rb"\1" + REDACTED.encode(), line)
    redacted = redact(doc)
    return line if redacted == doc else encode_vm(redacted)
