"""In-process capacity: N concurrent ``generate -y`` sessions, in real time, on every core.

The sessions are split between K worker processes (``--workers``, default one per core;
session i in worker i % K), each one asyncio loop and one
:class:`simulator.runners.aio.Hub`, each session driven by the reference client, through
``simulator.tools.load`` (the engine of ``python -m simulator load``). Session i is
scheduled at ``i * ramp / N`` (all at once without ``--ramp``) and created only when due.

Reported: lateness from each session's schedule (how late it started, then how late
each timer fired; p50/p95/p99/max, per worker and merged exactly), events/s, the CPU
share of the run (1.0 = one core saturated), the collector's pauses, the sessions live
at once at most, and memory per live session: (RSS at the highest sample - RSS before
any session) / the sessions live at that sample.

The scenario is the default one with ``[world.project] pages = 50`` (written to a
temporary file). Targets: 10,000 sessions on 2 workers live at once, p99 <= 50 ms from
the schedule, <= 26 KB per live session; one worker: 5,000 sessions at p99 <= 50 ms.

    python benchmarks/capacity.py [--sessions 10000] [--pages 50] [--speed 1] [--ramp 0]
                                  [--workers K] [--json FILE] [--search LOW]

``--search LOW`` answers the converse question, what this machine holds: the most
sessions between LOW and ``--sessions`` that meet p99 <= 50 ms with all of them live at
once and no error, found by bisection to within 5 %; a count is kept only if it passes
two runs in a row, so one lucky run does not raise the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

from _common import pages_scenario

from simulator.tools.load import LoadConfig, run

TARGET_P99_MS = 50.0
TARGET_KB = 26.0


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    if value <= target:
        return f"met ({value:g} <= {target:g})"
    return f"MISSED by {value / target:.1f}x ({value:g} > {target:g})"


def late_text(late: dict[str, float]) -> str:
    return (
        f"p50 {late['p50']:.2f} ms, p95 {late['p95']:.2f} ms, p99 {late['p99']:.2f} ms, "
        f"max {late['max']:.2f} ms"
    )


def measure(args: argparse.Namespace, sessions: int) -> dict[str, Any]:
    """One load run of ``sessions`` sessions; its summary."""
    with tempfile.TemporaryDirectory() as folder:
        scenario = pages_scenario(folder, args.pages)
        config = LoadConfig(
            command="generate",
            args=["-y"],
            sessions=sessions,
            scenario=scenario,
            speed=args.speed,
            ramp=args.ramp,
            workers=args.workers,
        )
        return run(config)


def passes(summary: dict[str, Any], sessions: int) -> bool:
    """Every session live at once, none failed, p99 within the target."""
    return bool(
        summary["peak_live"] >= sessions
        and summary["errors"] == 0
        and summary["lateness_ms"]["p99"] <= TARGET_P99_MS
    )


def search(args: argparse.Namespace) -> None:
    """The most sessions that pass (:func:`passes`) twice in a row, by bisection between
    ``--search``'s lower bound and ``--sessions``, to within 5 %. A count that passes
    once by luck is run again; it is kept only if it passes again."""

    def holds(sessions: int) -> bool:
        runs: list[float] = []
        ok = True
        while ok and len(runs) < 2:
            summary = measure(args, sessions)
            runs.append(summary["lateness_ms"]["p99"])
            ok = passes(summary, sessions)
        shown = ", ".join(f"{p99:.1f}" for p99 in runs)
        print(f"{sessions:,} sessions: p99 {shown} ms: {'passes' if ok else 'fails'}", flush=True)
        return ok

    low, high = args.search, args.sessions
    if not holds(low):
        print(f"not even {low:,} sessions pass: lower --search")
        return
    if not holds(high):
        while high - low > max(1, low // 20):
            middle = (low + high) // 2
            if holds(middle):
                low = middle
            else:
                high = middle
        high = low
    workers = args.workers or os.cpu_count() or 1
    print(
        f"capacity: {high:,} sessions on {workers} worker(s) at p99 <= {TARGET_P99_MS:g} ms, "
        f"all live at once ({args.pages} pages, speed {args.speed:g}, ramp {args.ramp:g} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument(
        "--ramp", type=float, default=0.0, help="start them evenly over this many seconds"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="worker processes (default: one per core)"
    )
    parser.add_argument("--json", metavar="FILE", help="write the full load summary")
    parser.add_argument(
        "--search",
        type=int,
        metavar="LOW",
        help="find the most sessions, between LOW and --sessions, that meet the target",
    )
    args = parser.parse_args()
    if args.search is not None:
        search(args)
        return
    summary = measure(args, args.sessions)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    workers = summary.get("workers", 1)
    late = summary["lateness_ms"]
    pauses = summary["gc"]
    busy = summary["cpu_s"] / summary["seconds"]  # the loops' CPU time, all workers
    print(
        f"{args.sessions:,} concurrent generate -y sessions, {args.pages} pages, "
        f"speed {args.speed:g}, {workers} worker(s), "
        + (f"scheduled over {args.ramp:g} s" if args.ramp else "all scheduled at once")
    )
    print(
        f"run:      {summary['seconds']:.2f} s wall, {summary['events']:,} events = "
        f"{summary['events_per_s']:,.0f} events/s, CPU {busy:.2f} cores "
        f"of {os.cpu_count()} in the loops; completed {summary['completed']:,}, "
        f"errors {summary['errors']}"
    )
    print(
        f"live:     at most {summary['peak_live']:,} of {args.sessions:,} at once; "
        f"{summary['hub_wakeups']:,} hub wake-ups for {late['timer_events']:,} timer events"
    )
    print(
        f"lateness: {late_text(late)} from the schedule ({late['starts']:,} starts, "
        f"{late['timer_events']:,} timer events)"
    )
    print(
        f"gc:       {pauses['collections']} collections (gen 0/1/2), max pause "
        f"{pauses['max_pause_ms']:.1f} ms, total {pauses['total_pause_ms']:.0f} ms"
    )
    kb = summary["rss_per_session_kb"]
    memory = (
        "not measured"
        if kb is None
        else f"{kb:.1f} KB per live session ({summary['rss_peak_live']:,} live at the RSS peak)"
    )
    peak = summary["peak_rss_mb"]
    print(f"memory:   peak RSS {peak if peak is not None else '?'} MB in all, {memory}")
    for part in summary.get("parts", []):
        part_kb = part["rss_per_session_kb"]
        print(
            f"{part['name']}: {part['sessions']:,} sessions, errors {part['errors']}, "
            f"{part['events_per_s']:,.0f} events/s, {late_text(part['lateness_ms'])}, "
            f"{part['peak_live']:,} live at most, "
            + ("memory not measured" if part_kb is None else f"{part_kb:.1f} KB per live session")
        )
    if summary["peak_live"] < args.sessions:
        print(f"concurrency: MISSED, {summary['peak_live']:,} < {args.sessions:,} live at once")
    print(f"p99 lateness <= {TARGET_P99_MS:g} ms: {verdict(late['p99'], TARGET_P99_MS)}")
    print(f"KB per live session <= {TARGET_KB:g}: {verdict(kb, TARGET_KB)}")
    for message in summary["error_messages"]:
        print(f"error: {message}")


if __name__ == "__main__":
    main()
