from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.clijson import (
    BEGIN_MARKER,
    CHUNK_MARKER,
    END_MARKER,
    FrameError,
    NoPayloadError,
    PayloadDecodeError,
    TruncatedFrameError,
    chunk_payload,
    emit,
    emit_chunk,
    extract,
    unmarshal,
)

ROOT = Path(__file__).resolve().parents[1]


class RecordingWriter:
    """A binary writer that keeps each write call separately (and has no flush)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.writes.append(bytes(data))
        return len(data)

    @property
    def data(self) -> bytes:
        return b"".join(self.writes)


def framed(obj: object) -> bytes:
    out = io.BytesIO()
    emit(out, obj)
    return out.getvalue()


def test_marker_strings_are_the_wire_format() -> None:
    assert BEGIN_MARKER == "<<<cloop-json:begin>>>"
    assert END_MARKER == "<<<cloop-json:end>>>"
    assert CHUNK_MARKER == "<<<cloop-json:chunk>>>"


def test_emit_is_one_write_starting_with_a_newline() -> None:
    w = RecordingWriter()
    emit(w, {"summary": "ok", "n": [1, 2]})
    assert len(w.writes) == 1
    assert w.writes[0] == (
        b"\n<<<cloop-json:begin>>>\n" + b'{"summary":"ok","n":[1,2]}' + b"\n<<<cloop-json:end>>>\n"
    )


def test_emit_escapes_html_characters_and_line_separators() -> None:
    data = framed({"s": "<b> & \u2028\u2029 caf\u00e9"})
    payload = data.split(b"\n")[2]
    assert payload == b'{"s":"\\u003cb\\u003e \\u0026 \\u2028\\u2029 caf\xc3\xa9"}'
    assert unmarshal(data) == {"s": "<b> & \u2028\u2029 caf\u00e9"}


def test_payload_quoting_end_marker_cannot_break_extraction() -> None:
    obj = {"text": f"\n{END_MARKER}\n{BEGIN_MARKER}\n{CHUNK_MARKER}"}
    data = framed(obj)
    assert data.count(END_MARKER.encode()) == 1
    assert data.count(BEGIN_MARKER.encode()) == 1
    assert CHUNK_MARKER.encode() not in data
    assert unmarshal(data) == obj


def test_lone_surrogate_round_trips() -> None:
    assert unmarshal(framed({"p": "a\udcffb"})) == {"p": "a\udcffb"}


@pytest.mark.parametrize(
    ("obj", "error"),
    [({"x": object()}, TypeError), ({"x": float("nan")}, ValueError)],
)
def test_emit_writes_nothing_when_not_serialisable(obj: object, error: type[Exception]) -> None:
    w = RecordingWriter()
    with pytest.raises(error):
        emit(w, obj)
    with pytest.raises(error):
        emit_chunk(w, obj)
    assert w.writes == []


def test_emit_chunk_is_one_write_of_one_line() -> None:
    w = RecordingWriter()
    emit_chunk(w, {"delta": "line one\nline <two> & three"})
    assert len(w.writes) == 1
    line = w.writes[0]
    assert line.startswith(CHUNK_MARKER.encode())
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert CHUNK_MARKER.encode() not in line[len(CHUNK_MARKER) :]
    payload = chunk_payload(line)
    assert payload is not None
    assert json.loads(payload) == {"delta": "line one\nline <two> & three"}


def test_round_trip_extract_and_unmarshal() -> None:
    obj = {"summary": "r\u00e9sum\u00e9", "suggestions": [{"id": 1, "ok": True}, None]}
    data = framed(obj)
    assert extract(data) == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    assert unmarshal(data) == obj
    assert unmarshal(framed([])) == []
    assert unmarshal(framed("just a string")) == "just a string"


def test_diagnostics_before_and_after_the_frame() -> None:
    buf = (
        b"\x1b[1mcloop\x1b[0m banner {not json}\n"
        b"warning: statedb schema diverges\n"
        b"partial diagnostic without newline" + framed({"a": 1}) + b"warning: after the frame } {\n"
    )
    assert unmarshal(buf) == {"a": 1}


def test_last_frame_wins_with_diagnostics_between_frames() -> None:
    buf = framed({"n": 1}) + b"warning: retrying {x}\n" + framed({"n": 2}) + b"done\n"
    assert unmarshal(buf) == {"n": 2}


def test_marker_quoted_inside_a_longer_line_is_not_a_marker() -> None:
    buf = (
        f"warning: stray {END_MARKER} seen\nnote: {BEGIN_MARKER} quoted\n".encode()
        + framed({"ok": True})
        + f"hint: expected {BEGIN_MARKER} after\n".encode()
    )
    assert unmarshal(buf) == {"ok": True}
    # With only quoted markers there is no frame: the unframed fallback applies.
    quoted_only = f'log: {BEGIN_MARKER} and {END_MARKER}\n{{"v": 3}}\n'.encode()
    assert unmarshal(quoted_only) == {"v": 3}


def test_markers_tolerate_surrounding_whitespace_and_crlf() -> None:
    buf = f'noise\r\n  {BEGIN_MARKER}  \r\n{{"w": 1}}\r\n\t{END_MARKER}\r\n'.encode()
    assert extract(buf) == b'{"w": 1}'


def test_begin_without_end_is_truncated() -> None:
    buf = b"warning: x\n" + framed({"a": 1})[: -len(END_MARKER) - 2]
    with pytest.raises(TruncatedFrameError, match="begin marker with no end") as info:
        extract(buf)
    assert "warning: x" in str(info.value)


def test_truncated_last_frame_is_not_masked_by_an_earlier_one() -> None:
    buf = framed({"old": 1}) + f'\n{BEGIN_MARKER}\n{{"new":'.encode()
    with pytest.raises(TruncatedFrameError):
        extract(buf)


def test_end_without_begin_is_truncated() -> None:
    buf = f'"a":1}}\n{END_MARKER}\n'.encode()
    with pytest.raises(TruncatedFrameError, match="end marker with no begin") as info:
        unmarshal(buf)
    assert info.value.output_head == f'"a":1}} {END_MARKER}'


def test_unframed_fallback_takes_first_to_last_brace() -> None:
    buf = b'warning: old binary\n{"a": {"b": 2}}\ntrailing text\n'
    assert extract(buf) == b'{"a": {"b": 2}}'
    assert unmarshal(buf) == {"a": {"b": 2}}


@pytest.mark.parametrize("buf", [b"", b"  \n\t\r\n"])
def test_no_payload_for_empty_output(buf: bytes) -> None:
    with pytest.raises(NoPayloadError) as info:
        unmarshal(buf)
    assert "the output was empty" in str(info.value)
    assert info.value.output_head == ""


def test_no_payload_for_noise_quotes_the_noise_on_one_line() -> None:
    with pytest.raises(NoPayloadError) as info:
        extract(b"warning: no\n  result\there } {\n")
    message = str(info.value)
    assert '"warning: no result here } {"' in message
    assert "\n" not in message
    assert info.value.output_head == "warning: no result here } {"


def test_no_payload_message_is_bounded_for_large_noise() -> None:
    noise = b"".join(b"noise line %05d\n" % i for i in range(700))
    assert len(noise) > 10_000
    with pytest.raises(NoPayloadError) as info:
        extract(noise)
    message = str(info.value)
    assert len(message) < 400
    assert "\n" not in message
    assert info.value.output_head.startswith("noise line 00000 noise line 00001")
    assert info.value.output_head.endswith("...")
    assert len(info.value.output_head) == 203


def test_invalid_utf8_in_output_is_replaced() -> None:
    with pytest.raises(NoPayloadError) as info:
        extract(b"bad \xff byte")
    assert info.value.output_head == "bad \ufffd byte"


def test_all_errors_are_frame_errors_and_value_errors() -> None:
    for cls in (NoPayloadError, TruncatedFrameError, PayloadDecodeError):
        assert issubclass(cls, FrameError)
    assert issubclass(FrameError, ValueError)
    raised: list[FrameError] = []
    for buf in (b"", f"{BEGIN_MARKER}\n".encode(), b"{nope}"):
        with pytest.raises(ValueError, match=r"^clijson: ") as info:
            unmarshal(buf)
        assert isinstance(info.value, FrameError)
        raised.append(info.value)
    assert [type(e) for e in raised] == [NoPayloadError, TruncatedFrameError, PayloadDecodeError]
    assert not isinstance(raised[2], NoPayloadError)


def test_decode_error_quotes_payload_and_output() -> None:
    buf = b"warning: w\n" + f"{BEGIN_MARKER}\n{{'single': quotes}}\n{END_MARKER}\n".encode()
    with pytest.raises(PayloadDecodeError) as info:
        unmarshal(buf)
    err = info.value
    assert err.payload == b"{'single': quotes}"
    assert "payload: \"{'single': quotes}\"" in str(err)
    assert err.output_head.startswith("warning: w")
    assert "the output began" in str(err)
    assert isinstance(err.__cause__, json.JSONDecodeError)


def test_decode_error_bounds_a_long_payload() -> None:
    bad = b"{" + b"x" * 5000 + b"}"
    with pytest.raises(PayloadDecodeError) as info:
        unmarshal(bad)
    assert info.value.payload == bad
    assert len(str(info.value)) < 600


def test_chunk_payload_after_unfinished_diagnostic() -> None:
    w = RecordingWriter()
    w.write(b"warning: half a line ")
    emit_chunk(w, {"d": "x"})
    assert chunk_payload(w.data) == b'{"d":"x"}'


def test_chunk_payload_takes_last_marker_and_accepts_str() -> None:
    line = f'diag quoting {CHUNK_MARKER} here {CHUNK_MARKER}{{"d": 2}}\r\n'
    assert chunk_payload(line) == b'{"d": 2}'
    assert chunk_payload(line.encode()) == b'{"d": 2}'


@pytest.mark.parametrize("line", [b"", b"warning: nothing\n", "ordinary str line\n", b'{"a":1}\n'])
def test_chunk_payload_none_for_ordinary_lines(line: bytes | str) -> None:
    assert chunk_payload(line) is None


SCRIPT = r"""
import sys
from simulator.clijson import emit, emit_chunk

print("banner: starting", flush=True)
sys.stderr.write("warning: statedb schema diverges\n")
sys.stderr.flush()
sys.stderr.write("unfinished diagnostic ")
sys.stderr.flush()
emit_chunk(sys.stdout.buffer, {"delta": "Hel"})
emit_chunk(sys.stdout.buffer, {"delta": "lo <<<cloop-json:end>>>\n"})
sys.stderr.write("warning: late {brace}\n")
sys.stderr.flush()
emit(sys.stdout.buffer, {"summary": "ok", "suggestions": ["a", "<b>"]})
sys.stderr.write("warning: after\n")
sys.stderr.flush()
"""


def test_subprocess_with_merged_stderr() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        timeout=30,
        check=True,
    )
    out = proc.stdout
    assert b"warning: statedb schema diverges" in out
    assert b"unfinished diagnostic " + CHUNK_MARKER.encode() in out
    lines = out.splitlines(keepends=True)
    payloads = [p for p in map(chunk_payload, lines) if p is not None]
    assert len(payloads) == 2
    assert "".join(json.loads(p)["delta"] for p in payloads) == f"Hello {END_MARKER}\n"
    assert unmarshal(out) == {"summary": "ok", "suggestions": ["a", "<b>"]}
