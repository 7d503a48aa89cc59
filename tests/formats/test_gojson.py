"""Tests of simulator/formats/gojson.py: JSON written as Go's
``json.MarshalIndent(v, "", "  ")`` writes it, escapes and layout byte for byte."""

from __future__ import annotations

import json

import msgspec
import pytest

from simulator.formats.gojson import encode


class Entry(msgspec.Struct):
    title: str
    count: int


def test_a_title_with_html_characters_is_escaped_as_go_does() -> None:
    assert encode("A & <B>") == b'"A \\u0026 \\u003cB\\u003e"'
    assert encode({"title": "A & <B>"}) == b'{\n  "title": "A \\u0026 \\u003cB\\u003e"\n}'


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("<", b"\\u003c"),
        (">", b"\\u003e"),
        ("&", b"\\u0026"),
        ("\u2028", b"\\u2028"),
        ("\u2029", b"\\u2029"),
        ('"', b'\\"'),
        ("\\", b"\\\\"),
        ("\n", b"\\n"),
        ("\r", b"\\r"),
        ("\t", b"\\t"),
        ("\b", b"\\b"),
        ("\f", b"\\f"),
        ("\x00", b"\\u0000"),
        ("\x01", b"\\u0001"),
        ("\x1f", b"\\u001f"),
    ],
)
def test_each_character_go_escapes(text: str, escaped: bytes) -> None:
    assert encode(text) == b'"' + escaped + b'"'


@pytest.mark.parametrize(
    "text", ["é", "漢字", "项目概览", "\x7f", "/", "'", "😀", "\u2027", "\u202a"]
)
def test_what_go_writes_raw_is_raw(text: str) -> None:
    assert encode(text) == b'"' + text.encode() + b'"'


def test_the_layout_is_a_two_space_indent_without_a_trailing_newline() -> None:
    data = encode({"a": [1, {"b": None}], "c": {}, "d": [], "e": True})
    assert data == (
        b"{\n"
        b'  "a": [\n'
        b"    1,\n"
        b"    {\n"
        b'      "b": null\n'
        b"    }\n"
        b"  ],\n"
        b'  "c": {},\n'
        b'  "d": [],\n'
        b'  "e": true\n'
        b"}"
    )
    assert not data.endswith(b"\n")


def test_a_struct_keeps_its_field_order() -> None:
    assert encode(Entry(title="Z & A", count=2)) == (
        b'{\n  "title": "Z \\u0026 A",\n  "count": 2\n}'
    )


def test_the_escapes_only_touch_strings_and_decode_back() -> None:
    value = {"t<&>": "x <y> & z \u2028\u2029 é", "list": ["<", ">"]}
    data = encode(value)
    for raw in (b"<", b">", b"&", "\u2028".encode(), "\u2029".encode()):
        assert raw not in data
    assert json.loads(data) == value
    assert msgspec.json.decode(data) == value


def test_empty_values() -> None:
    assert encode([]) == b"[]"
    assert encode({}) == b"{}"
    assert encode("") == b'""'
