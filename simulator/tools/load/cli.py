"""The command line of the load test, and its entry points.

Owns: :func:`run` (a :class:`~simulator.tools.load.common.LoadConfig` to a summary, through
the runner its mode names), :func:`main` (``python -m simulator load ...``: argv to an
exit code; 0, 1 when a session failed, 2 for a bad argument, one line on stderr), the
arguments (:func:`parse_args`), the progress line on stderr, the summary as a table
(:func:`format_summary`), and writing the JSON (``--json``) and plot (``--plot``,
:mod:`simulator.tools.plot`).

Must not: measure (:mod:`simulator.tools.load.stats`) or drive sessions (the runners).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import IO, Any, NoReturn

from simulator.tools.load.common import LoadConfig, LoadError
from simulator.tools.load.inprocess import InProcess
from simulator.tools.load.processes import Processes
from simulator.tools.load.stats import Stats

__all__ = ["PROG", "format_summary", "main", "parse_args", "run"]

PROG = "zread-sim load"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise LoadError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _number(minimum: float, strict: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            sign = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"expected a number {sign} {minimum:g}, got {text!r}")
        return value

    return parse


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Run many simulated zread sessions and measure them. zread's own flags "
        "go after -- (or one by one with --arg=FLAG).",
    )
    parser.add_argument("command", help="the zread command (generate, login, ...)")
    parser.add_argument("--arg", action="append", default=[], metavar="FLAG", help="a zread flag")
    parser.add_argument("--sessions", type=_positive_int, help="how many sessions in all")
    parser.add_argument(
        "--concurrency", type=_positive_int, help="sessions at once (default: --sessions)"
    )
    parser.add_argument(
        "--duration",
        type=_number(0, True),
        metavar="SECONDS",
        help="stop after this long: start no more, quit what runs",
    )
    parser.add_argument("--scenario", default="default", metavar="NAME|PATH")
    parser.add_argument("--seed", type=int, default=0, help="session i gets seed + i")
    parser.add_argument("--speed", type=_number(0, False), default=1.0)
    parser.add_argument("--mode", choices=("inprocess", "process"), default="inprocess")
    parser.add_argument(
        "--timeout",
        type=_number(0, True),
        default=600.0,
        metavar="SECONDS",
        help="a session without done:true by then is an error (default: 600)",
    )
    parser.add_argument(
        "--prebuild",
        action="store_true",
        help="in-process with --sessions: create every session before the clock starts",
    )
    parser.add_argument(
        "--ramp",
        type=_number(0, False),
        default=0.0,
        metavar="SECONDS",
        help="in-process: start the first C sessions evenly over SECONDS (default: at once)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the summary as JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw throughput and lateness (.svg, .png)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="always show it")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[LoadConfig, str | None, str | None]:
    """(the config, the JSON path, the plot path); LoadError says what is wrong."""
    from simulator.launch import parse_flags
    from simulator.tools.plot import PlotError, check_plot_path

    argv = list(argv)
    zread_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, zread_args = argv[:cut], argv[cut + 1 :]
    # zread's own flags (-y, --skip-failed, ...) may stand among the load options.
    args, unknown = _parser().parse_known_args(argv)
    zread_args = [*args.arg, *unknown, *zread_args]
    try:
        parse_flags(args.command, zread_args)
    except ValueError as error:
        raise LoadError(f"{args.command}: {error}") from None
    if args.sessions is None and args.duration is None:
        raise LoadError("give --sessions N, --duration SECONDS, or both")
    if args.sessions is None and args.concurrency is None:
        raise LoadError("--duration without --sessions needs --concurrency")
    for path in (args.json, args.plot):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise LoadError(f"{path}: no such directory")
        if path is not None and os.path.isdir(path):
            raise LoadError(f"{path}: is a directory, not a file")
    if args.plot is not None:
        try:
            check_plot_path(args.plot)
        except PlotError as error:
            raise LoadError(str(error)) from None
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    config = LoadConfig(
        command=args.command,
        args=zread_args,
        sessions=args.sessions,
        concurrency=args.concurrency or args.sessions,
        duration=args.duration,
        scenario=args.scenario,
        seed=args.seed,
        speed=args.speed,
        mode=args.mode,
        timeout=args.timeout,
        progress=progress,
        prebuild=args.prebuild,
        ramp=args.ramp,
    )
    return config, args.json, args.plot


def _draw_progress(out: IO[str], stats: Stats, point: dict[str, Any]) -> None:
    """Redraw the one progress line (``--progress``)."""
    p99 = point["p99_ms"]
    late = f"  p99 {p99:.1f} ms" if p99 is not None else ""
    out.write(
        f"\r{stats.finished}/{stats.started} sessions done, {point['live']} live, "
        f"{point['events_per_s']:,.0f} events/s{late}   "
    )
    out.flush()


def run(config: LoadConfig, progress: IO[str] | None = None) -> dict[str, Any]:
    """Run the load test ``config`` describes; the summary (LoadError if unusable)."""
    from simulator.core.errors import ConfigurationError
    from simulator.launch import FlagError, build_session
    from simulator.scenario import load_scenario

    try:
        scenario = load_scenario(config.scenario)
        build_session(config.command, config.args, scenario=scenario)  # usable at all?
    except (ConfigurationError, FlagError) as error:
        raise LoadError(str(error)) from None
    draw = None if progress is None else partial(_draw_progress, progress)
    if config.concurrency is None:
        config.concurrency = config.sessions
    if config.mode == "process":
        path = os.path.abspath(config.scenario)
        scenario_arg = path if os.path.isfile(path) else config.scenario
        return asyncio.run(Processes(config, scenario_arg, draw).run())
    return asyncio.run(InProcess(config, scenario, draw).run())


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulator load ...``; returns the exit code (2: a bad argument)."""
    from simulator.tools.plot import PlotError, write_plot

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["load"]:
        argv = argv[1:]
    try:
        config, json_path, plot_path = parse_args(argv)
        summary = run(config, sys.stderr if config.progress else None)
    except LoadError as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    except SystemExit as exit:  # --help
        return int(exit.code or 0)
    if config.progress:
        sys.stderr.write("\n")
    sys.stdout.write(format_summary(summary))
    try:
        if json_path is not None:
            with open(json_path, "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
                f.write("\n")
        if plot_path is not None:
            write_plot(summary, plot_path)
    except (OSError, PlotError) as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    return 1 if summary["errors"] else 0


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a readable table."""
    args = " ".join([summary["command"], *summary["args"]])
    mode = "in-process" if summary["mode"] == "inprocess" else "processes"
    rows = [
        ("run", f"{args}, scenario {summary['scenario']}, speed {summary['speed']:g}, {mode}"),
        (
            "sessions",
            f"{summary['sessions']} (completed {summary['completed']}, interrupted "
            f"{summary['interrupted']}, errors {summary['errors']}), "
            f"concurrency {summary['concurrency']}",
        ),
        (
            "events",
            f"{summary['events']:,} in {summary['seconds']:.2f} s = "
            f"{summary['events_per_s']:,.0f} events/s ({summary['bytes'] / 1e6:,.1f} MB)",
        ),
    ]
    late = summary["lateness_ms"]
    if late is None:
        rows.append(("lateness", "not measured in process mode"))
    else:
        rows.append(
            (
                "lateness",
                f"p50 {late['p50']:.2f} ms  p95 {late['p95']:.2f} ms  p99 {late['p99']:.2f} ms  "
                f"max {late['max']:.2f} ms ({late['timer_events']:,} timer events)",
            )
        )
    if summary["mode"] == "inprocess":
        rows.append(
            (
                "memory",
                f"peak RSS {summary['peak_rss_mb']:.1f} MB, "
                f"{summary['rss_per_session_kb']:.1f} KB per session "
                f"({summary['peak_live']} live at most)",
            )
        )
    else:
        rss = summary["rss_per_process_mb"]
        text = (
            "no sample"
            if rss is None
            else (
                f"RSS per process median {rss['median']:.1f} MB, max {rss['max']:.1f} MB "
                f"({rss['sampled']} sampled)"
            )
        )
        rows.append(("memory", text))
    for message in summary["error_messages"]:
        rows.append(("error", message))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name:<{width}}  {text}\n" for name, text in rows)
