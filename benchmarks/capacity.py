"""Capacity: N concurrent ``generate -y`` sessions on P processes, in real time, on Locust.

Runs ``zread-sim load generate --sessions N --processes P --duration D`` (N sessions at
once, in-process, run by Locust users of up to ten each on P worker processes, each user
beginning a session when one ends) and
reads back Locust's CSV statistics and the memory line the command prints.

Reported: p99 lateness of the timers (the highest p99 of any trigger, and the p99 of
each), sessions completed and failed, and memory per live session: (RSS at the highest
sample - RSS before the first session) / sessions live at that sample, summed over the
workers. Targets: p99 <= 50 ms from the schedule, <= 26 KB per live session.

    python benchmarks/capacity.py [--sessions 2000] [--processes 2] [--pages 50]
                                  [--speed 1] [--ramp 5] [--duration 30]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

from _common import pages_scenario

TARGET_P99_MS = 50.0
TARGET_KB = 26.0


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    if value <= target:
        return f"met ({value:g} <= {target:g})"
    return f"MISSED by {value / target:.1f}x ({value:g} > {target:g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--ramp", type=float, default=5.0)
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="capacity-") as folder:
        prefix = os.path.join(folder, "run")
        argv = [sys.executable, "-m", "simulator", "load", "generate", "-y"]
        argv += ["--sessions", str(args.sessions), "--processes", str(args.processes)]
        argv += ["--scenario", pages_scenario(folder, args.pages), "--speed", repr(args.speed)]
        argv += ["--ramp", repr(args.ramp), "--duration", repr(args.duration), "--csv", prefix]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            sys.exit(f"the load run failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        with open(f"{prefix}_stats.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    late = {r["Name"]: float(r["99%"]) for r in rows if r["Type"] == "lateness"}
    sessions = next((r for r in rows if r["Type"] == "session"), None)
    memory = re.search(r"^memory: ([\d.]+) KB per live session.*$", done.stdout, re.M)
    p99 = max(late.values()) if late else None
    kb = float(memory.group(1)) if memory else None
    print(
        f"{args.sessions} sessions on {args.processes} processes, {args.pages} pages, "
        f"speed {args.speed:g}, ramp {args.ramp:g} s, {args.duration:g} s"
    )
    if sessions is not None:
        print(f"sessions: {sessions['Request Count']} ({sessions['Failure Count']} failed)")
    print("p99 lateness per trigger: " + ", ".join(f"{k} {v:g} ms" for k, v in late.items()))
    print(f"p99 lateness (highest): {verdict(p99, TARGET_P99_MS)}")
    print(memory.group(0) if memory else "memory: not measured")
    print(f"memory per live session (KB): {verdict(kb, TARGET_KB)}")


if __name__ == "__main__":
    main()
