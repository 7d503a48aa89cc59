"""The client's own ``subprocess.Popen`` of ``zread``, N calls in one test, served by
``zread_popen`` with files off (``ZREAD_SIM_FILES=0``: the world stays in memory)."""

import json
import os
import subprocess
import time

import pytest

N = int(os.environ.get("N", "50"))


def run_generate() -> tuple[int, list[dict]]:
    p = subprocess.Popen(
        ["zread", "generate", "--stdio", "-y"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    events = []
    assert p.stdout is not None
    assert p.stdin is not None
    for line in p.stdout:
        ev = json.loads(line)
        events.append(ev)
        if ev["done"]:
            break
    p.stdin.close()
    p.wait(timeout=10)
    return p.returncode, events


def test_popen_calls_files_off(zread_popen, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ZREAD_SIM_FILES", "0")
    t0 = time.perf_counter()
    for _ in range(N):
        rc, events = run_generate()
        assert rc == 0
        assert events[-1]["done"]
        assert events[-1]["vm"]["done_total"] == 16
    with open(os.environ["TIMING_FILE"], "a") as f:
        f.write(f"popen-files-off {(time.perf_counter() - t0) / N:.6f}\n")
