"""An event as the bytes zread writes: the one place where events become bytes.

Owns the byte format of an event line (FIDELITY section 1): compact JSON, key order
``vm, waiting_for, done, error``, strings escaped as Go's ``encoding/json`` escapes
them, numbers as Go writes them (:func:`go_float`), one trailing newline
(:func:`encode_event`); and a view model's JSON (:func:`vm_pieces`, :func:`encode_vm`)
with the parts a vm keeps its own JSON of (:func:`encode_part`, :func:`encode_parts`).
:mod:`simulator.core.envelope` re-exports all of it.

msgspec does the encoding; the only hand-written part is the Go-compatible escaping of
``<``, ``>``, ``&``, U+2028 and U+2029, which msgspec leaves as they are and Go does
not. Those bytes can only occur inside JSON strings, so the escaping is a substitution
over the encoded vm and error. The event line itself is assembled from its four parts,
in order, around the encoded vm. A vm part that keeps its own JSON (a
``json_fragment()`` method: generate's task list, which re-encodes only the tasks that
changed) is inlined as it is; it encodes its parts with :func:`encode_part`, escaped
already. The escaping is idempotent (what it writes holds none of the bytes it
replaces), so the vm's own pass leaves such parts as they are.

Must not: decode anything (a command line is the envelope's), hold state but the
fragments met by the encoding under way in a thread, read a clock, or do I/O.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec


class _Fragments(threading.local):
    """The fragments met by the encoding under way in this thread, in order."""

    met: list[bytes] | None = None


_fragments: Final = _Fragments()
_MARK: Final = msgspec.Raw(b"\x00")
"""Where a fragment goes: msgspec writes a NUL inside a string as ``\\u0000``, so a raw
NUL in its output can only be this mark."""


def _enc_hook(obj: Any) -> Any:
    """Objects that keep their own JSON (``json_fragment() -> bytes``) are inlined: the
    mark stands for them, and :func:`vm_pieces` splices them in after the escaping."""
    fragment = getattr(obj, "json_fragment", None)
    met = _fragments.met
    if fragment is None or met is None:
        raise NotImplementedError(f"cannot encode {type(obj).__name__}")
    met.append(fragment())
    return _MARK


_encoder: Final = msgspec.json.Encoder(enc_hook=_enc_hook)
_part_encoder: Final = msgspec.json.Encoder()
"""For the parts of a fragment, which hold no fragment themselves: a separate encoder,
so that one encoded while a vm is (inside ``json_fragment()``) never marks its place."""


def _go_escape_all(data: bytes) -> bytes:
    # ``data`` itself when nothing is escaped (encode_parts counts on it). An int is
    # looked for with memchr (~40 ns for a vm around its fragments); a one-byte bytes
    # needle goes through the general search (~400 ns), a regex is slower still.
    # U+2028/U+2029 both start with 0xe2.
    if 60 in data:  # <
        data = data.replace(b"<", b"\\u003c")
    if 62 in data:  # >
        data = data.replace(b">", b"\\u003e")
    if 38 in data:  # &
        data = data.replace(b"&", b"\\u0026")
    if 0xE2 in data:
        data = data.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return data


def vm_pieces(vm: Any) -> Sequence[bytes]:
    """A view model (a msgspec Struct) as compact JSON, escaped as Go escapes, in pieces
    that join to it: the vm around its fragments, escaped here, and the fragments, which
    come escaped (:func:`encode_part`). The event line is one copy of the pieces, and a
    long fragment is neither copied into the vm nor scanned again.

    (A scan costs ~0.2 us however short the bytes: the vm around its fragments is
    escaped in one piece, marks and all, and cut at the marks after.)"""
    met: list[bytes] = []
    _fragments.met = met
    try:
        raw = _go_escape_all(_encoder.encode(vm))  # the escaping leaves the marks as they are
    finally:
        _fragments.met = None
    if not met:
        return (raw,)
    if len(met) == 1:
        head, _, tail = raw.partition(b"\x00")
        return (head, met[0], tail)
    around = raw.split(b"\x00")
    pieces = [around[0]]
    for fragment, after in zip(met, around[1:], strict=True):
        pieces += (fragment, after)
    return pieces


def encode_vm(vm: Any) -> bytes:
    """Encode a view model (a msgspec Struct) to compact JSON, escaped as Go escapes."""
    return b"".join(vm_pieces(vm))


def encode_part(value: Any) -> bytes:
    """A part of a vm (a Struct, a list...) as :func:`encode_vm` writes it inside the vm,
    escaped already: what a ``json_fragment()`` is made of."""
    return _go_escape_all(_part_encoder.encode(value))


def encode_parts(values: Iterable[Any]) -> list[bytes]:
    """:func:`encode_part` of each value; the bytes are looked through once for what
    needs escaping, and each part escaped only when something does."""
    parts = [_part_encoder.encode(value) for value in values]
    if _go_escape_all(joined := b"".join(parts)) is joined:  # nothing to escape
        return parts
    return [_go_escape_all(part) for part in parts]


@functools.lru_cache(maxsize=256)
def _encode_waiting_for(waiting_for: tuple[str, ...]) -> bytes:
    return _encoder.encode(waiting_for)


def encode_event(
    vm_json: bytes | Sequence[bytes], waiting_for: tuple[str, ...], done: bool, error: str
) -> bytes:
    """One event line, exactly as zread writes it, newline included.

    ``vm_json`` is the output of :func:`encode_vm` or :func:`vm_pieces`, so that a
    rejected command can repeat the previous event's vm byte for byte without
    re-encoding it. The line is assembled around it in one copy; the key order is the
    order of the parts.
    """
    vm = (vm_json,) if isinstance(vm_json, bytes) else vm_json
    return b"".join(
        (
            b'{"vm":',
            *vm,
            b',"waiting_for":',
            _encode_waiting_for(waiting_for),
            b',"done":true,"error":' if done else b',"done":false,"error":',
            _go_escape_all(_encoder.encode(error)) if error else b'""',
            b"}\n",
        )
    )


def go_float(value: float) -> float:
    """A float as Go's encoder writes it: an integral value has no ``.0``.

    Only below 1e21, where Go switches to exponent form (which msgspec spells
    ``1e21`` where Go spells ``1e+21``; no vm field comes near).
    """
    return int(value) if value.is_integer() and abs(value) < 1e21 else value
