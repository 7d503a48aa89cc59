"""simulator.tools.calls: what a journal says of the ``zread`` processes of a test, and
the watch that kills one past its timeout. Real journals, real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.core.entries import JournalEntry
from simulator.hosts.journal import JournalWriter
from simulator.tools.calls import Follower, Watch, ZreadCall, calls

pytestmark = pytest.mark.timeout(30)


def writer(journal: Path, pid: int) -> JournalWriter:
    return JournalWriter.open(str(journal), warn=print, pid=pid)


def test_no_journal_is_no_calls(tmp_path: Path) -> None:
    assert calls(tmp_path / "none.jsonl", {}) == []


def test_each_process_is_one_call_with_how_it_ended(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    done = writer(journal, 11)
    done.start(["zread", "config", "--stdio"], "/project", "config")
    done.line(JournalEntry(0.5, b'{"type":"nope"}', "editing", ("save",), False, "refused"))
    done.event(0.5, b'{"vm":{}}\n', "editing")
    done.exit(0.75, 0, "quit")
    running = writer(journal, 12)
    running.start(["zread", "update", "--stdio"], "/project", "update")
    running.event(0.25, b'{"vm":{"state":"checking"}}\n', "checking")
    first, second = calls(journal, {})
    assert first == ZreadCall(
        argv=["zread", "config", "--stdio"],
        cwd="/project",
        pid=11,
        exit_code=0,
        how="quit",
        duration=0.75,
        state="editing",
        violations=first.violations,
    )
    (mistake,) = first.violations  # the refused line
    assert "refused" in mistake and "nope" in mistake
    assert (second.how, second.exit_code, second.state, second.duration) == (
        "running",
        None,
        "checking",
        0.25,
    )
    (killed,) = [c for c in calls(journal, {12: "killed by the test"}) if c.pid == 12]
    assert killed.how == "killed" and killed.violations[-1] == "pid 12: killed by the test"


def test_the_watch_kills_a_process_past_its_timeout(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = writer(journal, sleeper.pid)
        record.start([sys.executable, "-c", "import time; time.sleep(30)"], "/", "update")
        watch = Watch(journal, timeout=0.2)
        assert sleeper.wait(10) == -9
        watch.close()
    finally:
        sleeper.kill()
        sleeper.wait()
    (call,) = calls(journal, watch.killed)
    assert call.how == "killed" and "killed after the 0.2 s timeout" in call.violations[-1]


def test_the_watch_leaves_an_exited_process_and_kills_the_rest_at_its_close(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.jsonl"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = writer(journal, sleeper.pid)
        record.start([sys.executable, "-c", "import time; time.sleep(30)"], "/", "update")
        ended = writer(journal, 1)  # pid 1 runs, but its journal says it exited
        ended.start(["zread", "version"], "/", "version")
        ended.exit(0.1, 0, "done")
        watch = Watch(journal, timeout=60.0)
        time.sleep(0.3)
        assert sleeper.poll() is None  # not past its timeout
        watch.close()
        assert sleeper.wait(10) == -9
    finally:
        sleeper.kill()
        sleeper.wait()
    assert list(watch.killed) == [sleeper.pid]
    assert watch.killed[sleeper.pid].startswith("still running when the test ended (killed)")


def test_a_follower_reads_on_from_where_it_stopped_and_sees_what_a_whole_read_sees(
    tmp_path: Path,
) -> None:
    from simulator.tools.journal import JournalReadError, read

    journal = tmp_path / "journal.jsonl"
    follower = Follower(journal)
    assert follower.update() == []  # no journal yet
    first = writer(journal, 11)
    first.start(["zread", "config", "--stdio"], "/project", "config")
    first.event(0.5, b'{"vm":{}}\n', "editing")
    assert [p.pid for p in follower.update()] == [11]
    data = journal.read_bytes()
    second = writer(journal, 12)
    second.start(["zread", "update", "--stdio"], "/project", "update")
    whole = journal.read_bytes()[len(data) :]
    journal.write_bytes(data + whole[:10])  # a line half written: not taken yet
    assert [p.pid for p in follower.update()] == [11]
    journal.write_bytes(data + whole)
    first.exit(0.75, 0, "quit")
    processes = follower.update()
    assert [(p.pid, p.exit is not None) for p in processes] == [(11, True), (12, False)]
    assert processes == read(str(journal))
    journal.write_bytes(b"")  # another file now
    with pytest.raises(JournalReadError, match="cut short"):
        follower.update()
    journal.write_bytes(b"\n\n{not a record}\n")
    with pytest.raises(JournalReadError, match="line 3"):
        Follower(journal).update()
