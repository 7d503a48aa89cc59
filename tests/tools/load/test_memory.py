"""Tests for simulator.tools.load.memory: RSS read from /proc (else psutil), from a real
process: this one."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from simulator.tools.load import status_kb
from simulator.tools.load.memory import rss_kb


def test_status_kb_reads_this_process() -> None:
    rss = status_kb("self", "VmRSS")
    assert rss is not None and rss > 1000  # a Python process: over a megabyte
    peak = status_kb("self", "VmHWM")
    assert peak is not None and peak >= rss
    assert status_kb("self", "NoSuchField") is None
    assert status_kb(2**22 + 1, "VmRSS") is None  # beyond Linux's largest pid


def test_rss_without_proc_comes_from_psutil(tmp_path: Any) -> None:
    nowhere = str(tmp_path / "no-proc")
    assert status_kb("self", "VmRSS", nowhere) is None
    rss = rss_kb("self", nowhere)  # psutil is installed with the test extras
    assert rss is not None and rss > 1000
    assert rss_kb(2**22 + 1, nowhere) is None  # no such process


def test_rss_without_proc_or_psutil_is_not_measured(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)  # what `import psutil` finds missing
    assert rss_kb("self", str(tmp_path / "no-proc")) is None
    assert rss_kb("self") == status_kb("self", "VmRSS")  # /proc needs no psutil
