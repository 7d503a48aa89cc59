"""Per call, in the test body, side by side in one run: the in-process fixtures with
files on and off, against pytest-subprocess serving the same 24 events canned.

The files-on rows run the shared measuring stick's own test files
(``../shared/bench/test_sim.py``, ``test_popen.py``, ``test_fp.py``) exactly as
``../shared/bench/ratio.py`` runs them; the files-off rows are this folder's
``per_call/`` variants of the same tests. Each round runs every test once, in turn
(N calls in one test, a fresh pytest, HOME and working directory each), and each
ratio is the median over the rounds of (this round's call / this round's
pytest-subprocess call). Targets: sim <= 4x, popen <= 6x; files off <= 2x and <= 4x.

    python benchmarks/per_call.py [--rounds 5] [--calls 50] [--bench ../shared/bench]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = {"sim": 4.0, "popen": 6.0, "sim-files-off": 2.0, "popen-files-off": 4.0}


def run(test: str, calls: int, python: str) -> float:
    """Seconds a call in ``test``'s body, as the test wrote it."""
    with tempfile.NamedTemporaryFile(prefix="bench-timing-", delete=False) as timing:
        path = timing.name
    try:
        done = subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", test],
            cwd=tempfile.mkdtemp(),
            env=dict(os.environ, TIMING_FILE=path, HOME=tempfile.mkdtemp(), N=str(calls)),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            sys.exit(f"{test} failed:\n{done.stdout[-2000:]}")
        with open(path) as f:
            return float(f.read().split()[1])
    finally:
        os.unlink(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--bench", default=os.path.join(HERE, "..", "..", "shared", "bench"))
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    tests = {
        "fp": os.path.join(args.bench, "test_fp.py"),
        "sim": os.path.join(args.bench, "test_sim.py"),
        "popen": os.path.join(args.bench, "test_popen.py"),
        "sim-files-off": os.path.join(HERE, "per_call", "test_sim_files_off.py"),
        "popen-files-off": os.path.join(HERE, "per_call", "test_popen_files_off.py"),
    }
    seconds: dict[str, list[float]] = {name: [] for name in tests}
    for _ in range(args.rounds):
        for name, test in tests.items():
            seconds[name].append(run(test, args.calls, args.python))
    fp = seconds["fp"]
    print(f"pytest-subprocess {statistics.median(fp) * 1e3:.2f} ms a call")
    for name, target in TARGETS.items():
        ratio = statistics.median(ours / peer for ours, peer in zip(seconds[name], fp, strict=True))
        verdict = "met" if ratio <= target else f"MISSED by {ratio / target:.2f}x"
        ms = statistics.median(seconds[name]) * 1e3
        print(f"{name:16s} {ms:6.2f} ms a call, {ratio:5.1f}x (target <= {target:g}x): {verdict}")


if __name__ == "__main__":
    main()
