"""generate at speed 0, written to a pipe, against a replay of the same bytes.

The simulator runs ``generate --stdio -y --speed 0 --no-files`` on a scenario of
``--pages`` pages (written to a temporary folder, which is also the working
directory); its stdout is recorded once. The replay is a Python process that writes
those recorded lines to its stdout as fast as it can, one write per line, the floor
for any Python fake. Both are read by this process through the same kind of pipe
(``subprocess.PIPE``, 1 MiB reads); a run's rate is its events over the time from its
first byte to its last event's newline, so interpreter start-up and tear-down are
left out. The bytes read are checked against the recording, run by run.

Each measurement lasts at least ``--seconds`` (1 s) of that time: a process is run
again, its events and seconds added, until the seconds reach it, so a figure is never
a few milliseconds of one run. The simulator and the replay alternate, measurement by
measurement, in two placements: the reader (this process) and the writer pinned to
the same CPU, then to two different CPUs (``os.sched_setaffinity``: the writer's set
before it execs, so it never runs elsewhere). The second is skipped, with a message,
when only one CPU is available. Medians of ``--runs`` measurements are reported, as
events/s and MB/s, with the ratio of the medians.
Target: simulator rate >= 0.5x the replay rate, in each placement.

    python benchmarks/generate_pipe.py [--pages 200] [--runs 3] [--seconds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from _common import ROOT, pages_scenario, python, verdict

REPLAY = """
import os, sys
with open(sys.argv[1], "rb") as f:
    lines = f.read().splitlines(keepends=True)
out = sys.stdout.fileno()
for line in lines:
    view = memoryview(line)
    while view:
        view = view[os.write(out, view):]
"""

TARGET = 0.5


def pinned(cpu: int) -> Callable[[], None]:
    def pin() -> None:
        os.sched_setaffinity(0, {cpu})

    return pin


def timed_read(argv: list[str], events: int, cwd: str, cpu: int) -> tuple[int, float]:
    """(bytes, seconds from the first byte to the newline of event number ``events``)."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=os.environ | {"PYTHONPATH": ROOT},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        preexec_fn=pinned(cpu),  # no thread in this process: safe here
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    first = os.read(fd, 1 << 20)
    start = time.perf_counter()
    total, newlines = len(first), first.count(b"\n")
    while newlines < events and (chunk := os.read(fd, 1 << 20)):
        total += len(chunk)
        newlines += chunk.count(b"\n")
    seconds = time.perf_counter() - start
    total += len(proc.stdout.read())
    if proc.wait() != 0:
        raise SystemExit(f"{argv[:4]} exited with {proc.returncode}")
    return total, seconds


def measure(
    argv: list[str], events: int, size: int, cwd: str, cpu: int, at_least: float
) -> tuple[float, float, int]:
    """(events/s, MB/s, processes) over runs of ``argv`` adding up to ``at_least`` s."""
    seconds = 0.0
    runs = 0
    while seconds < at_least:
        read, took = timed_read(argv, events, cwd, cpu)
        if read != size:
            raise SystemExit(f"{argv[:4]}: {read} bytes read, {size} recorded")
        seconds += took
        runs += 1
    return events * runs / seconds, size * runs / seconds / 1e6, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="measurements per side")
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    placements = {"same CPU": (cpus[0], cpus[0])}
    if len(cpus) > 1:
        placements["different CPUs"] = (cpus[0], cpus[1])

    with tempfile.TemporaryDirectory(prefix="generate-pipe-") as folder:
        scenario = pages_scenario(folder, args.pages)
        simulator = [python(), "-m", "simulator", "generate", "--stdio", "-y"]
        simulator += ["--speed", "0", "--no-files", "--scenario", scenario]
        recorded = subprocess.run(
            simulator, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, check=True
        ).stdout
        recording = os.path.join(folder, "recorded.jsonl")
        with open(recording, "wb") as f:
            f.write(recorded)
        replay = [python(), "-c", REPLAY, recording]
        events, size = recorded.count(b"\n"), len(recorded)
        print(
            f"generate --stdio -y --speed 0, {args.pages} pages: {events} events, "
            f"{size / 1e6:.1f} MB per run ({size / events / 1e3:.1f} KB an event); "
            f"{args.runs} measurements of >= {args.seconds:g} s per side and placement, "
            "medians"
        )
        if len(cpus) == 1:
            print(f"different CPUs: skipped, only CPU {cpus[0]} is available")
        ratios: dict[str, float] = {}
        for placement, (reader, writer) in placements.items():
            os.sched_setaffinity(0, {reader})
            sim: list[tuple[float, float, int]] = []
            floor: list[tuple[float, float, int]] = []
            for _ in range(args.runs):
                sim.append(measure(simulator, events, size, folder, writer, args.seconds))
                floor.append(measure(replay, events, size, folder, writer, args.seconds))
            os.sched_setaffinity(0, set(cpus))
            print(f"{placement} (reader on CPU {reader}, writer on CPU {writer}):")
            for name, rows in (("simulator", sim), ("replay", floor)):
                rate = statistics.median(r[0] for r in rows)
                mbs = statistics.median(r[1] for r in rows)
                processes = sum(r[2] for r in rows)
                print(
                    f"  {name:9} {rate:9.0f} events/s {mbs:8.1f} MB/s "
                    f"{1e6 / rate:8.1f} us/event   ({processes} processes)"
                )
            ratio = statistics.median(r[0] for r in sim) / statistics.median(r[0] for r in floor)
            ratios[placement] = ratio
            print(f"  ratio: {ratio:.3f}x (target >= {TARGET}x): {verdict(ratio >= TARGET)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
