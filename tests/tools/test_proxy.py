"""simulator.tools.proxy: the tape a run's lines go on, the files a run changed, and one
recording of a small real program between real pipes.

The recorder run as a command, between a client and the simulator, is in
tests/e2e/test_record_e2e.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from simulator.tools.cassette import RecordError, Redactor, decode_line, read_cassette
from simulator.tools.conformance import Checker
from simulator.tools.proxy import (
    _exit_code,
    _file_changes,
    _roots,
    _snapshot,
    _Splitter,
    _Tape,
    record,
)
from tests.tools.recording import VERSION_EVENT

# -- the tape -----------------------------------------------------------------------------


def test_the_tape_cuts_each_stream_into_lines_redacted_counted_and_checked() -> None:
    tape = _Tape(Redactor([r"hunter\d"]), Checker(None))
    out, err = _Splitter(tape, "out"), _Splitter(tape, "err")
    out.feed(b'{"vm":{},"waiting_for":[],"done":false,"error":""}\n{"vm"')
    err.feed(b"password hunter2\n")
    out.feed(b':{},"waiting_for":[],"done":true,"error":""}\nnot json')
    out.close()
    err.close()  # nothing held back: no line
    lines = [(e["dir"], e["n"], decode_line(e), e.get("eol", True)) for e in tape.lines]
    assert lines == [
        ("out", 1, b'{"vm":{},"waiting_for":[],"done":false,"error":""}', True),
        ("err", 1, b"password ***", True),
        ("out", 2, b'{"vm":{},"waiting_for":[],"done":true,"error":""}', True),
        ("out", 3, b"not json", False),
    ]
    times = [e["t"] for e in tape.lines]
    assert times == sorted(times) and all(t >= 0 for t in times)
    (deviation,) = tape.checker.deviations  # the line after done, as the tape passed it
    assert (deviation.n, deviation.line) == (3, "not json")
    assert "after its done:true event" in deviation.message


def test_lines_from_several_threads_keep_their_own_counts() -> None:
    tape = _Tape(Redactor(), Checker(None))

    def write(direction: str) -> None:
        splitter = _Splitter(tape, direction)
        for i in range(200):
            splitter.feed(f"{direction} {i}\n".encode())

    threads = [threading.Thread(target=write, args=(d,)) for d in ("in", "out", "err")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for direction in ("in", "out", "err"):
        mine = [e for e in tape.lines if e["dir"] == direction]
        assert [e["n"] for e in mine] == list(range(1, 201))
        assert [e["line"] for e in mine] == [f"{direction} {i}" for i in range(200)]


def test_an_exit_by_signal_is_told_as_a_shell_tells_it() -> None:
    assert _exit_code(-9) == 137
    assert _exit_code(-15) == 143
    assert _exit_code(0) == 0
    assert _exit_code(3) == 3


# -- the files ----------------------------------------------------------------------------


def test_the_files_a_run_created_changed_and_deleted_under_each_zread(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    for root in (project, home):
        (root / ".zread" / "sub").mkdir(parents=True)
    (project / ".zread" / "kept").write_text("same")
    (project / ".zread" / "sub" / "changed").write_text("old")
    (home / ".zread" / "gone").write_text("bye")
    (project / "outside").write_text("not under .zread")
    roots = _roots(project, {"HOME": str(home)})
    assert roots == {"project": project, "home": home}
    before = _snapshot(roots)
    (project / ".zread" / "sub" / "changed").write_text("new")
    (home / ".zread" / "gone").unlink()
    (home / ".zread" / "made").write_text("hello")
    (project / ".zread" / "link").symlink_to("sub")
    (project / "outside").write_text("changed, but not under .zread")
    changes = _file_changes(before, _snapshot(roots))

    def sha(data: str) -> str:
        return hashlib.sha256(data.encode()).hexdigest()

    assert changes == [
        {"root": "home", "path": ".zread/gone", "sha256": None, "change": "deleted"},
        {"root": "home", "path": ".zread/made", "sha256": sha("hello"), "change": "created"},
        {"root": "project", "path": ".zread/link", "sha256": sha("sub"), "change": "created"},
        {
            "root": "project",
            "path": ".zread/sub/changed",
            "sha256": sha("new"),
            "change": "changed",
        },
    ]


def test_a_home_that_is_the_project_is_looked_at_once(tmp_path: Path) -> None:
    assert _roots(tmp_path, {"HOME": str(tmp_path)}) == {"project": tmp_path}
    assert _roots(tmp_path, {}) == {"project": tmp_path}
    assert _snapshot({"project": tmp_path / "none"}) == {}


# -- one recording ------------------------------------------------------------------------


PROGRAM = """
import pathlib, sys
sys.stdout.buffer.write(sys.argv[1].encode() + b"\\n")
sys.stdout.flush()
got = sys.stdin.buffer.read()
pathlib.Path(".zread").mkdir()
pathlib.Path(".zread/got").write_bytes(got)
sys.stderr.write("no newline at the end")
sys.exit(3)
"""


def test_a_program_is_recorded_between_the_streams_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "c.json"
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    os.write(in_write, b'{"type":"quit","params":{"llm_api_key":"sk-sent-1"}}\n')
    os.close(in_write)
    program = [sys.executable, "-c", PROGRAM, VERSION_EVENT.decode()]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "SECRET_VALUE": "v-1"}
    try:
        done = record(
            program,
            out,
            environ=env,
            command="version",
            stdin=in_read,
            stdout=out_write,
            stderr=err_write,
        )
    finally:
        for fd in (in_read, out_write, err_write):
            os.close(fd)
    with os.fdopen(out_read, "rb") as stdout, os.fdopen(err_read, "rb") as stderr:
        assert stdout.read() == VERSION_EVENT + b"\n"  # the client sees the bytes unchanged
        assert stderr.read() == b"no newline at the end"
    assert done.exit_code == 3
    assert (tmp_path / ".zread" / "got").read_bytes().startswith(b'{"type":"quit"')
    cassette = read_cassette(out)
    assert cassette == done.cassette
    assert cassette["command"] == "version" and cassette["exit_code"] == 3
    assert cassette["env"] == ["HOME", "PATH", "SECRET_VALUE"] and "v-1" not in out.read_text()
    entries = [(e["dir"], e["n"], decode_line(e)) for e in cassette["lines"]]
    assert ("out", 1, VERSION_EVENT) in entries
    assert ("in", 1, b'{"type":"quit","params":{"llm_api_key":"***"}}') in entries
    assert ("err", 1, b"no newline at the end") in entries
    assert [e.get("eol") for e in cassette["lines"] if e["dir"] == "err"] == [False]
    (change,) = cassette["files"]
    assert [change["root"], change["path"], change["change"]] == [
        "project",
        ".zread/got",
        "created",
    ]
    assert done.checker.clean and done.report[-1] == (
        "1 events, 1 commands, 1 stderr lines; checked against the version chart: clean"
    )
    assert json.loads(out.read_text()) == cassette


def test_what_cannot_be_recorded_is_refused_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    with pytest.raises(RecordError, match=r"^no program given"):
        record([], out)
    with pytest.raises(RecordError, match=r"^--command nope: not a zread command \(.*version"):
        record(["true"], out, command="nope")
    with pytest.raises(RecordError, match=r"^cannot run .*nothing-here: "):
        record([str(tmp_path / "nothing-here")], out)
    with pytest.raises(RecordError, match=r"^--redact: not a regular expression"):
        record(["true"], out, patterns=["("])
    assert list(tmp_path.iterdir()) == []
