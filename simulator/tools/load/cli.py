"""The command line of the load test, and its entry points.

Owns: :func:`run` (a :class:`~simulator.tools.load.common.LoadConfig` to a summary, through
the runner its mode names: one loop here, or K workers,
:mod:`simulator.tools.load.workers`), :func:`main` (``python -m simulator load ...``: argv
to an exit code; 0, 1 when a session failed, 2 for a bad argument, one line on stderr),
``load --merge FILE ...`` (summaries of several hosts as one,
:mod:`simulator.tools.load.merge`), the arguments (:func:`parse_args`), the summary as a
table (:func:`format_summary`), and writing the JSON (``--json``) and plot (``--plot``,
:mod:`simulator.tools.plot`). The progress bar is
:class:`~simulator.tools.load.progress.ProgressBar`'s.

Must not: measure (:mod:`simulator.tools.load.stats`) or drive sessions (the runners).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from simulator.errors import SimulatorBug
from simulator.launch import integer, number
from simulator.tools.arguments import raising
from simulator.tools.load.common import LoadConfig, LoadError

if TYPE_CHECKING:
    from simulator.tools.load.progress import ProgressBar
    from simulator.tools.load.stats import Stats


PROG = "zread-sim load"


MAX_COUNT = 100_000_000
"""The most sessions (or workers) a load run takes: past any machine, and an index
every part of the run can hold."""


def _positive_int(text: str) -> int:
    digits = text.strip().removeprefix("+")
    fits = digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) <= 9
    if not fits or not 1 <= int(digits) <= MAX_COUNT:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 1 to {MAX_COUNT:,}, got {text[:40]!r}"
        )
    return int(digits)


def _parser() -> argparse.ArgumentParser:
    parser = raising(LoadError)(
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
        type=number(0, True),
        metavar="SECONDS",
        help="stop after this long: start no more, quit what runs",
    )
    parser.add_argument("--scenario", default="default", metavar="NAME|PATH")
    parser.add_argument("--seed", type=integer, default=0, help="session i gets seed + i")
    parser.add_argument("--speed", type=number(0, False), default=1.0)
    parser.add_argument("--mode", choices=("inprocess", "process"), default="inprocess")
    parser.add_argument(
        "--timeout",
        type=number(0, True),
        default=600.0,
        metavar="SECONDS",
        help="a session without done:true by then is an error (default: 600)",
    )
    parser.add_argument(
        "--ramp",
        type=number(0, False),
        default=0.0,
        metavar="SECONDS",
        help="in-process: start the first C sessions evenly over SECONDS (default: at once); "
        "lateness counts from each session's scheduled start",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        metavar="K",
        help="in-process: K event loops in K processes, session i in worker i %% K "
        f"(default: one per core, {os.cpu_count() or 1} here)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the summary as JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw throughput and lateness (.svg)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="always show it")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    return parser


def parse_args(argv: Sequence[str]) -> tuple[LoadConfig, str | None, str | None]:
    """(the config, the JSON path, the plot path); LoadError says what is wrong."""
    from simulator.launch import parse_flags

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
    _check_output(args.json)
    _check_output(args.plot, plot=True)
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
        ramp=args.ramp,
        workers=args.workers,
    )
    return config, args.json, args.plot


def _check_output(path: str | None, plot: bool = False) -> None:
    from simulator.tools.plot import PlotError, check_plot_path

    if path is None:
        return
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise LoadError(f"{path}: no such directory")
    if os.path.isdir(path):
        raise LoadError(f"{path}: is a directory, not a file")
    if plot:
        try:
            check_plot_path(path)
        except PlotError as error:
            raise LoadError(str(error)) from None


def run(config: LoadConfig, progress: ProgressBar | None = None) -> dict[str, Any]:
    """Run the load test ``config`` describes; the summary (LoadError if unusable)."""
    from simulator.errors import ConfigurationError
    from simulator.launch import FlagError, build_session
    from simulator.scenario import load_scenario

    try:
        scenario = load_scenario(config.scenario)
        build_session(config.command, config.args, scenario=scenario)  # usable at all?
    except (ConfigurationError, FlagError) as error:
        raise LoadError(str(error)) from None
    if config.concurrency is None:
        config.concurrency = config.sessions
    draw: Callable[[Stats, dict[str, Any]], None] | None = None
    if progress is not None:
        bar = progress

        def draw(stats: Stats, point: dict[str, Any]) -> None:
            bar.show(stats.finished, point)

    path = os.path.abspath(config.scenario)
    scenario_arg = path if os.path.isfile(path) else config.scenario  # from any folder
    if config.mode == "process":
        from simulator.tools.load.processes import Processes

        return asyncio.run(Processes(config, scenario_arg, draw).run())
    workers = config.worker_count()
    if workers > 1:
        from simulator.tools.load.workers import Workers

        shown = None if progress is None else progress.show
        each = dataclasses.replace(config, scenario=scenario_arg)
        summary = asyncio.run(Workers(each, workers, shown).run())
        summary["scenario"] = config.scenario
        return summary
    from simulator.tools.load.inprocess import InProcess

    summary = asyncio.run(InProcess(config, scenario, draw).run())
    summary["workers"] = 1
    return summary


def _merge_main(argv: list[str]) -> tuple[dict[str, Any], str | None, str | None]:
    """``load --merge FILE ... [--json FILE] [--plot FILE]``: the merged summary."""
    from simulator.tools.load.merge import merge, name_of, read_summary

    parser = raising(LoadError)(
        prog=f"{PROG} --merge",
        description="Merge the summaries `load --json` wrote on several hosts into one.",
    )
    parser.add_argument("--merge", nargs="+", required=True, metavar="FILE")
    parser.add_argument("--json", metavar="FILE", help="write the merged summary as JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw throughput and lateness (.svg)")
    args = parser.parse_args(argv)
    _check_output(args.json)
    _check_output(args.plot, plot=True)
    parts = [read_summary(path) for path in args.merge]
    taken: set[str] = set()
    names = [name_of(path, part, taken) for path, part in zip(args.merge, parts, strict=True)]
    return merge(parts, names, "hosts"), args.json, args.plot


def _load_main(argv: list[str]) -> tuple[dict[str, Any], str | None, str | None]:
    """``load COMMAND ...``: the summary of the run, with its progress bar if asked for."""
    from simulator.tools.load.progress import ProgressBar

    config, json_path, plot_path = parse_args(argv)
    if not config.progress:
        return run(config), json_path, plot_path
    bar = ProgressBar(sys.stderr, sessions=config.sessions, duration=config.duration, enabled=True)
    try:
        summary = run(config, bar)
        if summary["series"]:  # where the run ended
            done = summary["completed"] + summary["interrupted"] + summary["errors"]
            bar.update_to(done, summary["series"][-1])
    finally:
        bar.close()
    return summary, json_path, plot_path


def _merging(argv: list[str]) -> bool:
    """Whether ``argv`` asks for ``--merge`` (before any ``--``: zread's flags)."""
    return "--merge" in argv[: argv.index("--") if "--" in argv else len(argv)]


def _write_files(summary: dict[str, Any], json_path: str | None, plot_path: str | None) -> None:
    """Write the summary as JSON and its plot, where asked (OSError, PlotError if not)."""
    from simulator.tools.plot import write_plot

    if json_path is not None:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    if plot_path is not None:
        write_plot(summary, plot_path)


def _failed(error: Exception, code: int) -> int:
    """Say ``error`` in one line on stderr; ``code``."""
    sys.stderr.write(f"{PROG}: {error}\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulator load ...``; returns the exit code (2: a bad argument)."""
    from simulator.tools.plot import PlotError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["load"]:
        argv = argv[1:]
    try:
        summary, json_path, plot_path = (_merge_main if _merging(argv) else _load_main)(argv)
    except LoadError as error:
        return _failed(error, 2)
    except SimulatorBug as error:  # a worker that died: its own last words are in it
        return _failed(error, error.exit_code)
    except SystemExit as exit:  # --help
        return int(exit.code or 0)
    sys.stdout.write(format_summary(summary))
    try:
        _write_files(summary, json_path, plot_path)
    except (OSError, PlotError) as error:
        return _failed(error, 2)
    return 1 if summary["errors"] else 0


def _late(late: dict[str, Any] | None) -> str:
    if late is None:
        return "not measured"
    return (
        f"p50 {late['p50']:.2f} ms  p95 {late['p95']:.2f} ms  p99 {late['p99']:.2f} ms  "
        f"max {late['max']:.2f} ms"
    )


def _per_session(summary: dict[str, Any]) -> str:
    kb = summary.get("rss_per_session_kb")
    if kb is None:
        return "memory per session not measured"
    return f"{kb:.1f} KB per live session ({summary.get('rss_peak_live'):,} live at the RSS peak)"


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a readable table."""
    rows = [
        ("run", _run_row(summary)),
        ("sessions", _sessions_row(summary)),
        ("events", _events_row(summary)),
        ("lateness", _lateness_row(summary)),
        ("memory", _memory_row(summary)),
        *((part["name"], _part_row(part)) for part in summary.get("parts") or []),
        *(("error", message) for message in summary["error_messages"]),
    ]
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name:<{width}}  {text}\n" for name, text in rows)


_MODES = {"inprocess": "in-process", "process": "processes"}
"""How the table names a mode; any other is "mixed" (parts of both merged)."""


def _run_row(summary: dict[str, Any]) -> str:
    args = " ".join([summary["command"], *summary["args"]])
    mode = _MODES.get(summary["mode"], "mixed")
    if summary.get("merged") == "hosts":
        mode += f", {len(summary.get('parts') or [])} hosts merged"
    elif summary.get("workers", 1) > 1:
        mode += f", {summary['workers']} workers"
    return f"{args}, scenario {summary['scenario']}, speed {summary['speed']:g}, {mode}"


def _sessions_row(summary: dict[str, Any]) -> str:
    return (
        f"{summary['sessions']} (completed {summary['completed']}, interrupted "
        f"{summary['interrupted']}, errors {summary['errors']}), "
        f"concurrency {summary['concurrency']}"
    )


def _events_row(summary: dict[str, Any]) -> str:
    return (
        f"{summary['events']:,} in {summary['seconds']:.2f} s = "
        f"{summary['events_per_s']:,.0f} events/s ({summary['bytes'] / 1e6:,.1f} MB)"
    )


def _lateness_row(summary: dict[str, Any]) -> str:
    late = summary["lateness_ms"]
    if late is None:
        where = " in process mode" if summary["mode"] == "process" else ""
        return f"not measured{where}"
    counted = f"{late['timer_events']:,} timer events"
    if late.get("starts"):
        counted += f", {late['starts']:,} starts against their schedule"
    return f"{_late(late)} ({counted})"


def _memory_row(summary: dict[str, Any]) -> str:
    if summary["mode"] == "process":
        each = summary.get("rss_per_process_mb")
        if each is None:
            return "no sample"
        return (
            f"RSS per process median {each['median']:.1f} MB, max {each['max']:.1f} MB "
            f"({each['sampled']} sampled)"
        )
    peak = summary.get("peak_rss_mb")
    rss = "peak RSS not measured" if peak is None else f"peak RSS {peak:.1f} MB"
    most = f"{summary.get('peak_live') or 0:,} live at once at most"
    bound = summary.get("peak_live_sum")
    if bound is not None and bound != summary.get("peak_live"):
        most += f" (sampled each tick; the parts' own peaks add up to {bound:,})"
    return f"{rss}, {_per_session(summary)}; {most}"


def _part_row(part: dict[str, Any]) -> str:
    kb = part.get("rss_per_session_kb")
    memory = "" if kb is None else f", {kb:.1f} KB per live session"
    return (
        f"{part['sessions']} sessions (errors {part['errors']}), "
        f"{part.get('events_per_s') or 0:,.0f} events/s, "
        f"lateness {_late(part.get('lateness_ms'))}, "
        f"{part.get('peak_live') or 0:,} live at most{memory}"
    )
