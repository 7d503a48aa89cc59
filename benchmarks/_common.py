"""Shared helpers of the benchmark scripts: timing statistics and process spawning."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def wall(
    argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None
) -> float:
    """Seconds from spawn to exit of one process, stdin /dev/null, its output discarded."""
    start = time.perf_counter()
    subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def median_ms(samples: Sequence[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.1f} ms"


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def python() -> str:
    return sys.executable


def pages_scenario(folder: str, pages: int) -> str:
    """The path of a scenario written into ``folder``: the default one with ``pages``
    pages in its project."""
    path = os.path.join(folder, f"pages-{pages}.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'description = "benchmark: {pages} pages"\n\n[world.project]\npages = {pages}\n')
    return path
