"""What the simulator records keeps no API key: lines, decoded JSON, broken lines."""

from __future__ import annotations

import json

import pytest

from simulator.core.secrets import REDACTED, redact, redact_line


def test_a_command_setting_the_key_is_redacted_and_the_rest_kept() -> None:
    line = b'{"type":"update_fields","params":{"fields":{"llm_api_key":"sk-live-1","x":"y"}}}'
    out = json.loads(redact_line(line))
    assert out["params"]["fields"] == {"llm_api_key": REDACTED, "x": "y"}
    assert b"sk-live-1" not in redact_line(line)


def test_the_config_field_of_the_key_hides_its_value_and_initial() -> None:
    vm = {
        "fields": [
            {"title_key": "t", "json_key": "llm_model", "value": "m", "initial": "m"},
            {"title_key": "t", "json_key": "llm_api_key", "value": "sk-2", "initial": "sk-1"},
        ]
    }
    out = redact(vm)
    assert out["fields"][0] == vm["fields"][0]
    assert out["fields"][1]["value"] == out["fields"][1]["initial"] == REDACTED
    assert vm["fields"][1]["value"] == "sk-2"  # a new object: the original is kept


def test_an_empty_key_stays_empty_so_whether_one_is_set_can_be_read() -> None:
    field = {"json_key": "llm_api_key", "value": "", "initial": ""}
    assert redact(field) == field
    line = b'{"fields":{"llm_api_key":""}}'
    assert redact_line(line) is line


def test_a_line_without_a_key_comes_back_as_it_is() -> None:
    line = b'{"type":"save"}'
    assert redact_line(line) is line


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"update_fields","params":{"fields":{"llm_api_key":"sk-3"',
        b'{"fields":{"api_key" : "sk-\\"3\\"-x"}} trailing',
        b'"{\\"llm_api_key\\":\\"sk-3\\"}" ,',
    ],
)
def test_a_line_that_is_not_json_is_redacted_from_its_text(line: bytes) -> None:
    out = redact_line(line)
    assert b"sk-" not in out
    assert REDACTED.encode() in out


def test_a_line_nested_too_deep_is_redacted_from_its_text() -> None:
    line = b'{"api_key":"sk-4","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert b"sk-4" not in redact_line(line)


def test_a_redacted_line_differs_from_the_wire_only_in_the_secret() -> None:
    line = '{"vm":{"a":"<&>\u2028 é","n":2,"f":0.5,"llm_api_key":"sk-5"},"done":false}'.encode()
    line = line.replace("<&>\u2028".encode(), b"\\u003c\\u0026\\u003e\\u2028")
    assert redact_line(line) == line.replace(b"sk-5", REDACTED.encode())
