"""The pytest plugin: ``zread_sim``, ``zread_bin`` and ``zread_popen``, active once
zread-sim is installed.

Owns the fixtures. The sessions' logic lives in plain classes usable without pytest
(:class:`simulator.virtual.ZreadSim`, :func:`simulator.pipes.spawn`,
:class:`simulator.popen.Launches`, which serves the test's own launches of ``zread``
in-process for ``zread_popen``); what ``zread_bin``
makes of its processes' journal, the calls (:class:`ZreadCall`) and the watch that kills
a call past its timeout or left running, is :mod:`simulator.tools.calls`'s. Every test
gets a fresh world: nothing a session or a ``zread`` process does leaks into the next
test. Override either fixture in a ``conftest.py`` to change its defaults.

``--zread-coverage`` adds up what the fixtures' sessions reached of the charts (the
in-process sessions of ``zread_sim``, the journals of ``zread_bin``'s processes) and
prints :mod:`simulator.tools.coverage`'s table at the end of the run;
``--zread-coverage-json FILE`` writes it, ``--zread-coverage-fail-under N`` fails the
run below N percent of transitions. Under pytest-xdist each worker sends what it
counted to the controller, which reports the whole run.

pytest rewrites the asserts of every module of a distribution that has a plugin, so
each simulator module a session imports would be parsed and compiled anew on every run
where bytecode is not written (``PYTHONDONTWRITEBYTECODE``, as many container images
set; a read-only install): ~100 ms of a suite's first session. The simulator asserts
nothing a test reads, so its packages are taken off the list as the plugin loads
(:func:`_not_rewritten`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from simulator.hosts.executable import write_zread_executable
from simulator.tools.calls import Watch
from simulator.tools.calls import ZreadCall as ZreadCall
from simulator.tools.calls import calls as read_calls

if TYPE_CHECKING:
    from simulator.runners.virtual import ZreadSim
    from simulator.tools.coverage import Coverage
    from simulator.tools.remote import Remote

_OWN_PACKAGES = ("simulator", "statecharts")


def _not_rewritten(packages: tuple[str, ...] = _OWN_PACKAGES) -> None:
    """Take ``packages`` off what pytest's assertion rewriting marked to rewrite.

    pytest has no call for this: its import hook's set of marked names and their cache
    are read as they are (a pytest without them leaves the rewriting as it is)."""
    import sys

    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and not marked.isdisjoint(packages):
            marked.difference_update(packages)
            cache = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(cache, dict):
                cache.clear()


_not_rewritten()

SIMULATOR_PREFIX = "ZREAD_SIM_"
"""Every variable named so is cleared for a test that uses ``zread_bin`` (the shell's or
another test's, including ones this plugin does not know); the test sets what it needs."""


# -- coverage -----------------------------------------------------------------------

_COVERAGE = pytest.StashKey["Coverage"]()
_WRITE_ERROR = pytest.StashKey[str]()
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
        "--zread-no-server",
        action="store_true",
        help="zread_bin's zread starts a process per call instead of being served by a "
        "warm server (zread-sim serve) started for the test session",
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

        path = config.getoption("zread_coverage_json")
        if path and not hasattr(config, "workerinput"):  # the controller writes it
            _check_writable(path)
        config.stash[_COVERAGE] = Coverage()


def _check_writable(path: str) -> None:
    """:class:`pytest.UsageError` now, not a traceback after the whole run, when the
    report cannot be written to ``path``; opened as the write will, then left as found."""
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
        if not existed:
            os.unlink(path)
    except OSError as err:
        raise pytest.UsageError(
            f"--zread-coverage-json {path}: cannot write: {err.strerror or err}"
        ) from None


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
        try:
            write_json(coverage, path)
        except OSError as err:  # the summary, after this hook, says it
            config.stash[_WRITE_ERROR] = f"{path}: cannot write: {err.strerror or err}"
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
    unwritten = config.stash.get(_WRITE_ERROR, None)
    if unwritten:
        terminalreporter.write_line(f"zread coverage not written: {unwritten}", red=True)
    elif path:
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
    _watch: Watch
    _fixture: str

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
        return read_calls(self.journal, self._watch.killed)


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
    writes, with ``ZREAD_SIM_HOME``, ``ZREAD_SIM_SPEED=0``, ``ZREAD_SIM_JOURNAL`` (and the
    session's warm server) baked in as defaults a variable set at run time overrides, so
    it also runs in an environment a client strips.
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
    for variable in [name for name in os.environ if name.startswith(SIMULATOR_PREFIX)]:
        monkeypatch.delenv(variable)
    journal = root / "journal.jsonl"
    # Set for the test and baked into the script too: a client that hands its child a
    # stripped environment still gets this HOME, no delays and the journal.
    fixed = {"ZREAD_SIM_HOME": str(home), "ZREAD_SIM_SPEED": "0", "ZREAD_SIM_JOURNAL": str(journal)}
    for variable, value in fixed.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(project)
    from simulator.tools.serve import start_for_tests  # the session's warm server

    baked = {**fixed, **start_for_tests(request.config)}
    executable = ZreadExecutable(write_zread_executable(folder, baked))
    executable.home, executable.project, executable.journal = home, project, journal
    executable.strict = True
    executable._fixture = "zread_bin"
    executable._watch = Watch(journal, DEFAULT_CALL_TIMEOUT)
    yield executable
    executable._watch.close()
    coverage = _coverage(request.config)
    if coverage is not None and journal.exists():
        coverage.add_journal(str(journal))
    if executable.strict:
        problems = [v for call in executable.calls for v in call.violations]
        if problems:
            name = executable._fixture
            pytest.fail(
                f"{name}: the zread processes of this test saw mistakes "
                f"({name}.strict = False to allow them):\n  " + "\n  ".join(problems),
                pytrace=False,
            )


@pytest.fixture
def zread_popen(
    zread_bin: ZreadExecutable, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ZreadExecutable]:
    """``zread_bin``, with the test's own launches of ``zread`` served in-process.

    While the test runs, ``subprocess.Popen`` (and ``run``, ``check_output`` ...) and
    ``asyncio.create_subprocess_exec`` of ``zread`` (argv[0], or ``executable=``, named
    ``zread``) start no process: the simulator's command line runs on a thread of the
    test's process, behind real pipes, with the environment and working directory of the
    launch, and hands back a ``Popen`` (an ``asyncio.subprocess.Process``) as a process
    would. ``terminate()`` and SIGTERM quit, ``kill()`` ends the run at once as SIGKILL
    does; ``os.kill`` on its pid (above any real pid) signals it. Anything else runs for
    real, ``sh -c 'zread …'`` too (the ``zread`` of ``zread_bin``).

    Everything else is ``zread_bin``'s: the same object (``.calls``, ``.home``,
    ``.project``, ``.journal``, ``.strict``, ``.timeout``), the same journal, the
    violations that fail the test, the coverage.
    """
    from simulator.popen import Launches

    watch = zread_bin._watch
    zread_bin._fixture = "zread_popen"

    def started(popen: Any) -> None:
        watch.served[popen.pid] = popen

    launches = Launches(on_start=started)
    for target, name, value in launches.patches():
        monkeypatch.setattr(target, name, value)
    yield zread_bin
    watch.close()  # a journaled call still running: killed, and a violation of its call
    for popen in launches.served.values():
        if popen.poll() is None:  # one with no journal (its environment had none)
            popen.kill()


@pytest.fixture
def zread_remote(zread_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    """The admin API of the next ``zread`` this test starts (with ``zread_bin``).

    Sets ``ZREAD_SIM_CONTROL=unix:...`` for the test; ``zread_remote.snapshot()``,
    ``.inject(failure={...})``, ``.faults()``, ``.remove(id)``, ``.reset()``,
    ``.set_timing(name, timing)`` ... connect on first use, waiting for the process.
    """
    from simulator.tools.remote import Remote

    folder = tempfile.mkdtemp(prefix="zread-sim-")  # short: socket paths max ~100 bytes
    path = os.path.join(folder, "control.sock")
    monkeypatch.setenv("ZREAD_SIM_CONTROL", f"unix:{path}")
    remote = Remote(path)
    yield remote
    remote.close()
    shutil.rmtree(folder, ignore_errors=True)
