"""Cold start: ``python -m simulator version --stdio`` to its event and exit.

Measured side by side with ``python -c pass``, interleaved, so both see the same
machine load. Target: median ratio <= 4.5.

    python benchmarks/cold_start.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics

from _common import median_ms, python, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    baseline, simulator = [], []
    for _ in range(args.runs):
        baseline.append(wall([python(), "-c", "pass"]))
        simulator.append(wall([python(), "-m", "simulator", "version", "--stdio"]))
    ratio = statistics.median(simulator) / statistics.median(baseline)
    print(f"python -c pass:                      median {median_ms(baseline)}")
    print(f"python -m simulator version --stdio: median {median_ms(simulator)}")
    print(f"ratio: {ratio:.2f}x (target <= 4.5x)")


if __name__ == "__main__":
    main()
