"""simulator.core.entries: one line a client sent, as a session records and prints it."""

from __future__ import annotations

import json

from simulator.core.entries import JournalEntry
from simulator.launch import build_session

KEYED = b'{"type":"update_fields","params":{"fields":{"llm_api_key":"sk-x"}}}'


def test_a_journal_entry_as_plain_json_is_redacted_and_text() -> None:
    entry = JournalEntry(1.5, KEYED, "editing", ("save", "quit"), False, "")
    assert entry.as_json() == {
        "t": 1.5,
        "line": '{"type":"update_fields","params":{"fields":{"llm_api_key":"***"}}}',
        "state": "editing",
        "waiting_for": ["save", "quit"],
        "after_done": False,
        "error": "",
    }
    assert json.loads(json.dumps(entry.as_json())) == entry.as_json()
    bad = JournalEntry(0.0, b"\xc3(", "editing", (), True, "invalid JSON: invalid UTF-8 at byte 0")
    assert bad.as_json()["line"] == "\\xc3("


def test_printed_the_key_is_redacted_but_kept_in_the_entry() -> None:
    entry = JournalEntry(0.25, KEYED, "editing", ("save",), False, "no")
    assert b"sk-x" in entry.line
    assert "sk-x" not in repr(entry) and "sk-x" not in str(entry)
    assert repr(entry).startswith("JournalEntry(time=0.25, line=b'") and "***" in repr(entry)


def test_printed_it_says_what_was_expected_when_the_line_came() -> None:
    waiting = JournalEntry(1.0, b'{"type":"nope"}', "editing", ("save", "quit"), False, "bad")
    assert str(waiting) == (
        'at t=1.000s in state editing: sent {"type":"nope"}; expected save, quit: bad'
    )
    busy = JournalEntry(2.0, b"{}", "running", (), False, "bad")
    assert "expected nothing (wait for the next event)" in str(busy)
    late = JournalEntry(3.0, b"{}", "done", (), True, "done")
    assert "expected nothing: the session was done" in str(late)


def test_a_long_line_is_cut_when_printed_only() -> None:
    line = b'{"type":"' + b"x" * 500 + b'"}'
    entry = JournalEntry(0.0, line, "editing", (), False, "bad")
    printed = str(entry)
    assert "x" * 190 in printed and "x" * 300 not in printed and '..."' not in printed
    assert "...; expected" in printed and entry.line == line


def test_a_session_records_one_entry_per_line_with_what_it_expected() -> None:
    session = build_session("config")
    session.start()
    session.feed(b'{"type":"nope"}')
    session.feed(b'{"type":"quit"}')
    session.feed(b'{"type":"save"}')
    nope, quit_, late = session.journal
    assert (nope.state, nope.after_done) == ("editing", False) and nope.error
    assert "save" in nope.waiting_for and quit_.error == ""
    assert late.after_done and late.error and session.violations == [nope, late]
