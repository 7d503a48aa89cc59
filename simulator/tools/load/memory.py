"""What a load run's processes hold in memory: their resident set, now and at its peak.

Owns: reading RSS (:func:`status_kb`, :func:`rss_kb`, :func:`peak_rss_kb`), starting a
process's peak afresh (:func:`reset_peak_rss`), and watching the peaks of other
processes on a thread (:class:`RssSampler`).

RSS comes from /proc where there is one; else from psutil if it is installed (an
optional import: psutil is not required); else it is not measured (None).

Locust reports its own processes' memory only as a figure per worker in its web UI;
the memory per live session (:mod:`simulator.locust`) needs RSS read alongside the
sessions live, in every process that runs them, which this module does.

Must not: count sessions, start or stop the processes it reads, nor write to the
terminal.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from typing import Any

PROC = "/proc"
"""Where the process status files are (a test points it elsewhere to have none)."""


def status_kb(pid: int | str, key: str, proc: str = PROC) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or None if unreadable."""
    try:
        with open(f"{proc}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key.encode() + b":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _psutil() -> Any:
    """The psutil module, or None: it is optional."""
    try:
        return importlib.import_module("psutil")
    except ImportError:
        return None


def rss_kb(pid: int | str = "self", proc: str = PROC) -> int | None:
    """The resident set of ``pid`` in kB: from /proc, else psutil, else None."""
    value = status_kb(pid, "VmRSS", proc)
    if value is not None:
        return value
    psutil = _psutil()
    if psutil is None:
        return None
    try:
        process = psutil.Process() if pid == "self" else psutil.Process(int(pid))
        return int(process.memory_info().rss) // 1024
    except (psutil.Error, ValueError):
        return None


def peak_rss_kb(pid: int | str = "self", proc: str = PROC) -> int | None:
    """The peak resident set (VmHWM) of ``pid`` in kB, from /proc only, else None."""
    return status_kb(pid, "VmHWM", proc)


def reset_peak_rss() -> None:
    """Start this process's VmHWM afresh (Linux: ``5`` into clear_refs); best effort."""
    with contextlib.suppress(OSError), open(f"{PROC}/self/clear_refs", "w") as f:
        f.write("5")


class RssSampler:
    """Reads the peak RSS of the processes it watches every :attr:`period` s, on a thread.

    A thread, because the loop can be busy (spawning is synchronous) while a short
    process writes its last event and exits. VmHWM only grows within one program, so
    the latest sample is kept (one taken before ``exec`` would be the parent's). Without
    /proc, the largest RSS psutil read is kept instead (a peak seen, not the kernel's).
    """

    period = 0.05

    def __init__(self, proc: str = PROC) -> None:
        self.proc = proc
        self._latest: dict[int, int | None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def watch(self, pid: int) -> None:
        with self._lock:
            self._latest[pid] = None  # now it is the zread script's shell; python comes next

    def forget(self, pid: int) -> int | None:
        """The last peak RSS (kB) read of ``pid``; it is no longer watched."""
        with self._lock:
            return self._latest.pop(pid, None)

    def _sample(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                pids = list(self._latest)
            for pid in pids:
                value, seen = self._read(pid)
                if value is not None:
                    self._keep(pid, value, seen)

    def _read(self, pid: int) -> tuple[int | None, bool]:
        """``pid``'s peak RSS in kB, and whether it is only a reading (no VmHWM)."""
        peak = peak_rss_kb(pid, self.proc)
        if peak is not None:
            return peak, False
        return rss_kb(pid, self.proc), True

    def _keep(self, pid: int, value: int, seen: bool) -> None:
        """The kernel's peak replaces the last; a reading only raises it."""
        with self._lock:
            if pid not in self._latest:
                return  # forgotten meanwhile
            last = self._latest[pid]
            self._latest[pid] = max(value, last) if seen and last is not None else value

    @contextlib.contextmanager
    def running(self) -> Iterator[RssSampler]:
        thread = threading.Thread(target=self._sample, name="rss sampler", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
