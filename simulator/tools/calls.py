"""What ``zread_bin`` makes of its processes' journal: the calls, and the watch.

Owns: :class:`ZreadCall`, one ``zread`` process a test ran as its journal tells it
(like pytest-subprocess's ``fp.calls``), :func:`calls`, every call of a journal, and
:class:`Watch`, a thread that reads the journal ten times a second and kills the
processes that run past their timeout, and at the end every one still running (the
processes are the client's children, not the fixture's, so the journal is the one
place that lists them). A call served in-process (``zread_popen``) has a pid no process
has: the watch is told of it (:attr:`Watch.served`) and kills it through its object.
Reading a journal is :mod:`simulator.tools.journal`'s; the
fixture is :mod:`simulator.pytest_plugin`'s.

Must not: import pytest, or kill a process its journal did not start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from simulator.hosts.journal import Start
    from simulator.tools.journal import Process


class Served(Protocol):
    """A call served in-process, as the watch sees it (a ``ServedPopen``)."""

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...


@dataclass(frozen=True)
class ZreadCall:
    """One ``zread`` process a test ran, as its journal tells it (like
    pytest-subprocess's ``fp.calls``)."""

    argv: list[str]
    cwd: str
    pid: int
    exit_code: int | None
    """None: it never exited by itself (killed at the timeout or at the test's end)."""
    how: str
    """How it ended (:data:`simulator.hosts.journal.HOWS`), or what the fixture did."""
    duration: float
    """Session seconds from its first event to its exit (or to its last record)."""
    state: str
    """The vm state it was in last."""
    violations: list[str]
    """The client's mistakes in this call (``zread-sim journal`` lists the same)."""


def where(process: Process) -> tuple[str, float]:
    """The vm state ``process`` was in last, and the session time of its last record."""
    from simulator.hosts.journal import Event, Line

    state, last_t = "", 0.0
    for record in process.records:
        last_t = record.t
        if isinstance(record, Line):
            state = record.state
        elif isinstance(record, Event):
            state = record.state or state
    return state, last_t


def calls(journal: Path, killed: dict[int, str]) -> list[ZreadCall]:
    """Every call ``journal`` tells of, in the order they started; ``killed`` says which
    the watch killed, and why."""
    from simulator.tools.journal import read, violations

    if not journal.exists():
        return []
    made = []
    for process in read(str(journal)):
        state, last_t = where(process)
        end = process.exit
        how = end.how if end is not None else "killed" if process.pid in killed else "running"
        found = [str(v) for v in violations(process)]
        if process.pid in killed:
            found = [v for v in found if "no exit recorded" not in v] + [
                f"pid {process.pid}: {killed[process.pid]}"
            ]
        made.append(
            ZreadCall(
                argv=process.start.argv if process.start else [],
                cwd=process.start.cwd if process.start else "",
                pid=process.pid,
                exit_code=end.code if end is not None else None,
                how=how,
                duration=end.t if end is not None else last_t,
                state=state,
                violations=found,
            )
        )
    return made


class Watch:
    """Kills the test's ``zread`` processes that run past the timeout, and at the end
    every one still running; says what each was doing."""

    def __init__(self, journal: Path, timeout: float) -> None:
        self.journal, self.timeout = journal, timeout
        self.killed: dict[int, str] = {}
        self.served: dict[int, Served] = {}
        """The calls served in-process, by pid: killed through their object."""
        self._journal = Follower(journal)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _running(self) -> list[tuple[int, float, str]]:
        """(pid, seconds since it started, what it was doing) of each one running."""
        from simulator.tools.journal import JournalReadError

        try:
            processes = self._journal.update()
        except JournalReadError:  # not a journal (now): look again next time, from its start
            self._journal = Follower(self.journal)
            return []
        running = []
        now = time.time()
        for process in processes:
            end = process.exit
            if (end is not None and end.how != "hang") or process.start is None:
                continue  # (ended: most of them, passed over first)
            if process.pid in self.killed:
                continue
            served = self.served.get(process.pid)
            alive = _alive(process.pid, process.start) if served is None else served.poll() is None
            if not alive:
                continue  # (a hang's exit record is written, and it runs on)
            state, _ = where(process)
            doing = f"in state {state or '?'}: zread {' '.join(process.start.argv[1:])}"
            running.append((process.pid, now - _epoch(process.start.time), doing))
        return running

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for pid, age, doing in self._running():
                if age > self.timeout:
                    self._kill(pid, f"killed after the {self.timeout:g} s timeout: {doing}")

    def _kill(self, pid: int, why: str) -> None:
        self.killed[pid] = why
        served = self.served.get(pid)
        if served is not None:
            served.kill()
            return
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for pid, _, doing in self._running():
            self._kill(pid, f"still running when the test ended (killed): {doing}")


class Follower:
    """The processes of a journal still being written, read on from where the last
    look stopped: a watch looks every 0.1 s, and reading the whole file each time would
    cost more than the calls it watches. A line is taken once its newline is written;
    a journal past its bound, or one cut shorter than was read (another file), is
    :class:`~simulator.tools.journal.JournalReadError`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.processes: list[Process] = []
        self._current: dict[int, Process] = {}
        self._offset = 0
        self._rest = b""
        self._lines = 0

    def update(self) -> list[Process]:
        """The processes, with what was written since the last call."""
        from simulator.formats.bounds import LIMITS, too_large
        from simulator.tools.journal import JournalReadError, add_record, records

        limit = LIMITS["journal"]
        try:
            with open(self.path, "rb") as file:
                if os.fstat(file.fileno()).st_size < self._offset:
                    raise JournalReadError(f"journal {self.path}: cut short while read")
                file.seek(self._offset)
                data = file.read(limit + 1 - self._offset)
        except FileNotFoundError:
            return self.processes
        except OSError as err:
            raise JournalReadError(f"journal {self.path}: {err.strerror or err}") from None
        self._offset += len(data)
        if self._offset > limit:
            raise JournalReadError(str(too_large("journal", f"journal {self.path}")))
        *whole, self._rest = (self._rest + data).split(b"\n")
        lines = [part for line in whole for part in line.splitlines() or [b""]]
        for record in records(lines, f"journal {self.path}", self._lines + 1):
            add_record(self.processes, self._current, record)
        self._lines += len(lines)
        return self.processes


def _alive(pid: int, start: Start) -> bool:
    """``pid`` runs, and is the process that journal started (not a pid used again)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            cmdline = file.read()
    except OSError:  # no /proc: ask the kernel (a pid used again is then possible)
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return bool(cmdline) and all(arg.encode() in cmdline for arg in start.argv[1:])


def _epoch(stamp: str) -> float:
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()
