"""Tests for simulator.core.lines: a byte stream cut into command lines."""

from __future__ import annotations

from simulator.core.envelope import MAX_LINE_BYTES, decode_command
from simulator.core.lines import LineBuffer


def test_line_buffer_splits_lines() -> None:
    buf = LineBuffer()
    assert buf.push(b"a\nbb\n\nccc\n") == [b"a", b"bb", b"", b"ccc"]
    assert buf.finish() == []


def test_line_buffer_joins_chunks() -> None:
    buf = LineBuffer()
    assert buf.push(b'{"ty') == []
    assert buf.push(b'pe":') == []
    assert buf.push(b'"quit"}\n{"a"') == [b'{"type":"quit"}']
    assert buf.push(b":1}\n") == [b'{"a":1}']


def test_line_buffer_byte_by_byte() -> None:
    data = b"one\ntwo\nthree\n"
    buf = LineBuffer()
    out: list[bytes] = []
    for i in range(len(data)):
        out += buf.push(data[i : i + 1])
    assert out == [b"one", b"two", b"three"]


def test_line_buffer_crlf_lines_decode_like_lf_lines() -> None:
    buf = LineBuffer()
    lines = buf.push(b'{"type":"quit"}\r\n\r\n{"type":"save"}\r')
    lines += buf.push(b"\n")
    assert [line.rstrip(b"\r") for line in lines] == [b'{"type":"quit"}', b"", b'{"type":"save"}']
    assert [decode_command(lines[0]).type, decode_command(lines[2]).type] == ["quit", "save"]
    assert not lines[1].strip()


def test_line_buffer_finish_returns_unterminated_last_line() -> None:
    buf = LineBuffer()
    assert buf.push(b'a\n{"type":"quit"}') == [b"a"]
    assert buf.finish() == [b'{"type":"quit"}']
    assert buf.finish() == []


def test_line_of_exactly_the_limit_passes_whole() -> None:
    body = b"x" * MAX_LINE_BYTES
    buf = LineBuffer()
    assert buf.push(body[:1000]) == []
    assert buf.push(body[1000:]) == []
    assert buf.push(b"\nnext\n") == [body, b"next"]


def test_line_of_exactly_the_limit_at_end_of_input() -> None:
    body = b"y" * MAX_LINE_BYTES
    buf = LineBuffer()
    assert buf.push(body) == []
    assert buf.finish() == [body]


def test_oversized_line_comes_out_once_cut_and_rest_is_skipped() -> None:
    buf = LineBuffer()
    out = buf.push(b"a" * (MAX_LINE_BYTES - 10))
    out += buf.push(b"b" * 100)
    assert len(out) == 1
    assert len(out[0]) == MAX_LINE_BYTES + 2
    assert out[0] == (b"a" * (MAX_LINE_BYTES - 10) + b"b" * 100)[: MAX_LINE_BYTES + 2]
    for _ in range(5):
        assert buf.push(b"c" * 300_000) == []
    assert buf.push(b'ccc\n{"type":"quit"}\n') == [b'{"type":"quit"}']
    assert buf.finish() == []


def test_oversized_line_in_one_push_then_next_line_intact() -> None:
    buf = LineBuffer()
    out = buf.push(b"z" * (MAX_LINE_BYTES + 5000) + b"\nok\n")
    assert out == [b"z" * (MAX_LINE_BYTES + 2), b"ok"]


def test_oversized_unterminated_line_is_not_repeated_at_finish() -> None:
    buf = LineBuffer()
    assert len(buf.push(b"q" * (MAX_LINE_BYTES + 2))) == 1
    assert buf.push(b"more") == []
    assert buf.finish() == []


def test_line_of_limit_and_a_return_comes_out_whole() -> None:
    body = b"v" * MAX_LINE_BYTES + b"\r"
    buf = LineBuffer()
    assert buf.push(body + b"\nnext\n") == [body, b"next"]


def test_line_of_limit_plus_two_comes_out_once_at_its_length() -> None:
    body = b"w" * (MAX_LINE_BYTES + 2)
    buf = LineBuffer()
    assert buf.push(body) == [body]
    assert buf.push(b"\nafter\n") == [b"after"]
