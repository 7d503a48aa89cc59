"""What a load run's processes hold in memory: their resident set, now and at its peak.

Owns: reading a process's RSS (:func:`status_kb`, :func:`rss_kb`).

RSS comes from /proc where there is one; else from psutil if it is installed (an
optional import: psutil is not required); else it is not measured (None).

Locust reports its own processes' memory only as a figure per worker in its web UI;
the memory per live session (:mod:`simulator.locust`) needs RSS read alongside the
sessions live, in every process that runs them, which this module does.

Must not: count sessions, nor write to the terminal.
"""

from __future__ import annotations

import importlib
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
