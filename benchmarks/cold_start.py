"""Cold start: ``python -m simulator version --stdio`` to its event and exit.

Measured side by side with ``python -c pass``, interleaved, so both see the same
machine load. Target: median ratio <= 4.5.

``--bytecode cached`` (the default) writes every module's bytecode first and lets the
runs read it (``PYTHONDONTWRITEBYTECODE`` is unset for them); ``--bytecode none``
points ``PYTHONPYCACHEPREFIX`` at an empty folder, so every module, the standard
library's too, is compiled on every run. ``--against DIR`` also times the simulator of
another checkout (``git worktree add ../before HEAD~1``), interleaved with this one.

    python benchmarks/cold_start.py [--runs 30] [--bytecode cached|none] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from _common import HERE, median_ms, python, wall

ROOT = os.path.dirname(HERE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--bytecode", choices=("cached", "none"), default="cached")
    parser.add_argument("--against", metavar="DIR", help="another checkout to time beside this")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    empty = tempfile.TemporaryDirectory()
    if args.bytecode == "none":
        env |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty.name}
    simulator = [python(), "-m", "simulator", "version", "--stdio"]
    trees = {"this tree": ROOT}
    if args.against:
        trees[args.against] = os.path.abspath(args.against)
    for tree in trees.values():  # bytecode written first, where it is kept
        wall(simulator, cwd=tree, env=env)
    baseline: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.runs):
        baseline.append(wall([python(), "-c", "pass"], cwd=ROOT, env=env))
        for name, tree in trees.items():
            times[name].append(wall(simulator, cwd=tree, env=env))
    print(f"bytecode {args.bytecode}, {args.runs} runs each, interleaved")
    print(f"python -c pass:                      median {median_ms(baseline)}")
    for name, samples in times.items():
        ratio = statistics.median(samples) / statistics.median(baseline)
        print(f"simulator version --stdio, {name}: median {median_ms(samples)}, {ratio:.2f}x")
    print("target <= 4.5x")
    empty.cleanup()


if __name__ == "__main__":
    main()
