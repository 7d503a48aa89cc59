"""The pytest plugin: ``zread_sim`` and ``zread_bin``, active once zread-sim is installed.

Owns the fixtures, and what ``zread_bin`` makes of its processes' journal: the calls
(:class:`ZreadCall`) and the watch that kills a call past its timeout or left running.
The sessions' logic lives in plain classes usable without pytest
(:class:`simulator.virtual.ZreadSim`, :func:`simulator.pipes.spawn`); reading a journal
is :mod:`simulator.tools.journal`'s. Every test gets a fresh world: nothing a session or
a ``zread`` process does leaks into the next test. Override either fixture in a
``conftest.py`` to change its defaults.

The watch is a thread that reads the journal ten times a second: the processes are the
client's children, not the fixture's, so the journal is the one place that lists them.

``--zread-coverage`` adds up what the fixtures' sessions reached of the charts (the
in-process sessions of ``zread_sim``, the journals of ``zread_bin``'s processes) and
prints :mod:`simulator.tools.coverage`'s table at the end of the run;
``--zread-coverage-json FILE`` writes it, ``--zread-coverage-fail-under N`` fails the
run below N percent of transitions. Under pytest-xdist each worker sends what it
counted to the controller, which reports the whole run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from simulator.hosts.executable import write_zread_executable

if TYPE_CHECKING:
    from simulator.hosts.journal import Start
    from simulator.runners.virtual import ZreadSim
    from simulator.tools.coverage import Coverage
    from simulator.tools.journal import Process
    from simulator.tools.remote import Remote

SIMULATOR_VARIABLES = (
    "ZREAD_SIM_SCENARIO",
    "ZREAD_SIM_SEED",
    "ZREAD_SIM_SPEED",
    "ZREAD_SIM_HOME",
    "ZREAD_SIM_PROJECT",
    "ZREAD_SIM_FILES",
    "ZREAD_SIM_CONTROL",
    "ZREAD_SIM_FRAME",
    "ZREAD_SIM_JOURNAL",
    "ZREAD_SIM_RECORD",
    "ZREAD_SIM_REAL",
)
"""Cleared for every test that uses ``zread_bin``; the test sets what it needs."""


# -- coverage -----------------------------------------------------------------------

_COVERAGE = pytest.StashKey["Coverage"]()
_WORKER_KEY = "zread_coverage"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("zread-sim", "zread-sim: coverage of zread's charts")
    group.addoption(
        "--zread-coverage",
        action="store_true",
        help="print which states, transitions and gates of zread's charts the tests' "
        "zread_sim and zread_bin sessions reached",
    )
    group.addoption(
        "--zread-coverage-json",
        metavar="FILE",
        help="write the zread coverage report to FILE as JSON (implies --zread-coverage)",
    )
    group.addoption(
        "--zread-coverage-fail-under",
        type=float,
        metavar="N",
        help="fail the run when fewer than N percent of the transitions of the commands "
        "run were taken (implies --zread-coverage)",
    )


def _wanted(config: pytest.Config) -> bool:
    return bool(
        config.getoption("zread_coverage")
        or config.getoption("zread_coverage_json")
        or config.getoption("zread_coverage_fail_under") is not None
    )


def pytest_configure(config: pytest.Config) -> None:
    if _wanted(config):
        from simulator.tools.coverage import Coverage

        config.stash[_COVERAGE] = Coverage()


def _coverage(config: pytest.Config) -> Coverage | None:
    return config.stash.get(_COVERAGE, None)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist: a worker finished; add what it counted."""
    config: pytest.Config = node.config  # type: ignore[attr-defined]
    coverage = _coverage(config)
    sent = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if coverage is not None and sent is not None:
        from simulator.tools.coverage import Coverage

        coverage.merge(Coverage.from_json(sent))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    coverage = _coverage(config)
    if coverage is None:
        return
    worker_output = getattr(config, "workeroutput", None)
    if worker_output is not None:  # an xdist worker: the controller reports
        worker_output[_WORKER_KEY] = coverage.as_json()
        return
    from simulator.tools.coverage import below, write_json

    path = config.getoption("zread_coverage_json")
    if path:
        write_json(coverage, path)
    if below(coverage, config.getoption("zread_coverage_fail_under")) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    coverage = _coverage(config)
    if coverage is None or hasattr(config, "workeroutput"):
        return
    from simulator.tools.coverage import below

    terminalreporter.write_sep("-", "zread coverage")
    for line in coverage.table():
        terminalreporter.write_line(line)
    failed = below(coverage, config.getoption("zread_coverage_fail_under"))
    if failed:
        terminalreporter.write_line(f"FAIL: {failed}", red=True)
    path = config.getoption("zread_coverage_json")
    if path:
        terminalreporter.write_line(f"zread coverage written to {path}")


# -- the fixtures ---------------------------------------------------------------------


@pytest.fixture
def zread_sim(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ZreadSim]:
    """Start zread sessions in-process, in virtual time: ``zread_sim.start("generate")``.

    Sessions of one test share a fresh HOME (``zread_sim.home``: its ``.zread/`` holds
    config.yaml, login.json) and a fresh project (``zread_sim.project``: its
    ``.zread/wiki`` holds what generate writes): what one saves, the next one finds,
    and the test can read the files.
    """
    from simulator.runners.virtual import ZreadSim

    root = tmp_path_factory.mktemp("zread-sim")
    (root / "home").mkdir()
    (root / "project").mkdir()
    sim = ZreadSim(home=root / "home", project=root / "project")
    yield sim
    coverage = _coverage(request.config)
    if coverage is not None:
        for session in sim.sessions:
            coverage.add(session.session.reached)
    sim.close()


DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds a ``zread`` that ``zread_bin`` serves may run before the fixture kills it."""


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


def _where(process: Process) -> tuple[str, float]:
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


def _calls(journal: Path, killed: dict[int, str]) -> list[ZreadCall]:
    from simulator.tools.journal import read, violations

    if not journal.exists():
        return []
    calls = []
    for process in read(str(journal)):
        state, last_t = _where(process)
        end = process.exit
        how = end.how if end is not None else "killed" if process.pid in killed else "running"
        found = [str(v) for v in violations(process)]
        if process.pid in killed:
            found = [v for v in found if "no exit recorded" not in v] + [
                f"pid {process.pid}: {killed[process.pid]}"
            ]
        calls.append(
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
    return calls


class _Watch:
    """Kills the test's ``zread`` processes that run past the timeout, and at the end
    every one still running; says what each was doing."""

    def __init__(self, journal: Path, timeout: float) -> None:
        self.journal, self.timeout = journal, timeout
        self.killed: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _running(self) -> list[tuple[int, float, str]]:
        """(pid, seconds since it started, what it was doing) of each one running."""
        from simulator.tools.journal import JournalReadError, read

        try:
            processes = read(str(self.journal)) if self.journal.exists() else []
        except JournalReadError:  # a line being written: look again next time
            return []
        running = []
        now = time.time()
        for process in processes:
            end = process.exit
            if process.start is None or process.pid in self.killed:
                continue
            if (end is not None and end.how != "hang") or not _alive(process.pid, process.start):
                continue  # a hang's exit record is written, and it runs on
            state, _ = _where(process)
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
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for pid, _, doing in self._running():
            self._kill(pid, f"still running when the test ended (killed): {doing}")


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


class ZreadExecutable(type(Path())):  # type: ignore[misc]
    """The path of the ``zread`` executable, with the places it writes to: ``home``
    (plays HOME: ``home/.zread/``) and ``project`` (the test's working directory, whose
    ``.zread/wiki`` a ``zread generate`` started without a ``cwd`` writes), the
    ``journal`` every process it serves writes, and the ``calls`` read from it."""

    home: Path
    project: Path
    journal: Path
    strict: bool
    """True (the default): the test fails when a call had violations."""
    _watch: _Watch

    @property
    def timeout(self) -> float:
        """Seconds a process may run before it is killed (a violation of its call)."""
        return self._watch.timeout

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        self._watch.timeout = seconds

    @property
    def calls(self) -> list[ZreadCall]:
        """Every ``zread`` process the test ran so far, in the order they started."""
        return _calls(self.journal, self._watch.killed)


@pytest.fixture
def zread_bin(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Iterator[ZreadExecutable]:
    """A ``zread`` executable, its folder first on PATH for this test.

    Steer it with ``monkeypatch.setenv("ZREAD_SIM_SCENARIO", ...)`` (and ``_SEED``,
    ``_SPEED``); the variables start cleared, but for ``ZREAD_SIM_SPEED=0``: every delay
    is instant unless the test asks for time. It is the script ``zread-sim install``
    writes (with nothing baked in), so it also runs in an environment a client strips.
    The test runs in a fresh project directory (``zread_bin.project``), and zread's
    HOME is a fresh folder (``zread_bin.home``, through ``ZREAD_SIM_HOME``), so nothing
    is written into the real HOME or the client's repository.

    Every process journals into ``zread_bin.journal``; ``zread_bin.calls`` reads it. A
    process running longer than ``zread_bin.timeout`` (60 s) is killed, and so is any
    still running when the test ends. Then the test fails when a call had violations
    (the client's mistakes, a process left running or killed at the timeout), naming
    them; ``zread_bin.strict = False`` turns that off.
    """
    root = tmp_path_factory.mktemp("zread-bin")
    folder, home, project = root / "bin", root / "home", root / "project"
    for made in (folder, home, project):
        made.mkdir()
    for variable in SIMULATOR_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    journal = root / "journal.jsonl"
    monkeypatch.setenv("ZREAD_SIM_HOME", str(home))
    monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
    monkeypatch.setenv("ZREAD_SIM_JOURNAL", str(journal))
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(project)
    executable = ZreadExecutable(write_zread_executable(folder))
    executable.home, executable.project, executable.journal = home, project, journal
    executable.strict = True
    executable._watch = _Watch(journal, DEFAULT_CALL_TIMEOUT)
    yield executable
    executable._watch.close()
    coverage = _coverage(request.config)
    if coverage is not None and journal.exists():
        coverage.add_journal(str(journal))
    if executable.strict:
        problems = [v for call in executable.calls for v in call.violations]
        if problems:
            pytest.fail(
                "zread_bin: the zread processes of this test saw mistakes "
                "(zread_bin.strict = False to allow them):\n  " + "\n  ".join(problems),
                pytrace=False,
            )


@pytest.fixture
def zread_remote(zread_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    """The admin API of the next ``zread`` this test starts (with ``zread_bin``).

    Sets ``ZREAD_SIM_CONTROL=unix:...`` for the test; ``zread_remote.snapshot()``,
    ``.inject(failure={...})`` ... connect on first use, waiting for the process.
    """
    from simulator.tools.remote import Remote

    folder = tempfile.mkdtemp(prefix="zread-sim-")  # short: socket paths max ~100 bytes
    path = os.path.join(folder, "control.sock")
    monkeypatch.setenv("ZREAD_SIM_CONTROL", f"unix:{path}")
    remote = Remote(path)
    yield remote
    remote.close()
    shutil.rmtree(folder, ignore_errors=True)
