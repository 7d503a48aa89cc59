"""Shared helpers of the benchmark scripts: timing statistics and process spawning."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))


def wall(
    argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None
) -> float:
    """Seconds from spawn to exit of one process, its output discarded."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def median_ms(samples: Sequence[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.1f} ms"


def python() -> str:
    return sys.executable
