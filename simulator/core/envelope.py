"""The zread envelope: the one place where events become bytes and lines become commands.

Owns:
- the decoding of a command line and of its ``params`` as Go's ``encoding/json``
  decodes them into zread's structs, with exactly the error texts of FIDELITY
  section 3 (Go's rules for keys and nulls: :mod:`simulator.core.godecode`, asked
  only about the lines msgspec alone would read otherwise);
- as a face, the byte format of an event line (FIDELITY section 1), which is
  :mod:`simulator.core.eventbytes`' (:func:`encode_event`, :func:`encode_vm`,
  :func:`vm_pieces`, :func:`encode_part`, :func:`encode_parts`, :func:`go_float`,
  re-exported here).

Must not: hold state, read a clock, or do I/O. A rejected line raises
:class:`RejectedLine`, whose ``text`` is what goes into the event's ``error``.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeVar

import msgspec

from simulator.core.eventbytes import (
    encode_vm,
)
from simulator.core.goassign import normalise
from simulator.core.godecode import NOT_QUICK, PLANS, command_keys_exact, command_members, plan_of
from simulator.errors import ProtocolError

MAX_LINE_BYTES: Final = 1 << 20
"""The longest command line accepted (FIDELITY section 3)."""

JSON_WHITESPACE: Final = b" \t\r\n"
"""What JSON calls whitespace: a line of only these is blank. (``bytes.strip()`` would
also take ``\\v`` and ``\\f``, which Go's decoder refuses.)"""

_LONE_SURROGATE: Final = re.compile(
    rb"(\\\\)|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
"""An escaped backslash, a surrogate pair, or a lone surrogate escape, left to right."""

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


class _ExactWireCommand(_WireCommand, forbid_unknown_fields=True):
    """A line with no other key: what msgspec reads of it is what Go reads."""


_exact_wire: Final = msgspec.json.Decoder(_ExactWireCommand)
_any_wire: Final = msgspec.json.Decoder(_WireCommand)
_str_decoder: Final = msgspec.json.Decoder(str)
_plans: Final = PLANS


class Command(msgspec.Struct, frozen=True):
    """A decoded command: its ``type`` as sent, and its raw ``params`` object."""

    type: str
    params: bytes


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


def _any_wire_of(line: bytes) -> tuple[_WireCommand, bytes]:
    """The line's ``type`` and ``params`` as msgspec reads them whatever other keys it
    holds, and the line they were read from (lone surrogates replaced)."""
    try:
        return _any_wire.decode(line), line
    except RecursionError:
        raise RejectedLine(_TOO_DEEP) from None
    except msgspec.DecodeError as err:  # ValidationError included
        if 92 not in line or b"\\u" not in line:
            raise RejectedLine(f"invalid JSON: {_reason(err)}") from None
    # Go's decoder reads an escaped lone surrogate as U+FFFD; msgspec refuses it.
    line = _LONE_SURROGATE.sub(_keep_or_replace, line)
    try:
        return _any_wire.decode(line), line
    except RecursionError:
        raise RejectedLine(_TOO_DEEP) from None
    except msgspec.DecodeError as err:
        raise RejectedLine(f"invalid JSON: {_reason(err)}") from None


def decode_command(line: bytes) -> Command:
    """Decode one command line (without its newline), as Go's ``encoding/json`` would.

    Raises :class:`RejectedLine` with ``invalid JSON: <reason>`` when the line is not
    a UTF-8 JSON object, or nests deeper than the decoder goes (``nested too deeply``).
    An escaped lone surrogate (``"\\ud800"``) is U+FFFD, as Go's decoder reads it.
    A key names ``type`` or ``params`` case-insensitively, the last such key wins, and
    a ``null`` type leaves the type as it was (:mod:`simulator.core.godecode`).
    A missing or non-string ``type`` is not an error here: it comes back as ``""`` or
    as its JSON text, and is refused as not allowed.

    The common line (``type`` and ``params``, spelled so, once) costs one msgspec
    decode; a line with another key also a look through its bytes; only another
    spelling of ``type`` or ``params``, or a ``null`` type, goes through Go's rules by
    hand.
    """
    if not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise RejectedLine(f"invalid JSON: invalid UTF-8 at byte {err.start}") from None
    try:
        wire: _WireCommand = _exact_wire.decode(line)  # no other key: as Go reads it
        exact = True
    except RecursionError:
        raise RejectedLine(_TOO_DEEP) from None
    except msgspec.DecodeError:  # another key, or not JSON: the line says which
        wire, line = _any_wire_of(line)
        exact = False
    raw_type = bytes(wire.type)
    params = bytes(wire.params)
    if (not exact and not command_keys_exact(line)) or raw_type == b"null":
        # another spelling of type or params (not only another key), or a null type
        try:
            type_text, params_text = command_members(line.decode("utf-8"))
        except RecursionError:
            raise RejectedLine(_TOO_DEEP) from None
        raw_type, params = type_text.encode(), params_text.encode()
    if not raw_type:
        command_type = ""
    elif raw_type[:1] == b'"':
        command_type = _str_decoder.decode(raw_type)
    else:
        command_type = raw_type.decode("utf-8")
    if not params or params == b"null":
        params = _EMPTY_OBJECT
    return Command(command_type, params)


def decode_params(params: bytes, params_type: type[T]) -> T:
    """Decode ``params`` into ``params_type``, as Go's ``encoding/json`` would;
    ``invalid params: <reason>`` when a value has the wrong type.

    Unknown keys are ignored, as Go's decoder ignores them; a key names a field
    case-insensitively; ``null`` or a left-out field is the field's zero value (see
    :mod:`simulator.core.godecode`). A reason names a field by its own name, however
    the line spelled it. Nesting deeper than the decoder goes is ``invalid JSON: nested
    too deeply``, as it is in :func:`decode_command`: how deep the decoder can go
    depends on the stack it is called from, so a line that passed there can still be
    too deep here.

    Params whose keys are their fields', spelled so, cost one msgspec decode; others,
    and a null or a missing field, are rewritten by Go's rules first.
    """
    plan = _plans.get(params_type) or plan_of(params_type)
    try:
        value = plan.quick(params)
        if value is not NOT_QUICK:
            return value  # type: ignore[no-any-return]
        try:
            params = normalise(params, plan.plan)
        except ValueError:  # not JSON at all: msgspec says why
            msgspec.json.decode(params)
            # pragma: no cover - msgspec refuses what json refuses (json's words never shown)
            raise RejectedLine("invalid JSON: params cannot be read") from None
        return plan.decoder.decode(params)  # type: ignore[no-any-return]
    except msgspec.ValidationError as err:
        reason = _reason(err)
        if "[...]" in reason:
            reason = _name_the_key(params, params_type, reason)
        raise RejectedLine(f"invalid params: {reason}") from None
    except msgspec.DecodeError as err:
        raise RejectedLine(f"invalid JSON: {_reason(err)}") from None
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
    try:
        doc = msgspec.json.decode(params)
    except (msgspec.DecodeError, RecursionError):  # a number out of range, say: as it is
        return reason
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
