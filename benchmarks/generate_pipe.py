"""generate of 200 pages at speed 0, written to a pipe, against a replay of the same bytes.

The simulator runs ``generate --stdio -y --speed 0`` on benchmarks/pages-200.toml; its
stdout is recorded once. The replay script writes those recorded lines to its stdout,
one write per line, which is the floor for any Python fake. Both are read by this
process through a pipe; the rate is events over the time from the first byte to the
last event's newline, so interpreter start-up and tear-down are left out. Runs
alternate.
Target: simulator rate >= 0.5x the replay rate.

    python benchmarks/generate_pipe.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import HERE, python

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

SIM = [
    python(),
    "-m",
    "simulator",
    "generate",
    "--stdio",
    "-y",
    "--speed",
    "0",
    "--scenario",
    os.path.join(HERE, "pages-200.toml"),
]


def timed_read(argv: list[str], events: int) -> tuple[int, float]:
    """(bytes, seconds from the first byte to the newline of event number ``events``)."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    first = os.read(fd, 1 << 20)
    start = time.perf_counter()
    total, newlines = len(first), first.count(b"\n")
    while newlines < events and (chunk := os.read(fd, 1 << 20)):
        total += len(chunk)
        newlines += chunk.count(b"\n")
    seconds = time.perf_counter() - start
    proc.stdout.read()
    proc.wait()
    return total, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    recorded = subprocess.run(SIM, stdin=subprocess.DEVNULL, capture_output=True, check=True).stdout
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        f.write(recorded)
    replay = [sys.executable, "-c", REPLAY, f.name]
    events = recorded.count(b"\n")
    sim_rates, replay_rates = [], []
    size = 0
    for _ in range(args.runs):
        size, seconds = timed_read(SIM, events)
        sim_rates.append(events / seconds)
        _, seconds = timed_read(replay, events)
        replay_rates.append(events / seconds)
    os.unlink(f.name)
    sim, floor = statistics.median(sim_rates), statistics.median(replay_rates)
    print(f"{events} events, {size / 1e6:.1f} MB per run, {args.runs} runs each, medians:")
    print(f"simulator: {sim:10.0f} events/s {1e6 / sim:8.1f} us/event")
    print(f"replay:    {floor:10.0f} events/s {1e6 / floor:8.1f} us/event")
    print(f"ratio: {sim / floor:.2f}x (target >= 0.5x)")


if __name__ == "__main__":
    main()
