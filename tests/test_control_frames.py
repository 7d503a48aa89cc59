"""simulator.control_frames: a line decoded whatever it holds, and what a frame cannot
hold named in the simulator's words. (Frames written, and how a Conn answers, are
tests/test_control.py's.)"""

from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.control_frames import (
    INVALID_STRING,
    MAX_DEPTH,
    NOT_UTF8,
    NUMBER_OUT_OF_RANGE,
    TOO_DEEP,
    Unencodable,
    decode,
    encode,
    frame_problem,
    id_back,
    kind_of,
)

FLOAT_MAX = int(sys.float_info.max)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b'{"n":1}', ""),
        (b'{"n":' + str(FLOAT_MAX).encode() + b"}", ""),
        (b'{"n":-' + str(FLOAT_MAX).encode() + b"}", ""),
        (b'{"n":' + str(FLOAT_MAX + 1).encode() + b"}", NUMBER_OUT_OF_RANGE),
        (b'{"n":' + b"1" * 4301 + b"}", NUMBER_OUT_OF_RANGE),
        (b'{"n":' + b"1" * 1_000_000 + b"}", NUMBER_OUT_OF_RANGE),
        (b'{"n":1e400}', NUMBER_OUT_OF_RANGE),
        (b'{"n":-1.5E+999}', NUMBER_OUT_OF_RANGE),
        (b'{"n":1e-999}', ""),
        (b'{"n":' + b"1" * 250 + b"e60}", NUMBER_OUT_OF_RANGE),  # no long run, no long exponent
        (b'{"n":' + b"1" * 250 + b".5E+60}", NUMBER_OUT_OF_RANGE),
        (b'{"n":"\\ud800"}', INVALID_STRING),
        (b'{"\\udc00":1}', INVALID_STRING),
        (b'{"n":"\\ud83d\\ude00"}', ""),
        (b'{"n":"\xff"}', NOT_UTF8),
        (b'{"n":"\xed\xa0\x80"}', NOT_UTF8),
        (b'{"n":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}", ""),
        (b'{"n":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}", TOO_DEEP),
        (b'{"n":' + b"[" * 200_000 + b"]" * 200_000 + b"}", TOO_DEEP),
    ],
)
def test_decode_and_frame_problem_name_what_a_frame_cannot_hold(text: bytes, problem: str) -> None:
    value, found = decode(text)
    assert isinstance(value, dict) and set(value) <= {"n", "\udc00"}
    assert (found or frame_problem(value)) == problem


def test_a_number_out_of_range_weighs_more_than_depth_and_depth_than_a_surrogate() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value, _ = decode(f'{{"a":"\\ud800","b":{deep},"c":1e999}}')
    assert frame_problem(value) == NUMBER_OUT_OF_RANGE
    value, _ = decode(f'{{"a":"\\ud800","b":{deep}}}')
    assert frame_problem(value) == TOO_DEEP


def test_a_frame_too_deep_for_the_decoder_is_read_to_what_names_it() -> None:
    deep = "[" * 100_000 + '"x]{"' + "]" * 100_000  # brackets inside a string count not
    line = (
        '{"type":"control_request","request_id":"r1","request":{"subtype":"inject",'
        f'"fault":{deep},"n":2}},"after":[1,{{"k":[{deep}]}}]}}'
    )
    value, problem = decode(line)
    assert problem == TOO_DEEP
    assert value == {
        "type": "control_request",
        "request_id": "r1",
        "request": {"subtype": "inject", "fault": None, "n": 2},
        "after": [1, None],
    }


@pytest.mark.parametrize(
    "text",
    [
        b"[" * 100_000,
        b"]" * 100_000,
        b'{"type":"control_request","x":' + b"[" * 100_000 + b"}" * 100_000,
        b"",
        b"not json",
        b'{"x":NaN}',
        b'{"x":-Infinity}',
    ],
)
def test_what_is_not_json_is_not_a_frame(text: bytes) -> None:
    with pytest.raises(ValueError, match=r"^not JSON"):
        decode(text)


@given(st.binary(max_size=200) | st.text(max_size=200))
def test_decode_raises_nothing_but_value_error(line: bytes | str) -> None:
    try:
        value, problem = decode(line)
    except ValueError:
        return
    assert problem in ("", NOT_UTF8, TOO_DEEP)
    assert frame_problem(value) in ("", NUMBER_OUT_OF_RANGE, TOO_DEEP, INVALID_STRING)


_FITS = st.integers(-FLOAT_MAX, FLOAT_MAX) | st.floats(allow_nan=False, allow_infinity=False)


@given(st.recursive(_FITS, lambda inner: st.lists(inner, max_size=4), max_leaves=20))
def test_numbers_that_fit_are_decoded_as_they_are(value: object) -> None:
    decoded, problem = decode(json.dumps({"v": value}))
    assert (problem, frame_problem(decoded)) == ("", "")
    assert decoded == {"v": value}


def test_a_request_id_is_written_back_only_when_it_can_be() -> None:
    assert [id_back(v) for v in ("r1", 5, -2.5, None, True, [], {}, "r\ud800")] == [
        "r1",
        5,
        -2.5,
        None,
        None,
        None,
        None,
        None,
    ]
    value, _ = decode(b'{"id":' + b"9" * 400 + b"}")
    assert isinstance(value, dict) and id_back(value["id"]) is None
    assert kind_of(value["id"]) == "a number"
    assert [kind_of(v) for v in (None, False, 1, 1.5, {}, [], "s")] == [
        "null",
        "a boolean",
        "a number",
        "a number",
        "an object",
        "an array",
        "a string",
    ]


def test_encode_writes_go_bytes_and_refuses_what_go_cannot() -> None:
    assert encode({"a": "<&>\u2028é", "n": 1.0}) == (
        '{"a":"\\u003c\\u0026\\u003e\\u2028é","n":1.0}\n'.encode()
    )
    for bad in ({"x": float("nan")}, {"x": "\ud800"}, {1.5: 1}, {"x": object()}):
        with pytest.raises(Unencodable):
            encode(bad)


_ANY_NUMBER = (
    st.integers()
    | st.integers(10**300, 10**320)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.builds(lambda m, e: float(f"{m}e{e}"), st.integers(1, 10**250), st.integers(0, 99)).filter(
        math.isfinite  # JSON has no Infinity: json.dumps would write one
    )
)
_ANY_TEXT = st.text(max_size=5) | st.sampled_from(["\ud800", "x\udfffy", "e1", "1e"])


@given(
    st.recursive(
        _ANY_NUMBER | _ANY_TEXT | st.none(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ANY_TEXT, inner, max_size=3),
        max_leaves=12,
    )
)
def test_decode_finds_what_the_full_walk_finds(value: object) -> None:
    """Most lines skip the walk; none that holds what it looks for does."""
    for text in (json.dumps({"v": value}), json.dumps({"v": value}, ensure_ascii=False)):
        decoded, problem = decode(text)
        assert problem == frame_problem(decoded)
