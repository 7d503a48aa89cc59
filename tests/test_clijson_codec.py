"""simulator.clijson_codec: JSON written and read as Go's encoding/json does."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import clijson
from simulator.clijson_codec import ClijsonError, PayloadEncodeError, decode, marshal

# -- floats as Go writes them --------------------------------------------------------------

GO_FLOATS = [
    (2.0, b"2"),
    (-2.5, b"-2.5"),
    (0.0, b"0"),
    (-0.0, b"-0"),
    (0.1, b"0.1"),
    (3.14, b"3.14"),
    (123456789.0, b"123456789"),
    (1e-7, b"1e-7"),
    (1.5e-7, b"1.5e-7"),
    (9.99e-7, b"9.99e-7"),
    (1e-6, b"0.000001"),
    (1.5e-5, b"0.000015"),
    (1e-10, b"1e-10"),
    (-1.5e-300, b"-1.5e-300"),
    (5e-324, b"5e-324"),
    (1e15, b"1000000000000000"),
    (1e16, b"10000000000000000"),
    (1e20, b"100000000000000000000"),
    (9.999999999999999e20, b"999999999999999900000"),
    (1e21, b"1e+21"),
    (1.5e21, b"1.5e+21"),
    (1e100, b"1e+100"),
    (1.7976931348623157e308, b"1.7976931348623157e+308"),
]


@pytest.mark.parametrize(("value", "spelled"), GO_FLOATS)
def test_floats_are_spelled_as_go_spells_them(value: float, spelled: bytes) -> None:
    assert marshal([value]) == b"[" + spelled + b"]"
    assert marshal({"x": value}) == b'{"x":' + spelled + b"}"
    assert float(decode(marshal({"x": value}))["x"]) == value


def test_integral_float_subclasses_and_ints_in_one_payload() -> None:
    class Ratio(float):
        pass

    class Count(int):
        def __repr__(self) -> str:
            return "Count(...)"

    value = {"n": 2.0, "t": 1e-07, "z": -0.0, "r": Ratio(0.5), "c": Count(3), "b": True}
    assert marshal(value) == b'{"n":2,"t":1e-7,"z":-0,"r":0.5,"c":3,"b":true}'


@pytest.mark.parametrize(
    ("value", "go_name"), [(math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")]
)
def test_nan_and_infinities_are_unsupported_values(value: float, go_name: str) -> None:
    with pytest.raises(PayloadEncodeError, match=rf"unsupported value: {re.escape(go_name)}$"):
        marshal({"deep": [1, {"x": value}]})


_GO_FLOAT = re.compile(rb"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?(e[+-][1-9][0-9]*)?")


def _significant(text: str) -> str:
    return text.split("e")[0].lstrip("-").replace(".", "").strip("0")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_finite_float_is_go_notation_with_the_shortest_digits(value: float) -> None:
    text = marshal(value)
    assert _GO_FLOAT.fullmatch(text), text
    exponent_form = value != 0 and not 1e-6 <= abs(value) < 1e21
    assert (b"e" in text) is exponent_form
    assert float(text) == value
    assert math.copysign(1.0, float(text)) == math.copysign(1.0, value)
    assert _significant(text.decode()) == _significant(repr(value))


# -- strings, containers and what JSON cannot carry ---------------------------------------


def test_compact_with_keys_in_insertion_order_and_non_ascii_raw() -> None:
    value = {"z": [1, None, False], "a": ("t", {}), "caf\u00e9": "<b> & \u2028"}
    # HTML escaping is the framing's: the codec leaves < > & and U+2028 as they are.
    assert marshal(value) == '{"z":[1,null,false],"a":["t",{}],"café":"<b> & \u2028"}'.encode()
    assert marshal('a\n\t\x01"\\') == b'"a\\n\\t\\u0001\\"\\\\"'


def test_lone_surrogate_is_written_as_go_writes_invalid_utf8() -> None:
    """UTF-8 cannot carry a lone surrogate; Go writes invalid UTF-8 as \\ufffd."""
    value = {"k\ud800": "a\udcffb", "pair": "\ud83d\ude00"}
    assert marshal(value) == b'{"k\\ufffd":"a\\ufffdb","pair":"\\ufffd\\ufffd"}'


def test_deep_nesting_encodes_as_go_encodes_it() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    written = marshal(deep)
    assert written == b"[" * 100_001 + b"]" * 100_001
    with pytest.raises(RecursionError):
        decode(written)  # deeper than the reader goes
    shallow: list[Any] = [1]
    for index in range(300):
        shallow = [index, {"k": shallow}]
    assert decode(marshal(shallow)) == shallow


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append({"back": loop})
    return loop


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (_cycle(), "unsupported value: encountered a cycle via list"),
        ({"x": b"bytes"}, "unsupported type: bytes"),
        ([{1, 2}], "unsupported type: set"),
        ({1.5: "float key"}, "unsupported map key type: float"),
        ({None: "null key"}, "unsupported map key type: NoneType"),
        ({True: "bool key"}, "unsupported map key type: bool"),
        ([10**5000], "unsupported value: an integer of 16610 bits"),
    ],
)
def test_values_json_cannot_carry_are_encode_errors(obj: object, reason: str) -> None:
    with pytest.raises(PayloadEncodeError) as info:
        marshal(obj)
    assert str(info.value) == f"clijson: payload does not encode: {reason}"


def test_shared_values_are_not_cycles_and_int_keys_are_strings() -> None:
    shared = {"s": [1]}
    value = {1: shared, -2: shared, "t": (shared, shared)}
    assert marshal(value) == b'{"1":{"s":[1]},"-2":{"s":[1]},"t":[{"s":[1]},{"s":[1]}]}'


# -- reading ------------------------------------------------------------------------------


def test_strings_are_read_as_go_reads_them() -> None:
    payload = (
        b'{"a":"\\ud800x","b":"\\ud83d\\ude00","c":"\xff\xe2\x80!",'
        b'"\\udc00":[1,"\\udfff\\ud800"],"d":"\\\\ud800","e":"\\ud800\\ud83d\\ude00"}'
    )
    assert decode(payload) == {
        "a": "\ufffdx",
        "b": "\U0001f600",
        "c": "\ufffd\ufffd\ufffd!",
        "\ufffd": [1, "\ufffd\ufffd"],
        "d": "\\ud800",
        "e": "\ufffd\U0001f600",
    }
    assert decode(b'"\\udc00"') == "\ufffd"
    assert decode(b'"\xff"') == "\ufffd"


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"a":NaN}', "invalid literal NaN: JSON has no NaN or Infinity"),
        (b"[Infinity]", "invalid literal Infinity: JSON has no NaN or Infinity"),
        (b"-Infinity", "invalid literal -Infinity: JSON has no NaN or Infinity"),
        (b"1e400", "number 1e400 is out of the range of a float"),
        (b"[-1e999]", "number -1e999 is out of the range of a float"),
        (b"1" + b"0" * 400, "number 1" + "0" * 36 + "... is out of the range of a float"),
        (b"[-" + b"9" * 309 + b"]", "number -" + "9" * 36 + "... is out of the range of a float"),
        (b"1" + b"0" * 5000, "number 1" + "0" * 36 + "... is out of the range of a float"),
        (
            b"1." + b"0" * 50 + b"e400",
            "number 1." + "0" * 35 + "... is out of the range of a float",
        ),
    ],
)
def test_what_go_refuses_is_a_value_error_that_names_it(payload: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        decode(payload)


def test_an_integer_is_kept_while_a_float_holds_it_as_go_rounds() -> None:
    largest = int(sys.float_info.max)
    halfway = largest + 2**970  # half a step above: Go's ParseFloat rounds to +Inf
    assert decode(str(halfway - 1).encode()) == halfway - 1
    assert decode(b"[-" + str(halfway - 1).encode() + b"]") == [-(halfway - 1)]
    with pytest.raises(
        ValueError, match=r"^number 1797693134862315.* out of the range of a float$"
    ):
        decode(str(halfway).encode())


def test_unmarshal_words_an_integer_beyond_a_float_in_its_own_words() -> None:
    with pytest.raises(clijson.PayloadDecodeError) as caught:
        clijson.unmarshal(clijson.framed(b'{"n":1' + b"0" * 5000 + b"}"))
    message = str(caught.value)
    assert message.startswith("clijson: payload does not parse: number 1000")
    assert "is out of the range of a float" in message
    assert "set_int_max_str_digits" not in message and len(message) < 1000


@pytest.mark.parametrize("payload", [b"\xff1", b'{"a":1}\xff', b"[1,]", b""])
def test_what_is_not_json_is_a_value_error(payload: bytes) -> None:
    with pytest.raises(json.JSONDecodeError):
        decode(payload)


# -- the errors ---------------------------------------------------------------------------


def test_the_errors_are_clijsons() -> None:
    assert clijson.ClijsonError is ClijsonError
    assert clijson.PayloadEncodeError is PayloadEncodeError
    assert issubclass(PayloadEncodeError, ClijsonError)
    assert issubclass(PayloadEncodeError, TypeError) and issubclass(PayloadEncodeError, ValueError)
