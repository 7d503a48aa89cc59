"""The zread envelope: the one place where events become bytes and lines become commands.

Owns:
- the byte format of an event line (FIDELITY section 1): compact JSON, key order
  ``vm, waiting_for, done, error``, strings escaped as Go's ``encoding/json`` escapes
  them, numbers as Go writes them, one trailing newline;
- the decoding of a command line and of its ``params``, with exactly the error texts
  of FIDELITY section 3.

Must not: hold state, read a clock, or do I/O. A rejected line raises
:class:`RejectedLine`, whose ``text`` is what goes into the event's ``error``.

msgspec does the encoding and the validation; the only hand-written part is the
Go-compatible escaping of ``<``, ``>``, ``&``, U+2028 and U+2029, which msgspec leaves
as they are and Go does not. Those bytes can only occur inside JSON strings, so the
escaping is a substitution over the encoded vm and error. The event line itself is
assembled from its four parts, in order, around the encoded vm. A vm part that keeps
its own JSON (a ``json_fragment()`` method: generate's task list, which re-encodes
only the tasks that changed) is inlined as it is; it encodes its parts with
:func:`encode_part`, escaped already. The escaping is idempotent (what it writes holds
none of the bytes it replaces), so the vm's own pass leaves such parts as they are.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeVar

import msgspec

from simulator.core.errors import ProtocolError

__all__ = [
    "JSON_WHITESPACE",
    "MAX_LINE_BYTES",
    "Command",
    "RejectedLine",
    "decode_command",
    "decode_params",
    "encode_event",
    "encode_part",
    "encode_parts",
    "encode_vm",
    "go_float",
    "not_allowed",
    "vm_pieces",
]

MAX_LINE_BYTES: Final = 1 << 20
"""The longest command line accepted (FIDELITY section 3)."""

JSON_WHITESPACE: Final = b" \t\r\n"
"""What JSON calls whitespace: a line of only these is blank. (``bytes.strip()`` would
also take ``\\v`` and ``\\f``, which Go's decoder refuses.)"""

_LONE_SURROGATE: Final = re.compile(
    rb"(\\\\)|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
"""An escaped backslash, a surrogate pair, or a lone surrogate escape, left to right."""


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
_EMPTY_OBJECT: Final = b"{}"

T = TypeVar("T")


class RejectedLine(ProtocolError):
    """A line from the client that zread would refuse; ``text`` is the event's ``error``."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _WireCommand(msgspec.Struct):
    type: msgspec.Raw = msgspec.Raw(b"")
    params: msgspec.Raw = msgspec.Raw(b"")


class Command(msgspec.Struct, frozen=True):
    """A decoded command: its ``type`` as sent, and its raw ``params`` object."""

    type: str
    params: bytes


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


def not_allowed(command_type: str, state: str) -> str:
    """The error text for a command that is not in waiting_for."""
    return f'command "{command_type}" not allowed in state {state}'


_MALFORMED: Final = "JSON is malformed: "
_TRUNCATED: Final = "Input data was truncated"
_TOO_DEEP: Final = "invalid JSON: nested too deeply"
"""msgspec raises RecursionError when a line nests deeper than the stack lets it go."""


def _reason(err: Exception) -> str:
    """msgspec's message, reworded where Go's decoder says it differently."""
    text = str(err)
    if text.startswith(_MALFORMED):
        return text.removeprefix(_MALFORMED)
    if text == _TRUNCATED:
        return "unexpected end of JSON input"
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _keep_or_replace(match: re.Match[bytes]) -> bytes:
    return match[0] if match.lastindex else b"\\ufffd"


def _decode_wire(line: bytes) -> _WireCommand:
    try:
        return msgspec.json.decode(line, type=_WireCommand)
    except RecursionError:
        raise RejectedLine(_TOO_DEEP) from None


def decode_command(line: bytes) -> Command:
    """Decode one command line (without its newline).

    Raises :class:`RejectedLine` with ``invalid JSON: <reason>`` when the line is not
    a UTF-8 JSON object, or nests deeper than the decoder goes (``nested too deeply``).
    An escaped lone surrogate (``"\\ud800"``) is U+FFFD, as Go's decoder reads it.
    A missing or non-string ``type`` is not an error here: it comes back as ``""`` or
    as its JSON text, and is refused as not allowed.
    """
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RejectedLine(f"invalid JSON: invalid UTF-8 at byte {err.start}") from None
    try:
        wire = _decode_wire(line)
    except msgspec.DecodeError as err:  # ValidationError included
        if b"\\u" not in line:
            raise RejectedLine(f"invalid JSON: {_reason(err)}") from None
        # Go's decoder reads an escaped lone surrogate as U+FFFD; msgspec refuses it.
        line = _LONE_SURROGATE.sub(_keep_or_replace, line)
        try:
            wire = _decode_wire(line)
        except msgspec.DecodeError as err:
            raise RejectedLine(f"invalid JSON: {_reason(err)}") from None
    raw_type = bytes(wire.type)
    if not raw_type or raw_type == b"null":  # Go decodes null as the field left out
        command_type = ""
    elif raw_type[:1] == b'"':
        command_type = msgspec.json.decode(raw_type, type=str)
    else:
        command_type = raw_type.decode("utf-8")
    params = bytes(wire.params)
    if not params or params == b"null":
        params = _EMPTY_OBJECT
    return Command(command_type, params)


def decode_params(params: bytes, params_type: type[T]) -> T:
    """Decode ``params`` into ``params_type``; ``invalid params: <reason>`` on failure.

    Unknown keys are ignored, as Go's decoder ignores them. Nesting deeper than the
    decoder goes is ``invalid JSON: nested too deeply``, as it is in
    :func:`decode_command`: how deep the decoder can go depends on the stack it is
    called from, so a line that passed there can still be too deep here.
    """
    try:
        return msgspec.json.decode(params, type=params_type)
    except msgspec.ValidationError as err:
        reason = _reason(err)
        if "[...]" in reason:
            reason = _name_the_key(params, params_type, reason)
        raise RejectedLine(f"invalid params: {reason}") from None
    except RecursionError:
        raise RejectedLine(_TOO_DEEP) from None


_PATH_PART: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|(\[\.\.\.\])")


def _name_the_key(params: bytes, params_type: type[Any], reason: str) -> str:
    """msgspec says ``$.fields[...]`` for a value under a map key; name the key instead
    (``$.fields["max_retries"]``): the first key whose value alone fails the same way.

    Only on the error path; the line decoded once already, so it decodes again.
    """
    head, _, tail = reason.partition(" - at `$")
    path, _, rest = tail.partition("[...]")
    doc = msgspec.json.decode(params)
    owner: Any = doc
    for name, index, _ in _PATH_PART.findall(path):
        owner = owner[name] if name else owner[int(index)]
    if not isinstance(owner, dict):  # pragma: no cover - msgspec marks only maps so
        return reason
    everything = dict(owner)
    try:
        for key, value in everything.items():
            owner.clear()
            owner[key] = value
            try:
                msgspec.convert(doc, params_type, strict=True)
            except msgspec.ValidationError:
                return f"{head} - at `${path}[{encode_vm(key).decode()}]{rest}"
    finally:
        owner.clear()
        owner.update(everything)
    return reason  # pragma: no cover - some key's value always fails alone
