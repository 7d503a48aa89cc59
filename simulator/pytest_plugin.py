"""The pytest plugin: ``zread_sim`` and ``zread_bin``, active once zread-sim is installed.

Owns only the fixtures; the logic lives in plain classes usable without pytest
(:class:`simulator.virtual.ZreadSim`, :func:`simulator.pipes.spawn`). Every test gets a
fresh world: nothing a session or a ``zread`` process does leaks into the next test.
Override either fixture in a ``conftest.py`` to change its defaults.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from simulator.hosts.executable import write_zread_executable

if TYPE_CHECKING:
    from simulator.runners.virtual import ZreadSim
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
)
"""Cleared for every test that uses ``zread_bin``; the test sets what it needs."""


@pytest.fixture
def zread_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZreadSim]:
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
    sim.close()


class ZreadExecutable(type(Path())):  # type: ignore[misc]
    """The path of the ``zread`` executable, with the places it writes to: ``home``
    (plays HOME: ``home/.zread/``) and ``project`` (the test's working directory, whose
    ``.zread/wiki`` a ``zread generate`` started without a ``cwd`` writes)."""

    home: Path
    project: Path


@pytest.fixture
def zread_bin(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> ZreadExecutable:
    """A ``zread`` executable, its folder first on PATH for this test.

    Steer it with ``monkeypatch.setenv("ZREAD_SIM_SCENARIO", ...)`` (and ``_SEED``,
    ``_SPEED``); the variables start cleared. It is the script ``zread-sim install``
    writes (with nothing baked in), so it also runs in an environment a client strips.
    The test runs in a fresh project directory (``zread_bin.project``), and zread's
    HOME is a fresh folder (``zread_bin.home``, through ``ZREAD_SIM_HOME``), so nothing
    is written into the real HOME or the client's repository.
    """
    root = tmp_path_factory.mktemp("zread-bin")
    folder, home, project = root / "bin", root / "home", root / "project"
    for made in (folder, home, project):
        made.mkdir()
    for variable in SIMULATOR_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ZREAD_SIM_HOME", str(home))
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(project)
    executable = ZreadExecutable(write_zread_executable(folder))
    executable.home, executable.project = home, project
    return executable


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
