"""simulator.runners.journaling: what happens to a live session, in its journal, on a
clock the test moves by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.core.secrets import redact_line
from simulator.hosts.journal import JournalWriter
from simulator.launch import build_session
from simulator.runners.journaling import Journaling
from simulator.runners.live import LiveSession
from simulator.scenario.faults import Fault
from tests.runners.helpers import Clock, Keeper, live, records, run_out, stage_of


def test_lines_are_journaled_as_the_session_records_them(tmp_path: Path) -> None:
    session = build_session("config")
    writer = JournalWriter.open(str(tmp_path / "j.jsonl"), warn=print, pid=3)
    Journaling(writer, session)
    session.start()
    session.feed(b'{"type":"nope"}')  # no live session: the session itself hands it over
    (line,) = [r for r in records(tmp_path / "j.jsonl") if r["kind"] == "line"]
    assert line["pid"] == 3 and line["line"] == '{"type":"nope"}' and line["error"]


class _Witness(Keeper):
    """An endpoint that, as each event goes out, reads which events the journal holds."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.seen: list[list[str]] = []

    def write(self, data: bytes) -> bool:
        self.seen.append([r["line"] for r in records(self.path) if r["kind"] == "event"])
        return super().write(data)


def test_an_event_is_in_the_held_journal_before_it_goes_out(tmp_path: Path) -> None:
    session = build_session("update", speed=0.0)
    path = tmp_path / "j.jsonl"
    writer = JournalWriter.open(str(path), warn=print, pid=1)
    witness = _Witness(path)
    runner = LiveSession(
        session, stage_of(session), witness, clock=Clock(), observer=Journaling(writer, session)
    )
    writer.hold()  # as a process runner holds it between two waits
    runner.start()
    run_out(runner, Clock())
    assert len(witness.writes) >= 2
    for n, (data, seen) in enumerate(zip(witness.writes, witness.seen, strict=True)):
        assert len(seen) >= n + 1  # this event's record, and every one before it
        assert seen[n] == redact_line(data.removesuffix(b"\n")).decode()


def test_a_cover_record_says_only_what_is_new(tmp_path: Path) -> None:
    session = build_session("update", speed=0.0)
    path = tmp_path / "j.jsonl"
    journaling = Journaling(JournalWriter.open(str(path), warn=print, pid=1), session)
    runner = LiveSession(session, stage_of(session), Keeper(), clock=Clock(), observer=journaling)
    runner.start()
    run_out(runner, Clock())
    covers = [r for r in records(path) if r["kind"] == "cover"]
    states = [s for c in covers for s in c.get("states", [])]
    assert len(covers) > 1 and len(states) == len(set(states))
    assert set(states) == session.reached.states


def test_the_journal_gets_every_line_event_and_the_exit(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    runner, keeper, clock = live("config", journal=path)
    runner.start()
    clock.now += 0.5
    runner.received(b'{"type":"nope"}\n\n  \n')  # blank lines are not journaled
    runner.received(b'{"type":"quit"}\n')
    runner.received(b'{"type":"save"}\n')  # never read: the run is over
    found = [r for r in records(path) if r["kind"] != "cover"]
    assert [r["kind"] for r in found] == ["event", "line", "event", "line", "event", "exit"]
    assert [r["line"] for r in found if r["kind"] == "event"] == [
        redact_line(line.removesuffix(b"\n")).decode() for line in keeper.writes
    ]  # as written, the API key redacted
    assert found[1]["t"] == pytest.approx(0.5) and found[1]["error"].startswith("command ")
    assert found[-1] == {
        "kind": "exit",
        "pid": 1,
        "t": pytest.approx(0.5),
        "code": 0,
        "how": "quit",
    }
    runner.close()
    assert [r["kind"] for r in records(path)][-1] == "exit"  # the exit is written once


def test_the_journal_says_what_was_reached_before_the_events_that_show_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    runner, _, clock = live("config", journal=path)
    runner.start()
    clock.now += 0.5
    runner.received(b'{"type":"nope"}\n')  # refused: nothing new reached
    runner.received(b'{"type":"quit"}\n')
    found = records(path)
    assert [r["kind"] for r in found] == [
        "cover", "event", "line", "event", "line", "cover", "event", "exit"
    ]  # fmt: skip
    assert found[0] == {
        "kind": "cover",
        "pid": 1,
        "t": 0.0,
        "command": "config",
        "states": ["editing", "starting"],
        "transitions": ["_start starting->editing"],
    }
    assert found[5] == {
        "kind": "cover",
        "pid": 1,
        "t": pytest.approx(0.5),
        "command": "config",
        "gates": ["editing:quit"],
    }


def test_the_journal_says_which_faults_and_failures_were_met(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    faults = [Fault(kind="split", after_event=2), Fault(kind="stderr", after_event=999)]
    runner, _, clock = live(
        "generate", "-y", "--skip-failed", scenario="failing-pages", faults=faults, journal=path
    )
    runner.start()
    run_out(runner, clock)
    assert runner.finished
    covers = [r for r in records(path) if r["kind"] == "cover"]
    assert [f for c in covers for f in c.get("faults", [])] == ["split"]  # once, when it fired
    assert {f for c in covers for f in c.get("failures", [])} == {"page"}
    every = [t for c in covers for t in c.get("transitions", [])]
    assert len(every) == len(set(every))  # each said once
    assert "_catalog_step catalog->pages [catalog_ready]" in every


@pytest.mark.parametrize(
    ("faults", "gone", "how", "code"),
    [
        ([], False, "done", 0),
        ([], True, "reader-gone", 0),
        ([Fault(kind="exit", after_event=2, code=9)], False, "fault-exit", 9),
        ([Fault(kind="hang", after_event=2)], False, "hang", None),
    ],
)
def test_the_journal_says_how_the_run_ended(
    tmp_path: Path, faults: list[Fault], gone: bool, how: str, code: int | None
) -> None:
    path = tmp_path / "j.jsonl"
    runner, keeper, clock = live("generate", "-y", faults=faults, journal=path)
    runner.start()
    keeper.gone = gone
    run_out(runner, clock)
    runner.close()
    end = records(path)[-1]
    assert (end["kind"], end["how"], end["code"]) == ("exit", how, code)


@pytest.mark.parametrize(
    ("close_input", "how"), [(False, "signal"), (True, "stdin-closed-left-waiting")]
)
def test_a_signal_is_journaled_as_one(tmp_path: Path, close_input: bool, how: str) -> None:
    path = tmp_path / "j.jsonl"
    runner, keeper, _ = live("config", journal=path)
    runner.start()
    if close_input:
        runner.received(b"")
        assert keeper.stderr_lines  # it said nobody can answer
    runner.quit()
    assert records(path)[-1]["how"] == how


def test_a_run_closed_before_its_end_is_aborted_and_lines_after_done_are_journaled(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    runner, _, _ = live("config", journal=path)
    runner.start()
    runner.close()
    assert records(path)[-1]["how"] == "aborted"
    path2 = tmp_path / "j2.jsonl"
    runner, _, _ = live("config", journal=path2)
    runner.start()
    runner.quit(how="control-quit")
    runner.feed(b'{"type":"save"}')  # a runner that feeds after done: journaled as such
    kinds = [(r["kind"], r.get("how"), r.get("after_done")) for r in records(path2)]
    assert kinds == [
        ("cover", None, None),
        ("event", None, None),
        ("event", None, None),
        ("exit", "control-quit", None),
        ("line", None, True),
    ]


def test_the_journal_gets_every_line_when_the_session_keeps_only_the_latest(
    tmp_path: Path,
) -> None:
    from simulator.core.transcript import RECENT_LINES

    path = tmp_path / "j.jsonl"
    runner, keeper, _ = live("config", journal=path)
    runner.start()
    count = RECENT_LINES + 300
    runner.received(b"".join(b'{"type":"nope","n":%d}\n' % n for n in range(count)))
    runner.quit()
    found = [r for r in records(path) if r["kind"] == "line"]
    assert [json.loads(r["line"])["n"] for r in found] == list(range(count))
    assert len(runner.session.journal) == RECENT_LINES
    assert runner.session.transcript.total == count
    assert len(keeper.writes) == count + 2  # the first event, one a line, done


def test_each_timer_that_fires_is_journaled_with_how_late_it_fired(tmp_path: Path) -> None:
    session = build_session("update")
    path = tmp_path / "j.jsonl"
    clock = Clock()
    journaling = Journaling(JournalWriter.open(str(path), warn=print, pid=1), session, clock)
    runner = LiveSession(session, stage_of(session), Keeper(), clock=clock, observer=journaling)
    runner.start()
    wake = runner.next_wakeup()
    assert wake is not None
    clock.now = wake + 0.25  # the machine was busy: a quarter second late
    runner.tick()
    timers = [r for r in records(path) if r["kind"] == "timer"]
    assert timers and timers[0]["late"] == pytest.approx(0.25)
    assert timers[0]["t"] == pytest.approx(wake + 0.25 - runner.origin)
