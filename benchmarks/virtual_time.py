"""Virtual time: complete default ``generate -y`` sessions per second, on one core.

Each session has its own seed and runs to ``done:true`` with no waiting: time jumps
from timer to timer. Two ways are timed, interleaved in rounds:

- ``virtual.start``: what a test with the ``zread_sim`` fixture does
  (``start("generate", "-y", seed=i).wait_done()``): flags parsed per session, every
  event decoded with json.loads, a transcript kept.
- ``Session``: the sans-I/O core alone (flags parsed once; ``next_deadline`` and
  ``advance`` until done), the floor of any virtual-time runner.

The process is pinned to one CPU. Target: >= 200 sessions/s (the ``virtual.start`` way).

    python benchmarks/virtual_time.py [--seconds 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from simulator.core.chart_specs import Chart
from simulator.core.driver import Flags
from simulator.core.session import Session
from simulator.launch import parse_flags
from simulator.runners.virtual import start
from simulator.scenario import Scenario, load_scenario
from statecharts import load_chart


def via_virtual(seed: int) -> int:
    session = start("generate", "-y", seed=seed)
    session.wait_done()
    return len(session.events)


def via_session(seed: int, chart: Chart, scenario: Scenario, flags: Flags) -> int:
    session = Session(chart, scenario, flags=flags, seed=seed)
    events = len(session.start())
    while (deadline := session.next_deadline()) is not None:
        events += len(session.advance(deadline, limit=1))
    assert session.done
    return events


def rate(run: Callable[[int], int], seconds: float, first_seed: int) -> tuple[float, int, int]:
    """(sessions/s, sessions, events) running ``run(seed)`` for about ``seconds``."""
    sessions = events = 0
    begin = time.perf_counter()
    while (elapsed := time.perf_counter() - begin) < seconds:
        events += run(first_seed + sessions)
        sessions += 1
    return sessions / elapsed, sessions, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per way per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    chart, scenario = load_chart("generate"), load_scenario("default")
    flags = parse_flags("generate", ["-y"])
    via_virtual(10**6)  # warm-up: imports and caches
    via_session(10**6, chart, scenario, flags)
    virtual, direct = [], []
    seed = 0
    for _ in range(args.rounds):
        per_s, n, events = rate(via_virtual, args.seconds, seed)
        virtual.append(per_s)
        seed += n
        per_s, n, events = rate(
            lambda s: via_session(s, chart, scenario, flags), args.seconds, seed
        )
        direct.append(per_s)
        seed += n
    per_session = events / n
    v, d = statistics.median(virtual), statistics.median(direct)
    print(f"generate -y, default scenario, {per_session:.0f} events per session, one CPU")
    print(f"{args.rounds} rounds of {args.seconds:g} s per way, medians, {seed} seeds in all:")
    print(f"virtual.start + wait_done: {v:7.0f} sessions/s {v * per_session:9.0f} events/s")
    print(f"Session + advance:         {d:7.0f} sessions/s {d * per_session:9.0f} events/s")
    print(f"virtual.start: {v / 200:.2f}x the target (>= 200 sessions/s)")


if __name__ == "__main__":
    main()
