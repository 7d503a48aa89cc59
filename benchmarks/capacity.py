"""In-process capacity: N concurrent ``generate -y`` sessions in one process, in real time.

Every session is created first (not started; the RSS before and after gives the size
of a created session), then all are started, at once or evenly over ``--ramp``
seconds, on one asyncio loop and one :class:`simulator.runners.aio.Hub`, each driven by the
reference client, through ``simulator.tools.load`` (the engine of ``python -m simulator load
--prebuild``). Reported: lateness of timer events against their schedule
(p50/p95/p99/max), events/s, the CPU share of the run (1.0 = one core saturated: the
loop cannot keep up), the collector's pauses, and the peak RSS the sessions added, per
session.

The scenario is the default one with ``[world.project] pages = 50`` (written to a
temporary file). Target: 10,000 sessions at speed 1, p99 <= 50 ms, <= 30 KB per session.

    python benchmarks/capacity.py [--sessions 10000] [--pages 50] [--speed 1] [--ramp 0]
                                  [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from simulator.tools.load import LoadConfig, run

TARGET_P99_MS = 50.0
TARGET_KB = 30.0


def verdict(value: float, target: float) -> str:
    if value <= target:
        return f"met ({value:g} <= {target:g})"
    return f"MISSED by {value / target:.1f}x ({value:g} > {target:g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="start them evenly over this many seconds"
    )
    parser.add_argument("--json", metavar="FILE", help="write the full load summary")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        scenario = os.path.join(folder, f"pages-{args.pages}.toml")
        with open(scenario, "w", encoding="utf-8") as f:
            f.write(
                f'description = "capacity benchmark"\n\n[world.project]\npages = {args.pages}\n'
            )
        config = LoadConfig(
            command="generate",
            args=["-y"],
            sessions=args.sessions,
            scenario=scenario,
            speed=args.speed,
            prebuild=True,
            ramp=args.ramp,
        )
        cpu = time.process_time()
        summary = run(config)
        cpu = time.process_time() - cpu
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    built = summary["prebuilt"]
    late = summary["lateness_ms"]
    pauses = summary["gc"]
    busy = (cpu - built["seconds"]) / summary["seconds"]
    print(
        f"{args.sessions:,} concurrent generate -y sessions, {args.pages} pages, "
        f"speed {args.speed:g}, one process, one loop, "
        + (f"started over {args.ramp:g} s" if args.ramp else "all started at once")
    )
    print(
        f"created:  {built['seconds']:.2f} s, {built['rss_per_session_kb']:.1f} KB per session "
        "before start"
    )
    print(
        f"run:      {summary['seconds']:.2f} s wall, {summary['events']:,} events = "
        f"{summary['events_per_s']:,.0f} events/s, CPU {busy:.2f} of one core; "
        f"completed {summary['completed']:,}, errors {summary['errors']}"
    )
    print(
        f"live:     at most {summary['peak_live']:,} of {args.sessions:,} at once; "
        f"{summary['hub_wakeups']:,} hub wake-ups for {late['timer_events']:,} timer events"
    )
    print(
        f"lateness: p50 {late['p50']:.2f} ms, p95 {late['p95']:.2f} ms, p99 {late['p99']:.2f} ms, "
        f"max {late['max']:.2f} ms ({late['timer_events']:,} timer events)"
    )
    print(
        f"gc:       {pauses['collections']} collections (gen 0/1/2), max pause "
        f"{pauses['max_pause_ms']:.1f} ms, total {pauses['total_pause_ms']:.0f} ms"
    )
    print(
        f"memory:   peak RSS {summary['peak_rss_mb']:.0f} MB, "
        f"{summary['rss_per_session_kb']:.1f} KB per session at peak"
    )
    if summary["peak_live"] < args.sessions:
        print(f"concurrency: MISSED, {summary['peak_live']:,} < {args.sessions:,} live at once")
    print(f"p99 lateness <= {TARGET_P99_MS:g} ms: {verdict(late['p99'], TARGET_P99_MS)}")
    print(f"KB per session <= {TARGET_KB:g}: {verdict(summary['rss_per_session_kb'], TARGET_KB)}")
    for message in summary["error_messages"]:
        print(f"error: {message}")


if __name__ == "__main__":
    main()
