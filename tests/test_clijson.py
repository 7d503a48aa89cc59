from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import clijson
from simulator.clijson import (
    BEGIN_MARKER,
    CHUNK_MARKER,
    END_MARKER,
    ClijsonError,
    FrameError,
    NoPayloadError,
    PayloadDecodeError,
    PayloadEncodeError,
    ShortWriteError,
    TruncatedFrameError,
    chunk_line,
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
    with pytest.raises(PayloadEncodeError, match=r"^clijson: payload does not encode: "):
        emit(w, obj)
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
    quoted_only = f'log: {BEGIN_MARKER} and {END_MARKER}.\n{{"v": 3}}\n'.encode()
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


def test_usable_alone_with_its_codec(tmp_path: Path) -> None:
    # Copied without the rest of the package, the two modules still frame and read.
    package = tmp_path / "simulator"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("clijson.py", "clijson_codec.py"):
        (package / name).write_bytes((ROOT / "simulator" / name).read_bytes())
    prelude = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
    after = "from simulator.clijson import unmarshal\nprint(unmarshal(b'{\"a\":1}'))\n"
    proc = subprocess.run(
        [sys.executable, "-I", "-c", prelude + SCRIPT + after],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=30,
        check=True,
    )
    assert unmarshal(proc.stdout) == {"summary": "ok", "suggestions": ["a", "<b>"]}
    assert proc.stdout.endswith(b"{'a': 1}\n")


# -- helpers for the tests below ---------------------------------------------------------

BEGIN, END, CHUNK = BEGIN_MARKER.encode(), END_MARKER.encode(), CHUNK_MARKER.encode()


def go_framed(payload: bytes) -> bytes:
    """A frame as a writer without the leading newline (Go's Emit) writes it."""
    return BEGIN + b"\n" + payload + b"\n" + END + b"\n"


def reference_head(data: bytes, limit: int = 200) -> str:
    """How the output's head is quoted, computed from the whole output at once."""
    text = re.sub(r"\s+", " ", data.decode("utf-8", errors="replace")).strip()
    return text if len(text) <= limit else text[:limit] + "..."


def numbers_as_floats(value: Any) -> Any:
    """``value`` with every int a float: JSON has one kind of number (Go reads all of
    them as float64), and ``2.0`` is written ``2``."""
    if isinstance(value, list):
        return [numbers_as_floats(item) for item in value]
    if isinstance(value, dict):
        return {key: numbers_as_floats(item) for key, item in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


class ShortWriter(RecordingWriter):
    """A writer that takes all but the last byte and says so, without an error."""

    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def write(self, data: bytes) -> int:
        super().write(data)
        return len(data) - 1

    def flush(self) -> None:
        self.flushes += 1


# -- one encoder for every path --------------------------------------------------------------


def test_chunk_line_and_framed_escape_as_emit_does() -> None:
    obj = {"t": f"{END_MARKER}\n{BEGIN_MARKER} {CHUNK_MARKER} & \u2028\u2029"}
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    w = RecordingWriter()
    emit(w, obj)
    emit_chunk(w, obj)
    assert w.writes == [clijson.framed(raw), chunk_line(raw)]
    doc, line = w.writes
    assert doc.count(b"<<<") == 2 and doc.count(b">>>") == 2
    assert line.count(b"<<<") == 1 and line.count(b">>>") == 1
    assert b"&" not in doc + line and "\u2028".encode() not in doc + line
    assert unmarshal(doc) == obj
    assert json.loads(chunk_payload(line) or b"") == obj


def test_chunk_line_stays_one_line_for_json_with_line_breaks() -> None:
    obj = {"a": [1, {"b": "x\ny"}]}
    raw = json.dumps(obj, indent=2).encode().replace(b"\n", b"\r\n")
    line = chunk_line(raw)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    assert json.loads(chunk_payload(line) or b"") == obj


# -- where markers are found -------------------------------------------------------------------


def test_begin_marker_after_an_unfinished_diagnostic_is_recognised() -> None:
    payload = b'{"a":1}'
    for diagnostic in (b"warning: half a line", b"x", b"note: " + BEGIN + b" quoted "):
        buf = b"banner\n" + diagnostic + go_framed(payload) + b"warning: after\n"
        assert extract(buf) == payload
        assert unmarshal(buf) == {"a": 1}
    crlf = b"diag" + BEGIN + b" \t\r\n" + payload + b"\r\n" + END + b"\r\n"
    assert extract(crlf) == payload


def test_end_marker_ends_its_line_whatever_precedes_it() -> None:
    assert extract(BEGIN + b'\n{"a":1}' + END + b"\n") == b'{"a":1}'
    assert extract(BEGIN + b'\n{"a":1}\n' + END) == b'{"a":1}'
    assert extract(BEGIN + b'\n{"a":1}\n' + END + b"  \r") == b'{"a":1}'
    # A diagnostic that ends its line with a quoted end marker is one: no begin, truncated.
    with pytest.raises(TruncatedFrameError, match="end marker with no begin"):
        extract(b"log: saw " + END + b'\n{"v": 3}\n')


def test_many_quoted_markers_after_the_frame_do_not_hide_it() -> None:
    quoted = (b"note: " + BEGIN + b" quoted\n") * 50 + b"tail " + BEGIN + b"x"
    assert unmarshal(framed({"a": 1}) + quoted) == {"a": 1}
    assert unmarshal(framed({"a": 1}) + quoted + framed({"a": 2}) + quoted) == {"a": 2}
    with pytest.raises(TruncatedFrameError, match="begin marker with no end"):
        extract(framed({"a": 1}) + quoted + b"\n" + BEGIN + b"\n" + quoted)


# -- short writes --------------------------------------------------------------------------------


def test_a_short_write_is_an_error() -> None:
    for write in (emit, emit_chunk):
        w = ShortWriter()
        with pytest.raises(ShortWriteError, match=r"^clijson: short write: ") as info:
            write(w, {"a": 1})
        assert len(w.writes) == 1  # written once, never split into a second write
        assert w.flushes == 0
        assert isinstance(info.value, OSError)


def test_a_writer_that_reports_no_count_or_all_of_it_is_fine() -> None:
    class Silent:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data: bytes) -> None:
            self.data += data

    w = Silent()
    emit(w, {"a": 1})
    assert unmarshal(w.data) == {"a": 1}
    out = io.BytesIO()
    emit_chunk(out, [1])
    assert out.getvalue() == CHUNK + b"[1]\n"


# -- empty frames --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "buf",
    [
        BEGIN + b"\n" + END + b"\n",
        b"warning: w\n" + BEGIN + b"\n \t\r\n\n" + END + b"\n",
        b"diag" + BEGIN + b"\r\n" + END,
        framed({"old": 1}) + BEGIN + b"\n\n" + END + b"\n",
    ],
)
def test_an_empty_frame_has_no_payload(buf: bytes) -> None:
    for read in (extract, unmarshal):
        with pytest.raises(NoPayloadError, match="frame is empty") as info:
            read(buf)
        assert not isinstance(info.value, PayloadDecodeError)
        assert info.value.output_head == reference_head(buf)


# -- what cannot be encoded or decoded -------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [b"[" * 100_000, b'{"a":' * 100_000, b"[" * 100_000 + b"]" * 100_000],
    ids=["open-lists", "open-objects", "closed-lists"],
)
def test_deeply_nested_payload_is_a_decode_error(payload: bytes) -> None:
    with pytest.raises(PayloadDecodeError, match="exceeded max depth") as info:
        unmarshal(b"diag\n" + go_framed(payload))
    assert info.value.payload == payload
    assert len(str(info.value)) < 700


def test_chunk_payload_of_a_str_with_lone_surrogates() -> None:
    assert chunk_payload(f'x{CHUNK_MARKER}{{"a":"\udcff"}}\n') == b'{"a":"\xff"}'
    assert chunk_payload(f'{CHUNK_MARKER}"\ud800"') == b'"\xed\xa0\x80"'
    assert chunk_payload("\ud800 no chunk here") is None


@pytest.mark.parametrize(
    "payload",
    [b'{"a":NaN}', b"[Infinity]", b"-Infinity", b"1e400", b"[-1e999]", b"\xff1", b'{"a":1}\xff'],
)
def test_unmarshal_refuses_what_go_refuses(payload: bytes) -> None:
    with pytest.raises(PayloadDecodeError) as info:
        unmarshal(go_framed(payload))
    assert info.value.payload == payload


# -- large output ----------------------------------------------------------------------------------


def test_ten_mebibytes_of_newlines() -> None:
    newlines = b"\n" * (10 << 20)
    with pytest.raises(NoPayloadError, match="the output was empty") as info:
        extract(newlines)
    assert info.value.output_head == ""
    assert unmarshal(newlines + b"diag" + go_framed(b'{"a":1}') + newlines) == {"a": 1}
    with pytest.raises(TruncatedFrameError):
        extract(newlines + BEGIN + newlines)


@pytest.mark.parametrize(
    "buf",
    [
        b" " * 100_000 + b"x  y",
        "\u3000".encode() * 6000 + "caf\u00e9 \u00a0 end".encode(),
        b"a \t" * 20_000,
        b"\xe2\x82" * 9000 + "\u20ac".encode() * 9000,
        b"ab" * 8191 + "\u00e9".encode() + b"cd" * 100,
        "\u2028\x1c\x85".encode() * 7000 + b"tail",
    ],
    ids=["spaces", "ideographic-space", "many-runs", "bad-utf8", "char-across-step", "unicode-ws"],
)
def test_the_head_of_a_large_output_is_quoted_as_the_whole_would_be(buf: bytes) -> None:
    with pytest.raises(NoPayloadError) as info:
        extract(buf)
    assert info.value.output_head == reference_head(buf)


# -- the error tree --------------------------------------------------------------------------------


def test_the_error_tree() -> None:
    for cls in (FrameError, PayloadEncodeError, ShortWriteError):
        assert issubclass(cls, ClijsonError)
        assert cls.__name__ in clijson.__all__
    assert issubclass(PayloadEncodeError, TypeError) and issubclass(PayloadEncodeError, ValueError)
    assert issubclass(ShortWriteError, OSError)
    assert not issubclass(PayloadEncodeError, FrameError)
    assert not issubclass(ShortWriteError, FrameError)
    assert "ClijsonError" in clijson.__all__


# -- properties ------------------------------------------------------------------------------------

_MARKERISH = [
    BEGIN_MARKER,
    END_MARKER,
    CHUNK_MARKER,
    "<<<cloop-json:",
    "begin>>>",
    "end>>>",
    "chunk>>>",
    "<<<",
    ">>>",
    "<",
    ">",
    "&",
    "\u2028",
    "\u2029",
]
_STRINGS = st.text(max_size=12) | st.lists(
    st.sampled_from([*_MARKERISH, "\n", "x"]), max_size=5
).map("".join)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _STRINGS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_STRINGS, children, max_size=4)
    ),
    max_leaves=12,
)
_PIECES = (
    st.sampled_from([m.encode() for m in _MARKERISH])
    | st.sampled_from([b"\n", b"\r\n", b" ", b"\t", b"\r", b"{", b"}", b"[", b"]", b'"', b"\\"])
    | st.text(max_size=10).map(str.encode)
    | st.binary(max_size=6)
)
NOISE = st.lists(_PIECES, max_size=8).map(b"".join)
_BEGIN_ENDING_A_LINE = re.compile(re.escape(BEGIN) + rb"[ \t\r\x0b\x0c]*(?:\n|\Z)")
AFTER_NOISE = NOISE.filter(lambda noise: not _BEGIN_ENDING_A_LINE.search(noise))
"""Diagnostics after the frame: anything but a line ending with a begin marker (which
would start a frame of its own, and a truncated one)."""


@given(value=JSON_VALUES, before=NOISE, after=AFTER_NOISE, go_style=st.booleans())
def test_an_emitted_value_survives_any_diagnostics_around_it(
    value: Any, before: bytes, after: bytes, go_style: bool
) -> None:
    w = RecordingWriter()
    emit(w, value)
    emit_chunk(w, value)
    doc, line = w.writes
    payload = doc.split(b"\n")[2]
    assert doc == b"\n" + go_framed(payload) and line == CHUNK + payload + b"\n"
    if go_style:  # a writer that does not start the frame with a newline
        doc = doc[1:]
    buf = before + doc + after
    assert extract(buf) == payload
    assert numbers_as_floats(unmarshal(buf)) == numbers_as_floats(value)


@given(value=JSON_VALUES, before=NOISE, lines=st.lists(NOISE, max_size=3))
def test_a_chunk_survives_an_unfinished_diagnostic_and_lines_around_it(
    value: Any, before: bytes, lines: list[bytes]
) -> None:
    w = RecordingWriter()
    emit_chunk(w, value)
    (line,) = w.writes
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.count(CHUNK) == 1
    unfinished = before.replace(b"\n", b"")
    stream = b"\n".join(noise.replace(CHUNK, b"") for noise in lines) + b"\n" + unfinished + line
    found = [p for p in map(chunk_payload, stream.split(b"\n")) if p is not None]
    assert len(found) == 1
    assert numbers_as_floats(json.loads(found[0])) == numbers_as_floats(value)
    as_text = (unfinished + line).decode("utf-8", "surrogateescape")
    assert chunk_payload(as_text) == found[0]


@given(value=JSON_VALUES, ensure_ascii=st.booleans(), indent=st.none() | st.integers(0, 2))
def test_ready_made_json_is_framed_and_chunked_without_a_marker_inside(
    value: Any, ensure_ascii: bool, indent: int | None
) -> None:
    raw = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent).encode()
    doc, line = clijson.framed(raw), chunk_line(raw)
    assert doc.count(b"<<<") == 2 and line.count(b"<<<") == 1 and line.count(b"\n") == 1
    assert numbers_as_floats(unmarshal(doc)) == numbers_as_floats(value)
    assert numbers_as_floats(json.loads(chunk_payload(line) or b"")) == numbers_as_floats(value)


_HOSTILE = NOISE | st.sampled_from(
    [
        BEGIN + b"\n",
        b"\n" + END + b"\n",
        b"[" * 3000,
        b"\\ud800",
        b"NaN",
        b"1e400",
        b"-0",
        b"\xff",
        b"\xe2\x80",
        b'{"a":',
        b"}",
    ]
)


def frame_error(read: Any, buf: bytes) -> FrameError | None:
    """The FrameError ``read(buf)`` raises, or None; any other exception propagates."""
    try:
        read(buf)
    except FrameError as err:
        return err
    return None


@given(parts=st.lists(_HOSTILE, max_size=10))
def test_reading_arbitrary_output_raises_only_frame_errors(parts: list[bytes]) -> None:
    buf = b"".join(parts)
    for read in (extract, unmarshal):
        err = frame_error(read, buf)
        if err is not None:
            assert str(err).startswith("clijson: ")
            assert "\n" not in str(err) and "\n" not in err.output_head
            assert len(err.output_head) <= 203
    assert chunk_payload(buf) is None or isinstance(chunk_payload(buf), bytes)
    chunk_payload(buf.decode("utf-8", "surrogateescape"))


_HEAD_PIECES = st.sampled_from(
    [b" ", b"\n", b"\t", "\u3000".encode(), "\u00a0".encode(), b"\x1c", b"\xff", b"\xe2\x80"]
) | st.text(alphabet=st.characters(blacklist_characters="{}<"), max_size=30).map(str.encode)


@given(parts=st.lists(_HEAD_PIECES, max_size=30))
def test_the_head_quotes_the_output_on_one_bounded_line(parts: list[bytes]) -> None:
    buf = b"".join(parts)
    with pytest.raises(NoPayloadError) as info:
        extract(buf)
    assert info.value.output_head == reference_head(buf)
