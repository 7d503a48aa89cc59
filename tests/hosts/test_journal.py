"""simulator.hosts.journal: the writer appends whole records to a real file, one write
per line, redacted; a path it cannot open is a JournalError; a write that fails later
is said once and journaling stops."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from simulator.core.entries import JournalEntry
from simulator.core.secrets import Secrets
from simulator.errors import ConfigurationError
from simulator.hosts.journal import (
    HOWS,
    Event,
    Exit,
    HttpFaultMet,
    JournalError,
    JournalWriter,
    Line,
    Record,
    _span,
    _untear,
)

KEY = "sk-secret-123456"


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def writer(path: Path, pid: int = 7) -> tuple[JournalWriter, list[str]]:
    warned: list[str] = []
    return JournalWriter.open(str(path), warn=warned.append, pid=pid), warned


def test_each_kind_of_record(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, warned = writer(path)
    journal.start(["zread-sim", "config", "--stdio"], "/somewhere", "config")
    entry = JournalEntry(0.5, b'{"type":"nope"}', "editing", ("save", "quit"), False, "no")
    journal.line(entry)
    journal.event(0.5, b'{"vm":{},"waiting_for":[],"done":true,"error":""}\n', "editing")
    journal.exit(0.75, 0, "quit")
    journal.exit(1.0, 3, "signal")  # once: the first exit is the process's
    journal.close()
    start, line, event, end = records(path)
    assert start == {
        "kind": "start",
        "pid": 7,
        "argv": ["zread-sim", "config", "--stdio"],
        "cwd": "/somewhere",
        "time": start["time"],
        "command": "config",
    }
    assert isinstance(start["time"], str) and start["time"].endswith("Z")
    assert line == {"kind": "line", "pid": 7, **entry.as_json()}
    assert event == {
        "kind": "event",
        "pid": 7,
        "t": 0.5,
        "line": '{"vm":{},"waiting_for":[],"done":true,"error":""}',
        "state": "editing",
    }
    assert end == {"kind": "exit", "pid": 7, "t": 0.75, "code": 0, "how": "quit"}
    assert warned == []
    assert "quit" in HOWS and "reader-gone" in HOWS


def test_every_line_decodes_as_a_record(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    journal.start([], "/", "login")
    journal.event(0.0, b"{}")
    journal.exit(0.0, None, "hang")
    decoded = [msgspec.json.decode(raw, type=Record) for raw in path.read_bytes().splitlines()]
    assert [type(r) for r in decoded][1:] == [Event, Exit]
    assert decoded[2] == Exit(7, 0.0, None, "hang")


def test_api_keys_are_redacted_and_bad_utf8_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    sent = b'{"type":"update_fields","params":{"fields":{"llm_api_key":"' + KEY.encode() + b'"}}}'
    journal.line(JournalEntry(0.0, sent, "editing", ("save",), False, ""))
    journal.line(JournalEntry(0.0, b"\xff\xfe", "editing", ("save",), False, "invalid JSON"))
    journal.event(0.0, b'{"vm":{"llm_api_key":"' + KEY.encode() + b'"}}\n')
    journal.close()
    data = path.read_bytes()
    assert KEY.encode() not in data
    line, bad, event = records(path)
    assert '"llm_api_key":"***"' in str(line["line"]) and "***" in str(event["line"])
    assert bad["line"] == "\\xff\\xfe"  # backslashreplace


def test_every_record_goes_through_the_writers_registry_of_keys(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    journal.secrets = Secrets(["sk-world-key-0"])  # as the command line sets the session's
    journal.start(["zread-sim", "--seed", "sk-world-key-0"], "/home/sk-world-key-0", "config")
    escaped = b'{"type":"update_fields","params":{"fields":{"llm_\\u0061pi_key":"sk-\\u0053ent"}}}'
    journal.line(JournalEntry(0.0, escaped, "editing", ("save",), False, ""))
    broken = b"{'type':'nope','note':'sk-Sent and sk-world-key-0'"
    journal.line(JournalEntry(0.1, broken, "editing", ("save",), False, "invalid JSON: sk-Sent"))
    journal.event(0.2, b'{"vm":{"note":"sk-\\u0053ent"},"error":""}\n')
    journal.close()
    data = path.read_bytes()
    for secret in (b"sk-world-key-0", b"sk-Sent", b"sk-\\u0053ent", b"sk-\\\\u0053ent"):
        assert secret not in data
    start, line, bad, event = records(path)
    assert start["argv"] == ["zread-sim", "--seed", "***"] and start["cwd"] == "/home/***"
    assert (
        line["line"] == '{"type":"update_fields","params":{"fields":{"llm_\\u0061pi_key":"***"}}}'
    )
    assert (
        bad["line"] == "{'type':'nope','note':'*** and ***'" and bad["error"] == "invalid JSON: ***"
    )
    assert event["line"] == '{"vm":{"note":"***"},"error":""}'


def test_the_failure_it_says_holds_no_key() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    warned: list[str] = []
    fd = os.open("/dev/full", os.O_WRONLY)  # open() refuses a device: a disk that is full
    journal = JournalWriter(
        fd, "/dev/full", pid=7, warn=warned.append, secrets=Secrets(["/dev/full"])
    )
    journal.event(0.0, b"{}")
    assert warned == ["journal ***: No space left on device; journaling stops"]


def test_it_appends_and_two_writers_share_a_file(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"kind":"exit","pid":1,"t":0.0,"code":0,"how":"done"}\n')
    first, _ = writer(path, pid=2)
    second, _ = writer(path, pid=3)
    for i in range(200):
        (first if i % 2 else second).event(float(i), b'{"x":"' + b"y" * 5000 + b'"}')
    first.close()
    second.close()
    found = records(path)
    assert len(found) == 201 and found[0]["pid"] == 1
    assert sorted(r["pid"] for r in found[1:]) == [2] * 100 + [3] * 100


def test_a_path_it_cannot_open_is_a_configuration_error(tmp_path: Path) -> None:
    for path in (tmp_path / "missing" / "j.jsonl", tmp_path):
        with pytest.raises(JournalError) as caught:
            writer(path)
        assert isinstance(caught.value, ConfigurationError)
        assert str(caught.value).startswith(f"journal {path}: ")
        assert "\n" not in str(caught.value)
    assert not (tmp_path / "missing").exists()


def test_a_failing_write_is_said_once_and_journaling_stops() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    warned: list[str] = []
    fd = os.open("/dev/full", os.O_WRONLY)  # open() refuses a device: a disk that is full
    journal = JournalWriter(fd, "/dev/full", pid=7, warn=warned.append)
    journal.event(0.0, b"{}")
    journal.event(0.0, b"{}")
    journal.exit(0.0, 0, "done")
    assert warned == ["journal /dev/full: No space left on device; journaling stops"]
    assert not journal.writing


def test_a_fifo_or_a_device_is_refused_at_once_never_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # with a reader, open() would not fail
    try:
        for path, what in ((fifo, "a FIFO"), (Path(os.devnull), "a character device")):
            with pytest.raises(JournalError) as caught:
                writer(path)
            assert str(caught.value) == f"journal {path}: not a regular file ({what})"
    finally:
        os.close(reader)
    os.unlink(fifo)
    os.mkfifo(fifo)  # no reader: open(O_NONBLOCK) fails at once (ENXIO), never waits
    with pytest.raises(JournalError, match=r"not a regular file \(a FIFO\)$"):
        writer(fifo)


SHORT_WRITE = """
import resource, signal, sys
from simulator.hosts.journal import JournalWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit: a short write, then EFBIG
path, limit = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
journal = JournalWriter.open(path, warn=print, pid=5)
journal.event(0.0, b'{"small":1}')
journal.event(0.1, b'{"big":"' + b"x" * 4000 + b'"}')  # crosses the limit: cut short
journal.event(0.2, b'{"after":1}')
"""


def test_a_record_a_full_file_cut_short_is_cut_off_the_file(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes a real short write, as a disk filling up mid-record does
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"kind":"exit","pid":1,"t":0.0,"code":0,"how":"done"}\n')
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", SHORT_WRITE, str(path), str(len(before) + 1000)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().count("journaling stops") == 1, done.stdout
    data = path.read_bytes()
    assert data.startswith(before) and data.endswith(b"\n"), data[-80:]
    assert [r["kind"] for r in records(path)] == ["exit", "event"]  # the big one is gone


def test_a_torn_record_another_process_wrote_after_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b'{"kind":"exit","pid":1,"t":0.0,"code":0,"how":"done"}\n')
        span = _span(fd, os.write(fd, b'{"kind":"event","pid":2,"t":0'), None)
        with open(path, "ab") as other:  # another process sharing the file appends
            other.write(b'{"kind":"exit","pid":3,"t":0.0,"code":0,"how":"done"}\n')
        before = path.read_bytes()
        assert span is not None
        _untear(fd, span)
        assert path.read_bytes() == before  # its record is not ours to cut
    finally:
        os.close(fd)


def test_line_records_carry_what_the_session_expected(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    entry = JournalEntry(1.25, b'{"type":"save"}', "done", (), True, "the session is done")
    journal.line(entry)
    journal.close()
    (decoded,) = [msgspec.json.decode(raw, type=Record) for raw in path.read_bytes().splitlines()]
    assert decoded == Line(7, 1.25, '{"type":"save"}', "done", [], True, "the session is done")


def test_an_http_fault_record(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, warned = writer(path)
    journal.secrets.add(KEY)
    journal.http_fault(
        1.5, {"method": "GET", "path": "/api/wiki", "fault": "http-1", "kind": "delay"}
    )
    now = iter([2.0, 2.5])
    seen = journal.http_faults_at(lambda: next(now))
    seen({"method": "HEAD", "path": f"/{KEY}", "fault": "http-2", "kind": "reset"})
    seen({"method": "GET", "path": "/", "fault": "http-3", "kind": "status"})
    journal.close()
    assert records(path) == [
        {
            "kind": "http_fault",
            "pid": 7,
            "t": 1.5,
            "method": "GET",
            "path": "/api/wiki",
            "fault": "http-1",
            "fault_kind": "delay",
        },
        {
            "kind": "http_fault",
            "pid": 7,
            "t": 2.0,
            "method": "HEAD",
            "path": "/***",
            "fault": "http-2",
            "fault_kind": "reset",
        },
        {
            "kind": "http_fault",
            "pid": 7,
            "t": 2.5,
            "method": "GET",
            "path": "/",
            "fault": "http-3",
            "fault_kind": "status",
        },
    ]
    decoded = msgspec.json.Decoder(Record).decode(path.read_bytes().splitlines()[0])
    assert decoded == HttpFaultMet(7, 1.5, "GET", "/api/wiki", "http-1", "delay")
    assert warned == []


def test_records_from_two_threads_never_mix(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    start = threading.Barrier(2)

    def server() -> None:
        start.wait()
        for n in range(300):
            journal.http_fault(n, {"method": "GET", "path": "/" + "x" * 500, "fault": "http-1"})

    thread = threading.Thread(target=server)
    thread.start()
    start.wait()
    for n in range(300):
        journal.event(n, b'{"done":false,"pad":"' + b"y" * 500 + b'"}\n')
    thread.join()
    journal.close()
    kinds = [str(record["kind"]) for record in records(path)]
    assert sorted(kinds) == ["event"] * 300 + ["http_fault"] * 300


def test_records_held_between_two_waits_are_written_together_on_release(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    journal.start(["zread", "config", "--stdio"], "/p", "config")
    assert len(records(path)) == 1  # not held: at once
    journal.hold()
    journal.event(0.1, b'{"a":1}')
    journal.event(0.2, b'{"a":2}')
    assert len(records(path)) == 1  # held: not in the file yet
    other, _ = writer(path, pid=8)  # another process's, in between
    other.event(0.15, b'{"b":1}')
    journal.release()
    assert [r["pid"] for r in records(path)] == [7, 8, 7, 7]  # whole lines, never mixed
    journal.event(0.3, b'{"a":3}')  # released: at once again
    assert len(records(path)) == 5
    journal.hold()
    journal.exit(0.4, 0, "quit")
    journal.close()  # what is held is written before the file is let go
    assert records(path)[-1]["kind"] == "exit"


def test_a_flush_writes_what_is_held_and_goes_on_holding(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal, _ = writer(path)
    journal.hold()
    journal.event(0.1, b'{"a":1}')
    journal.flush()
    assert [r["line"] for r in records(path)] == ['{"a":1}']
    journal.event(0.2, b'{"a":2}')
    assert len(records(path)) == 1  # still held
    journal.release()
    assert len(records(path)) == 2


def test_out_of_descriptors_opening_it_is_raised_not_a_journal_error(tmp_path: Path) -> None:
    from tests.e2e.helpers import run_starved

    done = run_starved(
        "from simulator.core.secrets import Secrets\n"
        "from simulator.hosts.journal import JournalWriter",
        "try:\n"
        f"    JournalWriter.open({str(tmp_path / 'j')!r}, warn=print, pid=1, secrets=Secrets())\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, getattr(err, 'errno', None))\n",
        spare=0,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"OSError {errno.EMFILE}\n"
