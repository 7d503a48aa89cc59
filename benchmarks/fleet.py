"""A fleet of real ``zread`` processes: RSS per process, and every transcript valid.

Runs ``python -m simulator load generate --mode process --sessions N`` (all N at once,
each ``zread generate --stdio -y`` with its own seed, driven over its pipes by the
reference client) and reads its JSON summary: every transcript must be complete and
valid (each line a JSON event with vm, waiting_for, done and error; the last one
done; exit code 0). The peak RSS (VmHWM) of each process is sampled at its last event.
Side by side, the peak RSS of a bare ``python -c``, the floor of any Python fake. The CPU
time of the fleet says whether the wall time is the sessions' schedule or the machine.

    python benchmarks/fleet.py [--sessions 200] [--speed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

from _common import python


def load_command() -> list[str]:
    """``python -m simulator load`` once the CLI routes it, else the module itself."""
    probe = subprocess.run(
        [python(), "-m", "simulator", "load", "--help"], capture_output=True, check=False
    )
    return [python(), "-m", "simulator" if probe.returncode == 0 else "simulator.tools.load"]


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
        path = os.path.join(folder, "fleet.json")
        argv = [*load_command(), "load", "generate", "--mode", "process"]
        if argv[2] == "simulator.tools.load":
            argv.remove("load")
        argv += ["--sessions", str(args.sessions), "--speed", repr(args.speed)]
        argv += ["--json", path, "--no-progress", "--", "-y"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if not os.path.exists(path):
            sys.exit(f"the load run failed ({done.returncode}): {done.stderr.strip()}")
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    baseline = bare_python_rss_kb()
    rss = summary["rss_per_process_mb"]
    valid = summary["completed"] == summary["sessions"] and summary["errors"] == 0
    print(
        f"{summary['sessions']} concurrent zread generate --stdio -y processes, "
        f"speed {args.speed:g}, scenario default"
    )
    print(
        f"run:        {summary['seconds']:.2f} s wall, {summary['events']:,} events, "
        f"{summary['bytes'] / 1e6:.1f} MB read"
    )
    print(
        f"cpu:        {cpu:.1f} s for the fleet and the load tool = "
        f"{cpu / summary['sessions'] * 1e3:.0f} ms per process, on {os.cpu_count()} cores"
    )
    print(
        f"transcripts: {summary['completed']} complete and valid, {summary['errors']} errors"
        f" -> {'all valid' if valid else 'NOT all valid'}"
    )
    if rss is None:
        print("rss:        no sample (no /proc?)")
    else:
        print(
            f"rss:        per process min {rss['min']:.1f} MB, median {rss['median']:.1f} MB, "
            f"max {rss['max']:.1f} MB ({rss['sampled']} sampled); "
            f"fleet {rss['median'] * summary['sessions'] / 1024:.2f} GB at the median"
        )
        print(
            f"bare python: {baseline / 1024:.1f} MB; ratio "
            f"{rss['median'] * 1024 / baseline:.2f}x at the median"
        )
    print(f"load tool:  peak RSS {summary['load_tool_peak_rss_mb']:.1f} MB")
    for message in summary["error_messages"]:
        print(f"error: {message}")


if __name__ == "__main__":
    main()
