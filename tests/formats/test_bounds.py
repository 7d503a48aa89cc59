"""Tests of simulator/formats/bounds.py: the size and nesting limits every decoder keeps,
and the one bounded JSON decoding the JSON formats share."""

from __future__ import annotations

import time

import msgspec
import pytest

from simulator.errors import ConfigurationError
from simulator.formats import bounds
from simulator.formats.bounds import (
    BOM,
    LIMITS,
    MAX_NESTING,
    FormatError,
    check_json_nesting,
    check_size,
    decode_json,
    explain,
    in_words,
)


class Point(msgspec.Struct):
    x: int
    y: int = 0


POINT = msgspec.json.Decoder(Point)


def nested(depth: int, inner: bytes = b"") -> bytes:
    """``depth`` arrays, one inside the other, around ``inner``."""
    return b"[" * depth + inner + b"]" * depth


# -- FormatError and the limits -----------------------------------------------------------


def test_a_format_error_is_a_configuration_error_and_a_value_error() -> None:
    assert issubclass(FormatError, ConfigurationError)
    assert issubclass(FormatError, ValueError)
    assert bounds.FormatError is FormatError


def test_the_limits_of_zreads_files() -> None:
    assert LIMITS["current"] == 4 * 1024
    assert LIMITS["wiki.json"] == LIMITS["page"] == 8 * 1024 * 1024
    assert LIMITS["config.yaml"] == LIMITS["login.json"] == 64 * 1024


# -- check_size ---------------------------------------------------------------------------


def test_check_size_lets_a_file_at_the_limit_through() -> None:
    check_size(b"x" * LIMITS["current"], "current", "/p/.zread/wiki/current")
    check_size(b"", "login.json")


@pytest.mark.parametrize(
    ("kind", "limit_text"),
    [
        ("current", "4 KiB"),
        ("wiki.json", "8 MiB"),
        ("config.yaml", "64 KiB"),
        ("login.json", "64 KiB"),
    ],
)
def test_check_size_names_the_file_and_the_limit(kind: str, limit_text: str) -> None:
    name = f"/home/u/.zread/{kind}"
    with pytest.raises(FormatError) as caught:
        check_size(b"x" * (LIMITS[kind] + 1), kind, name)
    assert str(caught.value) == f"{name}: larger than {limit_text}, the limit for {kind}"


def test_check_size_without_a_name_names_the_kind() -> None:
    with pytest.raises(FormatError, match=r"^login\.json: larger than 64 KiB"):
        check_size(b" " * (64 * 1024 + 1), "login.json")


def test_check_size_of_an_unknown_kind_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        check_size(b"", "nothing")


# -- check_json_nesting -------------------------------------------------------------------


def test_the_nesting_limit_is_32() -> None:
    assert MAX_NESTING == 32


def test_32_levels_are_accepted_and_33_refused() -> None:
    check_json_nesting(nested(32), "a.json")
    check_json_nesting(b'{"a": ' * 31 + b"[]" + b"}" * 31, "a.json")
    with pytest.raises(FormatError) as caught:
        check_json_nesting(nested(33), "/p/a.json")
    assert str(caught.value) == "/p/a.json: nested deeper than 32 levels"
    with pytest.raises(FormatError, match="nested deeper than 32 levels"):
        check_json_nesting(b'{"a": ' * 32 + b"[]" + b"}" * 32, "a.json")


def test_many_brackets_side_by_side_are_not_depth() -> None:
    check_json_nesting(b"[" + b", ".join([b"[]"] * 1000) + b"]", "a.json")
    check_json_nesting(b"[" + b",".join([nested(31)] * 100) + b"]", "a.json")


def test_a_limit_can_be_given() -> None:
    check_json_nesting(nested(3), "a.json", limit=3)
    with pytest.raises(FormatError, match=r"^a\.json: nested deeper than 3 levels$"):
        check_json_nesting(nested(4), "a.json", limit=3)


@pytest.mark.parametrize(
    "inner",
    [
        b'"' + b"[" * 100 + b'"',
        b'"' + b"{[" * 100 + b'"',
        b'"\\"' + b"[" * 100 + b'"',  # an escaped quote does not end the string
        b'"\\\\", "' + b"[" * 100 + b'"',  # an escaped backslash does
        b'"a\\"b", "\\"' + b"{" * 100 + b'\\""',
    ],
)
def test_brackets_inside_strings_do_not_count(inner: bytes) -> None:
    check_json_nesting(nested(32, inner), "a.json")


def test_brackets_after_an_escaped_quote_string_do_count() -> None:
    # The string "\"" ends at its third quote: what follows it is structure again.
    with pytest.raises(FormatError, match="nested deeper than 32 levels"):
        check_json_nesting(b'["\\"", ' + nested(32) + b"]", "a.json")
    with pytest.raises(FormatError, match="nested deeper than 32 levels"):
        check_json_nesting(b'["\\\\", ' + nested(32) + b"]", "a.json")


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_very_deep_document_is_refused_fast(depth: int) -> None:
    data = nested(depth)
    started = time.perf_counter()
    with pytest.raises(FormatError, match="nested deeper than 32 levels"):
        check_json_nesting(data, "deep.json")
    assert time.perf_counter() - started < 0.5


def test_a_very_deep_document_of_open_brackets_only_is_refused() -> None:
    with pytest.raises(FormatError, match="nested deeper"):
        check_json_nesting(b"{" * 100_000, "deep.json")


# -- decode_json --------------------------------------------------------------------------


def test_decode_json_decodes_with_the_decoder() -> None:
    assert decode_json(b'{"x": 1, "y": 2}', POINT, "login.json", "p.json") == Point(1, 2)


def test_decode_json_strips_a_bom_and_white_space() -> None:
    assert "\ufeff".encode() == BOM
    assert decode_json(BOM + b' \r\n{"x": 3}\n\t', POINT, "login.json", "p.json") == Point(3)


def _refusal(data: bytes, kind: str = "login.json", name: str = "/h/.zread/p.json") -> str:
    with pytest.raises(FormatError) as caught:
        decode_json(data, POINT, kind, name)
    message = str(caught.value)
    assert message.startswith(f"{name}: ")
    assert "\n" not in message
    return message


@pytest.mark.parametrize("data", [b"", b"{", b"nope", b'{"x": 1,}', b"\xff", BOM + BOM + b"{}"])
def test_decode_json_refuses_what_is_not_json(data: bytes) -> None:
    assert "not JSON" in _refusal(data)


def test_decode_json_refuses_a_document_the_decoder_does_not_validate() -> None:
    assert _refusal(b'{"x": "one"}') == "/h/.zread/p.json: x: expected an integer, got a string"
    assert _refusal(b"{}") == "/h/.zread/p.json: x: missing"
    assert "expected an object, got an array" in _refusal(b"[1, 2]")


def test_decode_json_refuses_a_document_over_the_size_of_its_kind() -> None:
    data = b'{"x": 1}' + b" " * LIMITS["current"]
    message = _refusal(data, kind="current")
    assert message == "/h/.zread/p.json: larger than 4 KiB, the limit for current"
    # The same bytes are within another kind's limit.
    assert decode_json(data, POINT, "login.json", "p.json") == Point(1)


def test_decode_json_counts_the_bom_in_the_size() -> None:
    data = b'{"x": 1}'.ljust(LIMITS["current"])
    assert decode_json(data, POINT, "current", "p.json") == Point(1)
    assert "larger than 4 KiB" in _refusal(BOM + data, kind="current")


@pytest.mark.parametrize("depth", [33, 1000, 100_000])
def test_decode_json_refuses_a_document_nested_too_deep(depth: int) -> None:
    data = b'{"x": 1, "extra": ' + nested(depth) + b"}"
    started = time.perf_counter()
    message = _refusal(data, kind="wiki.json")
    assert time.perf_counter() - started < 0.5
    assert message == "/h/.zread/p.json: nested deeper than 32 levels"


def test_decode_json_accepts_what_nests_32_deep() -> None:
    data = b'{"x": 1, "extra": ' + nested(31) + b"}"
    assert decode_json(data, POINT, "login.json", "p.json") == Point(1)


def test_an_unterminated_string_is_scanned_in_linear_time() -> None:
    # a pattern that needs the closing quote rescans from every quote: quadratic
    hostile = b"[" * 33 + b'"' + b'\\"' * (1 << 20)
    started = time.monotonic()
    with pytest.raises(FormatError, match="nested deeper than 32 levels"):
        check_json_nesting(hostile, "wiki.json")
    assert time.monotonic() - started < 5  # seconds where the old pattern took hours
    check_json_nesting(b'["' + b'\\"[' * 100 + b'"]', "strings.json")  # brackets in a string


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("Expected `int`, got `str` - at `$.a`", ("a", "expected an integer, got a string")),
        ("Expected `int | null`, got `str`", ("", "expected an integer or null, got a string")),
        ("Expected `object`, got `array`", ("", "expected an object, got an array")),
        (
            "Expected `float`, got `bool` - at `$.d[...]`",
            ("d[<key>]", "expected a number, got true or false"),
        ),
        ("Object contains unknown field `z`", ("z", "unknown key")),
        ("Object contains unknown field `z` - at `$.p[1]`", ("p[1].z", "unknown key")),
        ("Object missing required field `a` - at `$.w`", ("w.a", "missing")),
        (
            "Invalid enum value 'fr' - at `$.lang`",
            ("lang", "'fr' is not one of the allowed values"),
        ),
        ("Integer value out of range - at `$.n`", ("n", "integer value out of range")),
        ("speed must be a number >= 0", ("", "speed must be a number >= 0")),
    ],
)
def test_explain_says_msgspec_messages_in_the_simulators_words(
    message: str, words: tuple[str, str]
) -> None:
    assert explain(message) == words
    assert "`" not in in_words(message)
