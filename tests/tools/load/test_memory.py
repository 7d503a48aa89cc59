"""Tests for simulator.tools.load.memory: RSS read from /proc (else psutil), the peak
started afresh, and the sampler that watches other processes' peaks.

Every figure is read from a real process: this one, or a child that holds a known block.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from simulator.tools.load import RssSampler, status_kb
from simulator.tools.load.memory import peak_rss_kb, reset_peak_rss, rss_kb


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
    assert peak_rss_kb("self", nowhere) is None
    rss = rss_kb("self", nowhere)  # psutil is installed with the test extras
    assert rss is not None and rss > 1000
    assert rss_kb(2**22 + 1, nowhere) is None  # no such process


def test_rss_without_proc_or_psutil_is_not_measured(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)  # what `import psutil` finds missing
    assert rss_kb("self", str(tmp_path / "no-proc")) is None
    assert rss_kb("self") == status_kb("self", "VmRSS")  # /proc needs no psutil


def test_reset_peak_rss_starts_the_peak_afresh() -> None:
    block = b"x" * (64 << 20)
    del block
    before = status_kb("self", "VmHWM")
    assert before is not None
    reset_peak_rss()
    after, rss = status_kb("self", "VmHWM"), status_kb("self", "VmRSS")
    assert after is not None and rss is not None
    if after == before:
        pytest.skip("/proc/self/clear_refs is not writable here")
    assert after <= rss + 8 * 1024 < before


def test_the_rss_sampler_reads_the_peak_of_a_real_process() -> None:
    code = "import sys; b = b'x' * (40 << 20); print('ready', flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    sampler = RssSampler()
    try:
        with sampler.running():
            sampler.watch(proc.pid)
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            time.sleep(sampler.period * 4)
            peak = sampler.forget(proc.pid)
            assert sampler.forget(proc.pid) is None  # no longer watched
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    assert peak is not None and peak >= 40 << 10
    assert sampler.forget(12345678) is None


def test_without_proc_the_sampler_keeps_the_largest_rss_it_read(tmp_path: Any) -> None:
    # psutil reads the RSS as it is now; the sampler keeps the largest reading, so a
    # block the child has freed again still counts.
    code = (
        "import sys; b = b'x' * (40 << 20); print('ready', flush=True); sys.stdin.readline()"
        "; del b; print('freed', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    sampler = RssSampler(proc=str(tmp_path / "no-proc"))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        with sampler.running():
            sampler.watch(proc.pid)
            assert proc.stdout.readline() == b"ready\n"
            time.sleep(sampler.period * 4)
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == b"freed\n"
            now = rss_kb(proc.pid)
            time.sleep(sampler.period * 4)
            peak = sampler.forget(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    assert now is not None and now < 40 << 10  # the block is gone from the RSS ...
    assert peak is not None and peak >= 40 << 10  # ... but not from the peak kept
