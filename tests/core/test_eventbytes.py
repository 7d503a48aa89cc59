"""Tests for simulator.core.eventbytes: event lines as zread writes them, Go's escaping,
vms that keep parts of their own JSON."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from simulator.core.eventbytes import (
    encode_event,
    encode_part,
    encode_parts,
    encode_vm,
    go_float,
    vm_pieces,
)


class SmallVM(msgspec.Struct):
    state: str = "ready"
    count: int = 0
    note: str = ""


# -- encode_event ------------------------------------------------------------------


def test_event_bytes_are_compact_in_go_key_order_with_one_newline() -> None:
    line = encode_event(encode_vm(SmallVM(count=3)), ("go", "quit"), False, "")
    assert line == (
        b'{"vm":{"state":"ready","count":3,"note":""},'
        b'"waiting_for":["go","quit"],"done":false,"error":""}\n'
    )


def test_done_event_has_empty_list_not_null() -> None:
    line = encode_event(encode_vm(SmallVM()), (), True, "")
    assert line.endswith(b'"waiting_for":[],"done":true,"error":""}\n')
    assert b"null" not in line
    assert json.loads(line)["waiting_for"] == []


def test_error_is_always_present_and_keys_keep_their_order() -> None:
    line = encode_event(b"{}", ("quit",), False, "boom")
    assert list(json.loads(line)) == ["vm", "waiting_for", "done", "error"]
    assert json.loads(line)["error"] == "boom"
    assert list(json.loads(encode_event(b"{}", (), False, ""))) == [
        "vm",
        "waiting_for",
        "done",
        "error",
    ]


def test_vm_bytes_are_embedded_verbatim() -> None:
    vm_json = encode_vm(SmallVM(note="x"))
    line = encode_event(vm_json, (), False, "")
    assert line.startswith(b'{"vm":' + vm_json + b',"waiting_for":')


def test_newlines_inside_strings_never_split_the_line() -> None:
    line = encode_event(encode_vm(SmallVM(note="a\nb\r\n")), (), False, "x\ny")
    assert line.count(b"\n") == 1
    assert line.endswith(b"\n")
    assert json.loads(line)["vm"]["note"] == "a\nb\r\n"


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("<", rb"\u003c"),
        (">", rb"\u003e"),
        ("&", rb"\u0026"),
        ("\u2028", rb"\u2028"),
        ("\u2029", rb"\u2029"),
    ],
)
def test_go_escapes_html_and_line_separators(text: str, escaped: bytes) -> None:
    raw = text.encode()
    line = encode_event(encode_vm(SmallVM(note=f"a{text}b")), (), False, f"e{text}")
    assert b'"note":"a' + escaped + b'b"' in line
    assert b'"error":"e' + escaped + b'"' in line
    assert raw not in line
    decoded = json.loads(line)
    assert decoded["vm"]["note"] == f"a{text}b"
    assert decoded["error"] == f"e{text}"


def test_all_unsafe_characters_in_one_string() -> None:
    line = encode_event(encode_vm({"s": "<a href='x'>&\u2028\u2029</a>"}), (), False, "")
    assert line.startswith(
        b'{"vm":{"s":"\\u003ca href=\'x\'\\u003e\\u0026\\u2028\\u2029\\u003c/a\\u003e"}'
    )


def test_non_ascii_stays_raw_utf8() -> None:
    text = "héllo 日本 😀 \u2027"
    line = encode_event(encode_vm(SmallVM(note=text)), (), False, text)
    assert text.encode("utf-8") in line
    assert b"\\u00e9" not in line
    assert line.count(text.encode("utf-8")) == 2
    assert json.loads(line)["error"] == text


def test_rejection_repeats_vm_bytes_exactly() -> None:
    vm_json = encode_vm(SmallVM(note="<&>"))
    first = encode_event(vm_json, ("quit",), False, "")
    again = encode_event(vm_json, ("quit",), False, "bad")
    assert first.split(b',"done"')[0] == again.split(b',"done"')[0]


# -- vms with fragments -------------------------------------------------------------


class Fragment:
    """A part of a vm that keeps its own JSON, as generate's task list does."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def json_fragment(self) -> bytes:
        return encode_part(self.value)


class FragmentVM(msgspec.Struct):
    head: str = ""
    items: Any = None
    tail: str = ""
    more: Any = None


def test_a_vm_with_fragments_is_the_bytes_of_the_same_vm_without_them() -> None:
    values = [{"t": "<b>&\u2028"}, {"t": "x\x00y"}]
    plain = FragmentVM(head="<h>\x00", items=values, tail="&", more=[1])
    spliced = FragmentVM(head="<h>\x00", items=Fragment(values), tail="&", more=Fragment([1]))
    pieces = vm_pieces(spliced)
    assert b"".join(pieces) == encode_vm(spliced) == encode_vm(plain)
    assert len(pieces) == 5  # around, fragment, around, fragment, around
    assert b"\\u0000" in encode_vm(plain)  # a NUL in a string is escaped: never a mark
    line = encode_event(pieces, ("quit",), False, "")
    assert line == encode_event(encode_vm(plain), ("quit",), False, "")


def test_a_vm_without_fragments_is_one_piece() -> None:
    assert vm_pieces(SmallVM(note="<")) == (encode_vm(SmallVM(note="<")),)


def test_an_object_without_its_own_json_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="cannot encode object"):
        encode_vm(FragmentVM(items=object()))
    assert (
        encode_vm(FragmentVM(items=Fragment(2))) == b'{"head":"","items":2,"tail":"","more":null}'
    )


# -- go_float ---------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(100.0, b"100"), (0.0, b"0"), (-3.0, b"-3")])
def test_go_float_drops_point_zero(value: float, expected: bytes) -> None:
    assert encode_vm(go_float(value)) == expected
    assert go_float(value) == value


@pytest.mark.parametrize(("value", "expected"), [(12.5, b"12.5"), (0.1, b"0.1"), (-2.25, b"-2.25")])
def test_go_float_keeps_fractions(value: float, expected: bytes) -> None:
    assert go_float(value) == value
    assert encode_vm(go_float(value)) == expected


def test_go_float_in_a_vm_field() -> None:
    class Progress(msgspec.Struct):
        download_percent: float = 0

    assert encode_vm(Progress(go_float(100.0))) == b'{"download_percent":100}'
    assert encode_vm(Progress(go_float(41.5))) == b'{"download_percent":41.5}'


def test_go_float_large_values_keep_exponent_form() -> None:
    # Go's encoding/json switches to exponent form at 1e21 (json.Marshal(1e21) == "1e+21"):
    # go_float must not turn such a value into a 22-digit integer.
    assert isinstance(go_float(1e21), float)
    assert encode_vm(go_float(1e21)).startswith(b"1e")
    assert encode_vm(go_float(1e20)) == b"100000000000000000000"


def test_encode_parts_escapes_as_encode_part_and_keeps_parts_that_need_nothing() -> None:
    values = [{"a": 1}, "<&>", "\u2028", [1.5]]
    assert encode_parts(values) == [encode_part(value) for value in values]
    plain = encode_parts([{"a": 1}, "text"])
    assert plain == [b'{"a":1}', b'"text"']
    assert encode_parts([]) == []
