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
    "ZREAD_SIM_CONTROL",
    "ZREAD_SIM_FRAME",
)
"""Cleared for every test that uses ``zread_bin``; the test sets what it needs."""


@pytest.fixture
def zread_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZreadSim]:
    """Start zread sessions in-process, in virtual time: ``zread_sim.start("generate")``.

    Sessions of one test share a fresh home: what one saves, the next one finds.
    """
    from simulator.runners.virtual import ZreadSim

    sim = ZreadSim(home=tmp_path_factory.mktemp("zread-home"))
    yield sim
    sim.close()


@pytest.fixture
def zread_bin(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``zread`` executable, its folder first on PATH for this test.

    Steer it with ``monkeypatch.setenv("ZREAD_SIM_SCENARIO", ...)`` (and ``_SEED``,
    ``_SPEED``); the variables start cleared.
    """
    folder = tmp_path_factory.mktemp("zread-bin")
    for variable in SIMULATOR_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ZREAD_SIM_HOME", str(tmp_path_factory.mktemp("zread-home")))
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return write_zread_executable(folder)


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
