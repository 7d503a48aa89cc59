"""An event line as a load test's client reads it: its envelope at once, its vm when looked at.

Owns: :func:`read_head` (an event's ``waiting_for``, ``done`` and ``error``, read off the
end of its line; None when the line is not laid out as zread writes its envelope) and
:class:`Event` (a read-only mapping over one line: those three keys from its head, the
rest decoded from the whole line the first time anything else is looked at).

Hand-written, not msgspec alone, for a reason: msgspec decodes a whole line or none of
it, and a 50-page generate event is ~6 KB whose decoding (~25 us) costs more than the
session's step that wrote it, on each of its 58 events; a client answers from the vm at
a gate only. The head is found at the line's last ``,"waiting_for":``: an envelope's
keys come in the order ``vm``, ``waiting_for``, ``done``, ``error``; nothing after
``waiting_for`` is an object, whose keys alone are followed by a colon, and a JSON string
holds no bare quote, so no later ``,"waiting_for":`` can stand in a well-formed line.
What follows it is decoded by msgspec as an object of its own; anything else (another
layout, another order, a line that is not JSON there, a byte before it that does not
close an object) gives None, and the caller decodes the whole line. What stands between
``{"vm":`` and the head is taken for the vm and not read: a key between the vm and
``waiting_for`` whose value is an object, or a vm that is not JSON, is seen only by a
decoding of the whole line.

Must not: change a line, or decode more of it than is looked at.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from simulator.tools.cassette import decode_json

HEAD_KEYS = ("waiting_for", "done", "error")
_KEY = b',"waiting_for":'
_decode = msgspec.json.Decoder().decode


def read_head(line: bytes) -> dict[str, Any] | None:
    """``{"waiting_for": ..., "done": ..., "error": ...}`` of an event line whose envelope
    is laid out as zread writes it (its vm an object first), or None. The line may end in
    its newline."""
    cut = line.rfind(_KEY)
    if cut < 1 or line[cut - 1] != 0x7D or not line.startswith(b'{"vm":{'):  # 0x7D: "}"
        return None
    try:
        head = _decode(b"{" + line[cut + 1 :])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if not isinstance(head, dict) or tuple(head) != HEAD_KEYS:
        return None
    return head


class Event(Mapping[str, Any]):
    """One event: ``waiting_for``, ``done`` and ``error`` from its head, the rest (its vm)
    from the whole line, decoded once, the first time it is looked at (a ValueError in
    the simulator's words if that line is not JSON)."""

    __slots__ = ("_doc", "_head", "_line")

    def __init__(self, line: bytes, head: dict[str, Any]) -> None:
        self._line = line
        self._head = head
        self._doc: dict[str, Any] | None = None

    def _whole(self) -> dict[str, Any]:
        if self._doc is None:
            doc = decode_json(self._line)
            if not isinstance(doc, dict):
                raise ValueError("the event is not a JSON object")
            self._doc = doc
        return self._doc

    def __getitem__(self, key: str) -> Any:
        head = self._head
        if key in head:
            return head[key]
        return self._whole()[key]

    def get(self, key: str, default: Any = None) -> Any:
        head = self._head
        if key in head:
            return head[key]
        return self._whole().get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def __repr__(self) -> str:
        return f"Event({self._line[:80]!r})"
