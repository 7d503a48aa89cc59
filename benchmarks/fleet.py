"""A fleet of real ``zread`` processes: every transcript valid, and memory per process.

Runs ``python -m simulator load generate --mode process --sessions N --csv P`` (all N
at once on Locust, each ``zread generate --stdio -y`` with its own seed, driven over its
pipes by the reference client, every transcript checked by the conformance check) and
reads Locust's ``P_stats.csv``: the ``session`` row's requests and failures say how many
transcripts were complete and valid (each line a JSON event, the last one done, exit
code 0). The memory line is the load command's own: (RSS at the peak, the children's
counted, - RSS before) / sessions live then, i.e. the memory of one live process. Side
by side, the peak RSS of a bare ``python -c``, the floor of any Python fake. The CPU time
of the fleet says whether the wall time is the sessions' schedule or the machine.

    python benchmarks/fleet.py [--sessions 200] [--speed 1]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from _common import python

BARE = "import sys; sys.stdout.write([x for x in open('/proc/self/status') if 'VmHWM' in x][0])"


def bare_python_rss_kb(runs: int = 5) -> int:
    """Median peak RSS of a bare ``python -c``, as it reads its own VmHWM at its end.

    (Not wait4's ru_maxrss: a vforked child counts its parent's pages until exec.)
    """
    samples = []
    for _ in range(runs):
        line = subprocess.run([python(), "-c", BARE], capture_output=True, check=True).stdout
        samples.append(int(line.split()[1]))
    return int(statistics.median(samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--speed", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        prefix = os.path.join(folder, "fleet")
        argv = [python(), "-m", "simulator", "load", "generate", "--mode", "process"]
        argv += ["--sessions", str(args.sessions), "--speed", repr(args.speed)]
        argv += ["--csv", prefix, "--", "-y"]
        began = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=folder)
        wall = time.monotonic() - began
        try:
            with open(f"{prefix}_stats.csv", encoding="utf-8") as f:
                rows = {(row["Type"], row["Name"]): row for row in csv.DictReader(f)}
        except OSError:
            sys.exit(f"the load run failed ({done.returncode}): {done.stderr.strip()}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    session = rows.get(("session", "generate"))
    count = int(session["Request Count"]) if session else 0
    failed = int(session["Failure Count"]) if session else 0
    memory = [line for line in done.stdout.splitlines() if line.startswith("memory:")]
    print(f"{args.sessions} concurrent zread generate --stdio -y processes, speed {args.speed:g}")
    print(f"run:         {wall:.2f} s wall (Locust's start and stop included)")
    print(
        f"cpu:         {cpu:.1f} s for the fleet and the load tool = "
        f"{cpu / max(1, args.sessions) * 1e3:.0f} ms per process, on {os.cpu_count()} cores"
    )
    valid = count == args.sessions and failed == 0
    print(
        f"transcripts: {count - failed} of {args.sessions} complete and valid, {failed} failed"
        f" -> {'all valid' if valid else 'NOT all valid'}"
    )
    print(memory[0] if memory else "memory:      no figure (no /proc?)")
    print(f"bare python: {bare_python_rss_kb() / 1024:.1f} MB peak RSS")


if __name__ == "__main__":
    main()
