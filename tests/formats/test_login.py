"""Tests of simulator/formats/login.py: login.json as the simulator writes it, and any
JSON object read as one."""

from __future__ import annotations

import datetime as dt
import inspect

import pytest

from simulator.formats.bounds import BOM, LIMITS, FormatError
from simulator.formats.login import LoginRecord, decode_login, encode_login

AT = dt.datetime(2026, 4, 6, 19, 2, 13, 183_259, tzinfo=dt.UTC)


def test_login_round_trip_and_layout() -> None:
    data = encode_login("octocat", "global", "glm-4.6", logged_in_at=AT)
    assert data == (
        b'{\n  "username": "octocat",\n  "region": "global",\n  "model": "glm-4.6",\n'
        b'  "logged_in_at": "2026-04-06T19:02:13.183259Z"\n}'
    )
    assert decode_login(data) == LoginRecord(
        username="octocat",
        region="global",
        model="glm-4.6",
        logged_in_at="2026-04-06T19:02:13.183259Z",
    )


def test_the_time_is_required_and_written_as_go_utc() -> None:
    parameter = inspect.signature(encode_login).parameters["logged_in_at"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is inspect.Parameter.empty
    with pytest.raises(TypeError):
        encode_login("a", "b", "c")  # type: ignore[call-arg]
    local = dt.datetime(2026, 4, 6, 13, 2, 13, tzinfo=dt.timezone(-dt.timedelta(hours=6)))
    assert decode_login(encode_login("a", "b", "c", logged_in_at=local)).logged_in_at == (
        "2026-04-06T19:02:13Z"
    )
    naive = dt.datetime(2026, 4, 6, 19, 2, 13, 500_000)
    assert decode_login(encode_login("a", "b", "c", logged_in_at=naive)).logged_in_at == (
        "2026-04-06T19:02:13.5Z"
    )


def test_encode_login_escapes_as_go_does() -> None:
    data = encode_login("A & <B>", "中国", "m\u2028", logged_in_at=AT)
    assert b'"username": "A \\u0026 \\u003cB\\u003e"' in data
    assert '"region": "中国"'.encode() in data
    assert b'"model": "m\\u2028"' in data
    assert decode_login(data).username == "A & <B>"


def test_decode_login_reads_any_object() -> None:
    record = decode_login(BOM + b'{"token": "t", "username": "u", "nested": {"a": [1]}}\n')
    assert record == LoginRecord(username="u")
    assert decode_login(b"{}") == LoginRecord()
    assert (record.region, record.model, record.logged_in_at) == ("", "", "")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "not JSON"),
        (b"nope", "not JSON"),
        (b"[]", "expected an object, got an array"),
        (b'"user"', "expected an object, got a string"),
        (b"null", "expected an object, got null"),
        (b"3", "expected an object, got an integer"),
        (b'{"username": 3}', "username: expected a string, got an integer"),
    ],
)
def test_decode_login_refuses_what_is_not_a_login_object(data: bytes, problem: str) -> None:
    with pytest.raises(FormatError) as caught:
        decode_login(data)
    message = str(caught.value)
    assert message.startswith("login.json: ") and problem in message
    assert "\n" not in message


def test_decode_login_names_the_name_given() -> None:
    with pytest.raises(FormatError, match=r"^/home/u/\.zread/login\.json: "):
        decode_login(b"[]", "/home/u/.zread/login.json")


def test_decode_login_refuses_a_file_over_64_kib() -> None:
    data = b'{"username": "u"}'.ljust(LIMITS["login.json"])
    assert decode_login(data).username == "u"
    with pytest.raises(FormatError) as caught:
        decode_login(data + b" ", "/h/login.json")
    assert str(caught.value) == "/h/login.json: larger than 64 KiB, the limit for login.json"


@pytest.mark.parametrize("depth", [33, 30_000])  # 30000 deep is still under 64 KiB
def test_decode_login_refuses_a_document_nested_too_deep(depth: int) -> None:
    # Even under a key it ignores.
    data = b'{"username": "u", "extra": ' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(FormatError) as caught:
        decode_login(data)
    assert str(caught.value) == "login.json: nested deeper than 32 levels"
