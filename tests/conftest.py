"""Every test runs in a fresh project directory with a fresh HOME, so nothing the
simulator writes where zread writes (``~/.zread/``, the project's ``.zread/``) lands
in the real HOME or in this repository; the session checks it at its end.

The property tests (Hypothesis) run with one profile: derandomized, so a run is the
same run on every machine; no example database, so nothing is written into the
checkout; and a bounded number of examples, so the whole property suite stays well
under a minute. ``HYPOTHESIS_PROFILE=long`` runs more of them.

When bytecode writing is off (``PYTHONDONTWRITEBYTECODE``, as in a sandbox that keeps
checkouts clean), every module would be compiled again in every process: the test
modules (their assertions rewritten) in each xdist worker, and the simulator in each of
the many ``python -m simulator`` processes the tests start. So the run keeps its
bytecode in pytest's cache folder instead (``.pytest_cache``, with pytest's other
caches; ``--cache-clear`` empties it), never in ``__pycache__`` folders of the
checkout. (With ``-p no:cacheprovider``, nothing changes: every process compiles what
it finds no bytecode for, as it always did.)"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

REPOSITORY = Path(__file__).resolve().parents[1]
REAL_HOME = Path(os.environ.get("HOME", "/nonexistent"))

_PROFILE: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    # The autouse places below are per test, not per example; a property test that
    # writes files makes its own directory for each example.
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}
settings.register_profile("ci", max_examples=100, **_PROFILE)
settings.register_profile("long", max_examples=5000, **_PROFILE)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_PYCACHE = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """With bytecode writing off and pytest's cache on, this process's imports from now
    on (the test modules, the project) read and write their bytecode in that cache;
    :func:`processes_share_the_bytecode` hands it to the processes the tests start."""
    cache = getattr(config, "cache", None)
    if cache is None or not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return
    try:
        prefix = cache.mkdir("pycache")
    except OSError:  # a checkout that cannot be written: compile as before
        return
    config.stash[_PYCACHE] = prefix
    sys.pycache_prefix = str(prefix)
    sys.dont_write_bytecode = False


@pytest.fixture(scope="session", autouse=True)
def processes_share_the_bytecode(pytestconfig: pytest.Config) -> Iterator[None]:
    """The processes the tests start (``python -m simulator ...``) read and write their
    bytecode in the same cache, so a module is compiled once, not once a process. Set
    here, where tests run, not at configuration: an xdist worker started with it would
    compile pytest itself into the cache before its first run there."""
    prefix = pytestconfig.stash.get(_PYCACHE, None)
    if prefix is None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield


@pytest.fixture(scope="session", autouse=True)
def every_module_imported_once() -> None:
    """Import every module of the project before any test runs.

    pytester's in-process runs (the docs' examples, the plugin's tests) drop the modules
    they import when they end; a module imported by the outer run stays. Without this, a
    module first imported in an example would be imported again by the next one while
    its importers stay, and two copies of one class would not be the same class (an
    effect type a store no longer recognises)."""
    import importlib
    import pkgutil

    import simulator
    import statecharts

    for package in (simulator, statecharts):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            # simulator.locust imports Locust, which monkey-patches the process (gevent).
            if not module.name.endswith("__main__") and module.name != "simulator.locust":
                importlib.import_module(module.name)


@pytest.fixture(scope="session", autouse=True)
def nothing_written_where_it_must_not_be() -> Iterator[None]:
    """zread's places of the real machine are as they were when the run began."""
    watched = [REPOSITORY / ".zread", REAL_HOME / ".zread"]
    before = {path: path.exists() for path in watched}
    yield
    created = [str(path) for path in watched if path.exists() and not before[path]]
    assert not created, f"the test run wrote into {', '.join(created)}"


@pytest.fixture(scope="session")
def warm_server(pytestconfig: pytest.Config) -> str:
    """The socket of this run's warm server (``zread-sim serve``, one per worker, as
    ``zread_bin`` starts it); "" with ``--zread-no-server``."""
    from simulator.launcher import VARIABLE
    from simulator.tools.serve import start_for_tests

    return start_for_tests(pytestconfig).get(VARIABLE, "")


@pytest.fixture(autouse=True)
def processes_start_warm(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``zread`` or ``python -m simulator`` a test starts with this environment is
    served by the warm server: a real process on real pipes, forked from one that has
    imported the simulator already, instead of one that imports it again. A test marked
    ``cold`` (what it checks is the process's own start-up, or its memory in ``/proc``)
    and a test that hands its process a stripped environment start it cold; so does
    every test with ``--zread-no-server``."""
    if request.node.get_closest_marker("cold") is not None:
        monkeypatch.delenv("ZREAD_SIM_SERVER", raising=False)
        return
    path = request.getfixturevalue("warm_server")
    if path:
        monkeypatch.setenv("ZREAD_SIM_SERVER", path)


@pytest.fixture(autouse=True)
def zread_places(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fresh project (the working directory); HOME is a fresh folder beside it."""
    root = tmp_path_factory.mktemp("zread-places")
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    return project
