"""Tests of simulator/formats/log.py: one log call is one line, stamped with the local
time and its offset."""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Iterator

import pytest

from simulator.formats.log import encode_line

UTC_NOON = dt.datetime(2026, 4, 6, 12, 0, 0, 123_456, tzinfo=dt.UTC)


@pytest.fixture
def local_zone() -> Iterator[None]:
    """The process's local time zone is UTC+05:30 (no daylight saving) for the test."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "IST-05:30"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.usefixtures("local_zone")
def test_the_line_is_stamped_with_the_local_time_and_its_offset() -> None:
    assert encode_line(UTC_NOON, "start: seed 0") == (
        b"2026-04-06T17:30:00+05:30 zread-sim start: seed 0\n"
    )


@pytest.mark.usefixtures("local_zone")
def test_a_naive_time_is_taken_as_local() -> None:
    line = encode_line(dt.datetime(2026, 4, 6, 9, 8, 7, 999_999), "x")
    assert line == b"2026-04-06T09:08:07+05:30 zread-sim x\n"


def test_the_stamp_has_an_offset_whatever_the_zone() -> None:
    line = encode_line(dt.datetime.now(), "text").decode()
    stamp, rest = line.split(" ", 1)
    assert rest == "zread-sim text\n"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}", stamp)
    assert dt.datetime.fromisoformat(stamp).utcoffset() is not None


@pytest.mark.parametrize(
    ("text", "flat"),
    [
        ("first", "first"),
        ("second\n", "second"),
        ("trailing\r\n\r\n", "trailing"),
        ("multi\nline\r\ntext", "multi line text"),
        ("a\rb", "a b"),
        ("a\u2028b\u2029c\x85d\x0be\x0cf", "a b c d e f"),
        ("", ""),
    ],
)
def test_one_call_is_one_line(text: str, flat: str) -> None:
    line = encode_line(UTC_NOON, text)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert b"\r" not in line
    body = line.decode().split(" zread-sim ", 1)[1]
    assert body == flat + "\n"
    assert len(line.decode().splitlines()) == 1


def test_non_ascii_text_is_utf8() -> None:
    line = encode_line(UTC_NOON, "wiki 项目概览 written")
    assert line.endswith(" zread-sim wiki 项目概览 written\n".encode())
