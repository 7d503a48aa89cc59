"""simulator.tools.journal: ``zread-sim journal FILE`` over journals that real
``python -m simulator ... --journal FILE`` processes wrote on real pipes, and the
reader's rules over records written by hand."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from simulator.formats.bounds import LIMITS
from simulator.hosts.journal import Event, Exit, HttpFaultMet, Line, Record, Start, Timer
from simulator.tools.journal import (
    JournalReadError,
    Violation,
    parse,
    read,
    render,
    violations,
)
from tests.e2e.helpers import Proc

KEY = "sk-live-do-not-leak-42"
EXPECTED = "expected update_fields, save, reload_llm, quit"


def journal_of(path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """``zread-sim journal path`` (and ``more`` words) as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "simulator", "journal", str(path), *more],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def quit_cleanly(proc: Proc) -> None:
    proc.send({"type": "quit"})
    proc.read_until_done()
    proc.finish()


# -- through real processes --------------------------------------------------------------


def test_a_command_out_of_turn_is_caught_with_the_line_and_what_was_expected(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", "--journal", str(path)) as proc:
        proc.read_event()
        proc.reject({"type": "generate"}, 'command "generate" not allowed in state editing')
        proc.reject({"type": "_saved"})
        quit_cleanly(proc)
        pid = proc.popen.pid
    result = journal_of(path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert f"pid {pid}: config, started " in out
    assert (
        f"pid {pid}: a command out of turn: at t=" in out
        and 'sent {"type":"generate"}; ' + EXPECTED + ': command "generate" not allowed' in out
    )
    assert f"pid {pid}: an internal (_) command: " in out
    assert "exit   code 0, quit" in out
    assert out.endswith("1 process, 2 violations\n")


def test_a_clean_run_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", "--journal", str(path)) as proc:
        proc.read_event()
        proc.send({"type": "update_fields", "params": {"fields": {"language": "fr"}}})
        proc.read_event()
        quit_cleanly(proc)
    result = journal_of(path)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    assert result.stdout.endswith("1 process, no violations\n")
    assert result.stdout.count("  line   ") == 2 and result.stdout.count("  event  ") == 3


def test_the_variable_journals_too_and_a_sigterm_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", env={"ZREAD_SIM_JOURNAL": str(path)}) as proc:
        proc.read_event()
        proc.terminate()  # quits, as zread does, but the client should have sent quit
        proc.read_until_done()
        proc.finish()
    (process,) = read(str(path))
    assert process.exit is not None and process.exit.how == "signal"
    result = journal_of(path)
    assert result.returncode == 1
    assert "ended by a signal instead of quit" in result.stdout


def test_a_client_that_closed_stdin_and_then_killed_zread_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", "--journal", str(path)) as proc:
        proc.read_event()
        proc.close_stdin()
        proc.wait_stderr("stdin is closed: nothing can answer")
        proc.terminate()
        assert proc.wait() == 0
    (process,) = read(str(path))
    assert process.exit is not None and process.exit.how == "stdin-closed-left-waiting"
    (found,) = violations(process)
    assert "after stdin closed while zread waited for update_fields, save" in found.text


def test_a_client_gone_before_done_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", "--journal", str(path)) as proc:
        proc.read_event()
        proc.close_stdout()  # it stops reading, then quits
        proc.send({"type": "quit"})
        assert proc.wait() == 0
    (process,) = read(str(path))
    assert process.exit is not None and process.exit.how == "reader-gone"
    (found,) = violations(process)
    assert found.kind == "left without reading to done"
    assert "it sent quit, but stdout's reader went away before done:true" in found.text


def test_two_processes_appending_to_one_file_both_appear_whole(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with (
        Proc("config", "--journal", str(path)) as one,
        Proc("generate", "-y", "--journal", str(path), scenario="empty") as two,
    ):
        one.read_event()
        for value in ("fr", "de", "en", "ja"):
            one.send({"type": "update_fields", "params": {"fields": {"language": value}}})
            one.read_event()
        two.read_until_done()
        two.finish()
        quit_cleanly(one)
        pids = {one.popen.pid, two.popen.pid}
    processes = read(str(path))  # every line a whole record, or this raises
    assert {p.pid for p in processes} == pids
    for process in processes:
        assert process.start is not None and process.exit is not None
        assert process.exit.code == 0 and violations(process) == []
    by_pid = {p.pid: p for p in processes}
    assert by_pid[one.popen.pid].exit.how == "quit"  # type: ignore[union-attr]
    assert by_pid[two.popen.pid].exit.how == "done"  # type: ignore[union-attr]
    assert journal_of(path).returncode == 0


def test_the_api_key_never_reaches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", "--journal", str(path)) as proc:
        first = proc.read_event()
        shown = next(f["value"] for f in first["vm"]["fields"] if f["json_key"] == "llm_api_key")
        proc.send({"type": "update_fields", "params": {"fields": {"llm_api_key": KEY}}})
        assert KEY.encode() in proc.read_raw()  # zread's own output shows it
        proc.send(b'{"type":"nope","llm_api_key":"' + KEY.encode() + b'"')  # not even JSON
        proc.read_event()
        quit_cleanly(proc)
    data = path.read_bytes()
    assert shown and shown.encode() not in data
    assert KEY.encode() not in data
    assert b'"llm_api_key\\":\\"***\\"' in data
    assert KEY not in journal_of(path).stdout


def test_a_file_it_cannot_read_exits_2_with_one_line(tmp_path: Path) -> None:
    result = journal_of(tmp_path / "nope.jsonl")
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"zread-sim: journal {tmp_path / 'nope.jsonl'}: No such file or directory\n"
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"exit","pid":1,"t":0,"code":0,"how":"done"}\nnot json\n')
    result = journal_of(bad)
    assert result.returncode == 2
    assert result.stderr.startswith(f"zread-sim: journal {bad}: line 2 is not a journal record")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_journal_a_full_disk_cut_short_is_read_without_its_torn_last_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    with Proc("config", "--journal", str(path)) as proc:
        proc.read_event()
        quit_cleanly(proc)
    whole = journal_of(path)
    with path.open("ab") as file:  # what a short write leaves: half a record, no newline
        file.write(msgspec.json.encode(Exit(9, 0.5, 0, "quit"))[:20])
    result = journal_of(path)
    assert (result.returncode, result.stdout) == (0, whole.stdout)
    assert result.stderr == (
        f"zread-sim: journal {path}: its last line is cut short (a full disk?); read without it\n"
    )


def test_only_a_last_line_without_a_newline_may_be_torn(tmp_path: Path) -> None:
    path = write_journal(tmp_path / "j.jsonl", START)
    with path.open("ab") as file:
        file.write(msgspec.json.encode(Exit(5, 0.5, 0, "quit")))  # whole, no newline: kept
    said: list[str] = []
    (process,) = read(str(path), torn=said.append)
    assert process.exit == Exit(5, 0.5, 0, "quit") and said == []
    path.write_bytes(path.read_bytes() + b"\n" + b'{"kind":"exit"\n')  # torn, then a newline
    with pytest.raises(JournalReadError, match="line 3 is not a journal record"):
        read(str(path), torn=said.append)
    path.write_bytes(b'{"kind":"st\n' + msgspec.json.encode(START) + b"\n")  # not the last
    with pytest.raises(JournalReadError, match="line 1 is not a journal record"):
        read(str(path), torn=said.append)
    assert said == []


# -- the reader's rules ------------------------------------------------------------------


def lines_of(*records: Record) -> list[bytes]:
    return [msgspec.json.encode(record) for record in records]


def write_journal(path: Path, *records: Record) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines_of(*records)))
    return path


START = Start(5, ["zread-sim", "config", "--stdio"], "/p", "2025-01-01T00:00:00.000Z", "config")


def line(text: str, error: str = "", *, after_done: bool = False, pid: int = 5) -> Line:
    return Line(pid, 0.25, text, "editing", ["save", "quit"], after_done, error)


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        (line('{"type":"x"}', 'command "x" not allowed in state editing'), "a command out of turn"),
        (line('{"type":"_tick"}', 'command "_tick" not allowed in state editing'), "an internal"),
        (line("{", "invalid JSON: truncated"), "bad JSON"),
        (line('{"type":"save","params":1}', "invalid params: no"), "bad params"),
        (line('{"type":"save"}', "the session is done", after_done=True), "sent after done"),
    ],
)
def test_each_refused_line_is_a_violation_of_its_kind(record: Line, kind: str) -> None:
    (process,) = parse(lines_of(START, record, Exit(5, 1.0, 0, "quit")))
    (found,) = violations(process)
    assert found.kind.startswith(kind)
    assert found.text.startswith("at t=0.250s in state editing: sent ")
    assert str(found) == f"pid 5: {found.kind}: {found.text}"


@pytest.mark.parametrize(
    ("end", "kind"),
    [
        (Exit(5, 1.0, 0, "done"), None),
        (Exit(5, 1.0, 0, "quit"), None),
        (Exit(5, 1.0, 0, "control-quit"), None),
        (Exit(5, 1.0, 9, "fault-exit"), None),
        (Exit(5, 1.0, None, "hang"), None),
        (Exit(5, 1.0, None, "aborted"), None),
        (Exit(5, 1.0, 0, "signal"), "ended by a signal instead of quit"),
        (Exit(5, 1.0, 0, "stdin-closed-left-waiting"), "ended by a signal instead of quit"),
        (Exit(5, 1.0, 0, "reader-gone"), "left without reading to done"),
        (None, "no exit recorded"),
    ],
)
def test_how_a_process_ended(end: Exit | None, kind: str | None) -> None:
    records = [START, line('{"type":"save"}')] + ([end] if end else [])
    (process,) = parse(lines_of(*records))
    assert [v.kind for v in violations(process)] == ([kind] if kind else [])


def test_processes_are_grouped_per_pid_and_a_new_start_is_a_new_process() -> None:
    records = [
        START,
        Start(6, [], "/q", "t", "login"),
        line("{}", pid=6),
        line("{}"),
        Exit(6, 0.5, 0, "done"),
        Exit(5, 0.5, 0, "quit"),
        START,  # the pid used again by a later process
        Exit(5, 0.1, 0, "quit"),
        Event(8, 0.0, "{}"),  # a process whose start record is not in the file
    ]
    processes = parse(lines_of(*records) + [b"", b"  "])
    assert [(p.pid, len(p.records)) for p in processes] == [(5, 2), (6, 2), (5, 1), (8, 1)]
    listing, found = render(processes)
    assert listing[0].startswith("pid 5: config, started 2025-01-01T00:00:00.000Z in /p: zread-sim")
    assert "pid 8: (no start record)" in listing and "  (no exit record)" in listing
    assert found == [Violation(8, "no exit recorded", found[0].text)]
    assert listing[-1] == "4 processes, 1 violation"


def test_an_empty_journal_has_no_violations() -> None:
    assert render(parse([])) == (["0 processes, no violations"], [])


def test_a_line_that_is_not_a_record_is_an_error() -> None:
    with pytest.raises(JournalReadError, match=r"^j: line 2 is not a journal record"):
        parse([msgspec.json.encode(START), b'{"kind":"nope","pid":1}'], "j")


def test_a_journal_written_with_keys_in_it_is_printed_without_them(tmp_path: Path) -> None:
    escaped = '{"type":"update_fields","params":{"fields":{"llm_\\u0061pi_key":"sk-in-file-1"}}}'
    cut = "{'bad': '" + "x" * 142 + " sk-in-file-1'"  # the listing cuts it in the key
    records = [
        Start(5, ["zread-sim", "config", "--stdio"], "/home/sk-in-file-1", "t", "config"),
        Line(5, 0.1, escaped, "editing", ["save"], False, ""),
        Event(5, 0.1, '{"vm":{"note":"' + "x" * 200 + ' sk-in-file-1"},"error":""}', ""),
        Line(5, 0.2, cut, "editing", ["save"], False, "bad: sk-in-file-1"),
        Exit(5, 0.3, 0, "quit"),
    ]
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"".join(msgspec.json.encode(record) + b"\n" for record in records))
    result = journal_of(path)
    assert result.returncode == 1, result.stderr
    assert "sk-in" not in result.stdout and "***" in result.stdout
    assert "/home/***" in result.stdout


def test_timer_records_are_each_process_s_lateness() -> None:
    records = [START, Timer(5, 0.2, 0.001), Timer(5, 0.4, 0.003), Exit(5, 0.5, 0, "done")]
    (process,) = parse(lines_of(*records))
    assert process.late == [0.001, 0.003]
    assert [type(r) for r in process.records] == [Exit]  # not in the listing
    listing, _ = render([process])
    assert listing[-1] == "1 process, no violations"


def test_http_fault_records_are_listed_and_are_no_violation() -> None:
    met = HttpFaultMet(5, 0.3, "GET", "/api/wiki", "http-1", "status")
    late = HttpFaultMet(5, 0.6, "HEAD", "/", "http-2", "reset")  # after the exit record
    records: list[Record] = [START, line('{"type":"quit"}'), met, Exit(5, 0.5, 0, "quit"), late]
    (process,) = parse(lines_of(*records))
    assert process.exit == Exit(5, 0.5, 0, "quit")
    assert violations(process) == []
    listing, found = render([process])
    assert found == []
    assert "      0.300  http   GET /api/wiki: http-1 status" in listing
    assert "      0.600  http   HEAD /: http-2 reset" in listing
    assert "  (no exit record)" not in listing
    assert listing[-1] == "1 process, no violations"


def test_an_http_fault_record_after_no_exit_is_still_no_exit() -> None:
    records: list[Record] = [START, HttpFaultMet(5, 0.3, "GET", "/", "http-1", "delay")]
    (process,) = parse(lines_of(*records))
    assert process.exit is None
    assert [v.kind for v in violations(process)] == ["no exit recorded"]


def test_an_http_fault_records_path_is_printed_without_keys(tmp_path: Path) -> None:
    records: list[Record] = [
        Start(5, ["zread-sim", "browse", "--stdio"], "/p", "t", "browse"),
        Line(5, 0.1, '{"llm_api_key":"sk-in-path-9"}', "serving", ["quit"], False, ""),
        HttpFaultMet(5, 0.2, "GET", "/sk-in-path-9", "http-1", "status"),
        Exit(5, 0.3, 0, "quit"),
    ]
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"".join(msgspec.json.encode(record) + b"\n" for record in records))
    result = journal_of(path)
    assert result.returncode == 0, result.stderr
    assert "sk-in-path" not in result.stdout
    assert "http   GET /***: http-1 status" in result.stdout


# -- a hostile journal -------------------------------------------------------------------

DEEP = "[" * 200_000 + "]" * 200_000
"""An event line nested far deeper than msgspec can recurse."""

CONTROLS = re.compile(b"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
"""A C0 control but the newline, DEL, or a C1 control (in UTF-8)."""


def test_an_event_nested_too_deep_to_decode_is_listed_as_it_is(tmp_path: Path) -> None:
    path = write_journal(
        tmp_path / "deep.jsonl",
        START,
        Event(5, 0.1, DEEP, ""),
        Exit(5, 0.2, 0, "stdin-closed-left-waiting"),
    )
    result = journal_of(path)
    assert (result.returncode, result.stderr) == (1, "")
    assert "      0.100  event  [[[[" in result.stdout
    assert "after stdin closed while zread waited for an answer\n" in result.stdout


def test_control_characters_from_a_journal_are_printed_escaped(tmp_path: Path) -> None:
    title, clear = "\x1b]0;pwned\x07", "\x1b[2K\r"
    path = write_journal(
        tmp_path / "evil.jsonl",
        Start(5, ["zread", title], "/p\n", "t\x9b", f"gen{title}erate"),
        Line(5, 0.1, '{"type":"x"}' + clear, "editing", ["save"], False, "bad" + clear),
        Event(5, 0.2, "not json" + clear, ""),
        HttpFaultMet(5, 0.25, "GET", "/" + clear, "http-1", "status\x7f"),
        Exit(5, 0.3, 0, f"done{clear}FAKE"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "journal", str(path)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (result.returncode, result.stderr) == (1, b"")
    out = result.stdout.decode()
    assert not CONTROLS.search(result.stdout), out
    assert "pid 5: gen\\x1b]0;pwned\\x07erate, started t\\x9b in /p\\n: zread \\x1b]0;" in out
    assert '  line   {"type":"x"}\\x1b[2K\\r  !! bad\\x1b[2K\\r' in out
    assert "  event  not json\\x1b[2K\\r" in out
    assert "  http   GET /\\x1b[2K\\r: http-1 status\\x7f" in out
    assert "  exit   code 0, done\\x1b[2K\\rFAKE" in out


@pytest.mark.parametrize(
    ("record", "name"),
    [(Exit(5, 1e308, 0, "done"), "t"), (Timer(5, 0.1, -1e306), "late")],
)
def test_a_time_that_is_not_finite_in_milliseconds_is_refused(
    tmp_path: Path, record: Record, name: str
) -> None:
    path = write_journal(tmp_path / "j.jsonl", START, record)
    result = journal_of(path)
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"zread-sim: journal {path}: line 2 is not a journal record: {name}: out of range\n"
    )


def test_a_journal_is_read_line_by_line_within_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(LIMITS, "journal", 1 << 20)
    record = msgspec.json.encode(Exit(5, 0.1, 0, "done")) + b"\n"
    path = tmp_path / "j.jsonl"
    path.write_bytes(record * ((1 << 20) // len(record)))
    (process,) = read(str(path))  # up to the bound
    assert len(process.records) == (1 << 20) // len(record)
    too_big = f"journal {path}: larger than 1 MiB, the limit for journal"
    with path.open("ab") as file:
        file.write(record)
    with pytest.raises(JournalReadError, match=f"^{re.escape(too_big)}$"):
        read(str(path))
    path.write_bytes(b"x" * (2 << 20))  # one line past the bound: not read whole
    with pytest.raises(JournalReadError, match=f"^{re.escape(too_big)}$"):
        read(str(path))
