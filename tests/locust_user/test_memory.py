"""simulator.locust_user.memory: the RSS added per live session, and its line."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from simulator.locust_user import memory
from simulator.locust_user.memory import Memory, memory_figure, memory_line, memory_of


class _Environment:
    """Stands for a Locust environment: only a key of the figures."""


def test_the_peak_is_the_highest_sample_with_a_session_live() -> None:
    samples = Memory(before=1000)
    samples.sample(5000)  # nobody live: not a peak
    samples.live = 2
    samples.sample(1500)
    samples.live = 4
    samples.sample(1900)
    samples.live = 1
    samples.sample(1800)
    assert samples.own() == samples.figure() == (900, 4)
    assert Memory().own() is None  # nothing before: not measured


def test_a_master_adds_up_its_workers() -> None:
    master = Memory(parts={"a": (400, 4), "b": (600, 6)})
    assert master.figure() == (1000, 10)


def test_the_figure_and_its_line() -> None:
    environment: Any = _Environment()
    assert memory_figure(environment) is None
    assert memory_line(environment) == "memory: not measured (no RSS sample with a session live)"
    memory_of(environment).parts["w"] = (2600, 100)
    assert memory_of(environment) is memory_of(environment)
    assert memory_figure(environment) == 26.0
    assert memory_line(environment) == (
        "memory: 26.0 KB per live session (2,600 KB added over the RSS before the first "
        "session, 100 live at the peak)"
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_rss_counts_the_children_running_now() -> None:
    own = memory.rss_with_children()
    assert own is not None and own > 0
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print(flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"  # it runs
        memory.CHILDREN.add(child.pid)
        with_child = memory.rss_with_children()
        assert with_child is not None and with_child > own + 1000  # a Python's RSS
    finally:
        memory.CHILDREN.discard(child.pid)
        child.kill()
        child.wait()
        child.stdout.close()
    assert os.getpid() not in memory.CHILDREN
