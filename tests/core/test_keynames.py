"""Tests of simulator/core/keynames.py: what names an API key, and where its value is,
in text and in decoded JSON."""

from __future__ import annotations

import pytest

from simulator.core.keynames import (
    MARKS_TEXT,
    REDACTED,
    UNDERSCORE_K,
    VALUE_GROUPS,
    hidden,
    holds_name,
    is_key_name,
    key_value,
    named_values,
)


def value_of(text: bytes) -> bytes | None:
    """The value :func:`key_value` finds after the first name in ``text``, or None."""
    match = key_value().search(text)
    if match is None:
        return None
    found = [match.group(group) for group, _ in VALUE_GROUPS if match.group(group) is not None]
    assert len(found) == 1  # one group holds the value
    return found[0]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b'{"llm_api_key":"sk-1"}', b"sk-1"),
        (b'{"LLM_API_KEY" : "sk-1"}', b"sk-1"),
        (b'{"llm_\\u0061pi_key":"sk-1"}', b"sk-1"),
        (b'{"llm_api_\xe2\x84\xaaey":"sk-1"}', b"sk-1"),  # the Kelvin sign, as Go folds it
        (b"{'api_key': 'sk-1'}", b"sk-1"),
        (b'"{\\"api_key\\":\\"sk-1\\"}"', b"sk-1"),  # a JSON string holding JSON
        (b'{"api_key":"sk-1', b"sk-1"),  # a cut line
        (b"https://host/v1?api_key=sk-1&x=2", b"sk-1"),
        (b'{"api_key":sk-1}', b"sk-1"),
    ],
)
def test_a_name_and_its_value_are_found_in_any_spelling(text: bytes, value: bytes) -> None:
    assert value_of(text) == value


@pytest.mark.parametrize(
    "text",
    [
        b'{"api_key":null}',
        b'{"api_key":true}',
        b"llm_api_key: expected a string",  # prose: a bare word after ':' is no value
        b'{"key":"sk-1"}',
        b'{"api_keys":"sk-1"}',
    ],
)
def test_what_is_no_value_of_a_key(text: bytes) -> None:
    assert value_of(text) is None


def test_the_marks_of_a_name() -> None:
    assert MARKS_TEXT == ("\\u", "_k", "_K", "_\u212a")
    assert UNDERSCORE_K.search("x_\u212a".encode()) and UNDERSCORE_K.search(b"a_K")
    assert UNDERSCORE_K.search(b"no marks here") is None
    assert holds_name(b'{"LLM_API_KEY":1}') and holds_name("api_\u212aey".encode())
    assert not holds_name(b'{"api-key":1}') and not holds_name(b"_k only")


def test_names_in_decoded_json() -> None:
    assert is_key_name("llm_api_key") and is_key_name("API_KEY")
    assert not is_key_name("api_key_id") and not is_key_name(3) and not is_key_name(None)


def test_the_values_decoded_json_holds_under_a_name() -> None:
    doc = {
        "llm_api_key": "a",
        "nested": [{"API_KEY": ["b", {"deep": "c"}, 4]}, {"other": "d"}],
        "fields": [
            {"json_key": "llm_api_key", "value": "e", "initial": "f", "label": "g"},
            {"json_key": "language", "value": "h"},
        ],
    }
    found: list[str] = []
    named_values(doc, found)
    assert found == ["a", "b", "c", "e", "f"]


def test_a_hidden_value_keeps_its_shape_and_its_empty_strings() -> None:
    assert hidden("sk-1") == REDACTED == "***"
    assert hidden("") == ""
    value = {"a": ["x", "", 3, None], "b": {"c": "y"}}
    assert hidden(value) == {"a": ["***", "", 3, None], "b": {"c": "***"}}
    assert value == {"a": ["x", "", 3, None], "b": {"c": "y"}}  # a new object
