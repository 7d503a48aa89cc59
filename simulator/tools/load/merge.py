"""One summary from several: the workers of one run, or the runs of several hosts.

Owns: :func:`merge` (summaries as ``load --json`` writes them to one summary of the
same shape, with a row per part), :func:`read_summary` (a ``--json`` file, checked: a
file that is no load summary is a :class:`~simulator.tools.load.common.LoadError` of
one line), :func:`part_row` and :func:`name_of` (a part's row and its name).

How each figure merges: counts (sessions, outcomes, events, bytes, timer events, hub
wake-ups, collections) are summed; maxima (lateness, collector pause, seconds) are the
max; the lateness histograms are added bucket by bucket, which is exact because their
buckets are fixed (:class:`~simulator.tools.load.stats.Histogram`), and the percentiles
are taken from the sum. The time series are added point by point on the :data:`TICK`
grid (each point's lateness buckets too, so its p99 is exact), which assumes the parts
ran at the same time: workers share an origin; hosts should be started together. The
sessions live at once at most are the highest sum of the parts' live counts at one
point of that grid (never less than one part's own peak; ``peak_live_sum``, the sum of
the parts' own peaks, bounds it from above); memory per session is the
RSS all parts added over the sessions live at each part's highest RSS sample.

Must not: run anything or print; it reads and returns dicts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import msgspec

from simulator.tools.load.common import LoadError
from simulator.tools.load.stats import (
    MAX_MESSAGES,
    TICK,
    Histogram,
    HistogramData,
    bins_percentile_ms,
    lateness_figures,
)


class _Summary(msgspec.Struct):
    """What :func:`merge` reads of a summary; other keys are let through unread."""

    command: str
    args: list[str]
    mode: str
    scenario: str
    speed: float
    sessions: int
    completed: int
    interrupted: int
    errors: int
    error_messages: list[str]
    events: int
    bytes: int
    seconds: float
    series: list[dict[str, Any]]
    per_session: list[dict[str, Any]]
    lateness_ms: dict[str, Any] | None = None
    lateness_histogram: HistogramData | None = None
    concurrency: int | None = None
    peak_live: int | None = None


def read_summary(path: str) -> dict[str, Any]:
    """The summary ``load --json`` wrote to ``path``; LoadError (one line) if it is not."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise LoadError(f"{path}: {error.strerror or error}") from None
    try:
        summary = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise LoadError(f"{path}: not JSON ({error})") from None
    if not isinstance(summary, dict):
        raise LoadError(f"{path}: not a load summary (load --json writes a JSON object)")
    try:
        msgspec.convert(summary, _Summary)
    except msgspec.ValidationError as error:
        raise LoadError(f"{path}: not a load summary: {error}") from None
    if summary.get("lateness_ms") is not None and summary.get("lateness_histogram") is None:
        raise LoadError(f"{path}: has lateness figures but no lateness_histogram to merge")
    if summary.get("lateness_histogram") is not None:
        try:
            Histogram.from_json(summary["lateness_histogram"])
        except ValueError as error:
            raise LoadError(f"{path}: {error}") from None
    return summary


def part_row(name: str, summary: dict[str, Any]) -> dict[str, Any]:
    """One part's figures, as the merged summary lists them."""
    return {
        "name": name,
        "host": summary.get("host"),
        "sessions": summary["sessions"],
        "completed": summary["completed"],
        "interrupted": summary["interrupted"],
        "errors": summary["errors"],
        "events": summary["events"],
        "events_per_s": summary.get("events_per_s"),
        "seconds": summary["seconds"],
        "cpu_s": summary.get("cpu_s"),
        "lateness_ms": summary.get("lateness_ms"),
        "peak_live": summary.get("peak_live"),
        "rss_per_session_kb": summary.get("rss_per_session_kb"),
        "rss_peak_live": summary.get("rss_peak_live"),
    }


def _sum(parts: Sequence[dict[str, Any]], key: str) -> Any:
    values = [part.get(key) for part in parts]
    if all(value is None for value in values):
        return None
    return sum(value or 0 for value in values)


_SHARED = ("host", "command", "args", "scenario", "seed", "speed", "duration", "ramp")
"""What the parts of one run have in common: taken from the first part."""


def merge(parts: Sequence[dict[str, Any]], names: Sequence[str], kind: str) -> dict[str, Any]:
    """One summary of ``parts`` (named ``names``; ``kind`` is "workers" or "hosts")."""
    if not parts:
        raise LoadError("nothing to merge")
    merged: dict[str, Any] = {key: parts[0].get(key) for key in _SHARED}
    merged["mode"] = _mode(parts)
    for key in ("concurrency", "sessions", "completed", "interrupted", "errors"):
        merged[key] = _sum(parts, key)
    merged["error_messages"] = _messages(parts, names, kind)
    merged.update(_throughput(parts))
    merged.update(_lateness(parts))
    merged["series"] = _series([part["series"] for part in parts])
    merged.update(_peak_live(parts, merged["series"]))
    merged.update(_memory(parts))
    merged["gc"] = _gc(parts)
    merged["hub_wakeups"] = _sum(parts, "hub_wakeups")
    merged["cpu_s"] = _sum(parts, "cpu_s")
    merged["per_session"] = _sessions(parts, names, kind)
    merged["merged"] = kind
    merged["parts"] = [part_row(n, p) for n, p in zip(names, parts, strict=True)]
    return merged


def _mode(parts: Sequence[dict[str, Any]]) -> str:
    """The parts' mode if they share one, else "mixed"."""
    modes = {part["mode"] for part in parts}
    return modes.pop() if len(modes) == 1 else "mixed"


def _messages(parts: Sequence[dict[str, Any]], names: Sequence[str], kind: str) -> list[str]:
    """The first error messages of all parts; a host's say which host."""
    messages: list[str] = []
    for name, part in zip(names, parts, strict=True):
        prefix = f"{name}: " if kind == "hosts" else ""
        messages += [prefix + message for message in part["error_messages"]]
    return messages[:MAX_MESSAGES]


def _throughput(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Events and bytes summed, over the longest part's seconds."""
    events = _sum(parts, "events")
    seconds = max(part["seconds"] for part in parts)
    return {
        "events": events,
        "bytes": _sum(parts, "bytes"),
        "seconds": seconds,
        "events_per_s": round(events / max(seconds, 1e-9), 1),
    }


def _peak_live(parts: Sequence[dict[str, Any]], series: list[dict[str, Any]]) -> dict[str, Any]:
    """The most sessions live at once (see the module docstring), and its upper bound."""
    peaks = [part.get("peak_live") for part in parts]
    live_at_once = max((point["live"] for point in series), default=0)
    most = None if all(p is None for p in peaks) else max(live_at_once, *(p or 0 for p in peaks))
    return {"peak_live": most, "peak_live_sum": _sum(parts, "peak_live")}


def _sessions(
    parts: Sequence[dict[str, Any]], names: Sequence[str], kind: str
) -> list[dict[str, Any]]:
    """Every part's sessions, each tagged with its worker (in index order) or host."""
    sessions: list[dict[str, Any]] = []
    label = "worker" if kind == "workers" else "host"
    for index, (name, part) in enumerate(zip(names, parts, strict=True)):
        tag: Any = part.get("worker", index) if kind == "workers" else name
        sessions += [{**session, label: tag} for session in part["per_session"]]
    if kind == "workers":
        sessions.sort(key=lambda session: session.get("index", 0))
    return sessions


def _lateness(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    histograms = [p["lateness_histogram"] for p in parts if p.get("lateness_histogram")]
    if not histograms:
        return {"lateness_ms": None, "lateness_histogram": None}
    total = Histogram()
    for data in histograms:
        total.merge(Histogram.from_json(data))
    figures = [p["lateness_ms"] for p in parts if p.get("lateness_ms")]
    timers = sum(f.get("timer_events", 0) for f in figures)
    starts = sum(f.get("starts", 0) for f in figures)
    return {
        "lateness_ms": lateness_figures(total, timers, starts),
        "lateness_histogram": total.to_json(),
    }


def _memory(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    peak, before = _sum(parts, "peak_rss_mb"), _sum(parts, "rss_before_mb")
    memory: dict[str, Any] = {
        "peak_rss_mb": None if peak is None else round(peak, 1),
        "rss_before_mb": None if before is None else round(before, 1),
    }
    memory.update(_added_per_live_session(parts))
    if all(p.get("mode") == "process" for p in parts):
        memory["rss_per_session_kb"] = max(
            (p["rss_per_session_kb"] for p in parts if p.get("rss_per_session_kb")), default=None
        )
        memory["rss_per_process_mb"] = _process_rss(parts)
    return memory


def _added_per_live_session(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The RSS all parts added over the sessions live at their peaks; None unless every
    part measured both (and some session was live)."""
    added = [p.get("rss_added_kb") for p in parts]
    live = [p.get("rss_peak_live") for p in parts]
    if None in added or None in live or not sum(live):  # type: ignore[arg-type]
        return {"rss_added_kb": None, "rss_peak_live": None, "rss_per_session_kb": None}
    total_added, total_live = sum(added), sum(live)  # type: ignore[arg-type]
    return {
        "rss_added_kb": total_added,
        "rss_peak_live": total_live,
        "rss_per_session_kb": round(total_added / total_live, 2),
    }


def _process_rss(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    rows = [p["rss_per_process_mb"] for p in parts if p.get("rss_per_process_mb")]
    if not rows:
        return None
    return {
        "min": min(r["min"] for r in rows),
        "median": max(r["median"] for r in rows),  # the parts' medians: the highest of them
        "max": max(r["max"] for r in rows),
        "sampled": sum(r["sampled"] for r in rows),
    }


def _gc(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    pauses = [p["gc"] for p in parts if p.get("gc")]
    if not pauses:
        return None
    return {
        "collections": [sum(g["collections"][i] for g in pauses) for i in range(3)],
        "max_pause_ms": max(g["max_pause_ms"] for g in pauses),
        "total_pause_ms": round(sum(g["total_pause_ms"] for g in pauses), 3),
    }


def _slots(series: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """One part's series, one point per slot of the :data:`TICK` grid (a point in slot k
    has k * TICK <= t < (k + 1) * TICK): two points in one slot (the last tick and the
    end of the run) become one, with the counts of both and the later live count."""
    slots: dict[int, dict[str, Any]] = {}
    for point in series:
        slot = int(point["t"] / TICK + 1e-9)
        earlier = slots.get(slot)
        if earlier is None:
            slots[slot] = point
            continue
        events = earlier["events"] + point["events"]
        bins: dict[int, int] = {}
        for index, count in [*earlier.get("late_bins", []), *point.get("late_bins", [])]:
            bins[index] = bins.get(index, 0) + count
        slots[slot] = {
            **point,
            "events": events,
            "events_per_s": round(events / TICK, 1),
            "sessions_done": earlier["sessions_done"] + point["sessions_done"],
            "late_bins": [list(item) for item in sorted(bins.items())],
        }
    return slots


def _series(serieses: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The parts' time series added point by point on the :data:`TICK` grid."""
    grid: dict[int, dict[str, Any]] = {}
    done_totals: list[dict[int, int]] = []  # per part: slot -> its done_total there
    for series in serieses:
        totals: dict[int, int] = {}
        for slot, point in sorted(_slots(series).items()):
            _add_point(grid.setdefault(slot, _empty_slot()), point)
            totals[slot] = point["done_total"]
        done_totals.append(totals)
    out: list[dict[str, Any]] = []
    carried = [0] * len(done_totals)  # a part that ended earlier keeps its last total
    for slot in sorted(grid):
        for part, totals in enumerate(done_totals):
            carried[part] = totals.get(slot, carried[part])
        out.append(_merged_point(grid[slot], done_total=sum(carried)))
    return out


def _empty_slot() -> dict[str, Any]:
    """A slot of the merged grid before any part's point is added to it."""
    return {
        "t": 0.0,
        "events": 0,
        "events_per_s": 0.0,
        "sessions_done": 0,
        "live": 0,
        "bins": {},
        "p99s": [],
        "exact": True,
    }


def _add_point(merged: dict[str, Any], point: dict[str, Any]) -> None:
    """Add one part's ``point`` to its slot: counts summed, lateness buckets added (a
    point without buckets leaves only its p99, and the slot's p99 inexact)."""
    merged["t"] = max(merged["t"], point["t"])
    for key in ("events", "events_per_s", "sessions_done", "live"):
        merged[key] += point[key]
    if "late_bins" in point:
        for index, count in point["late_bins"]:
            merged["bins"][index] = merged["bins"].get(index, 0) + count
    else:
        merged["exact"] = False
        merged["p99s"].append(point.get("p99_ms"))


def _merged_point(merged: dict[str, Any], done_total: int) -> dict[str, Any]:
    """A slot of the grid as a point of the merged series."""
    bins = sorted(merged["bins"].items())
    total = sum(count for _, count in bins)
    p99 = bins_percentile_ms(bins, total, 99) if total else None
    if not merged["exact"]:  # a summary without buckets per point: its p99, at most
        p99 = max((v for v in [p99, *merged["p99s"]] if v is not None), default=None)
    return {
        "t": merged["t"],
        "events": merged["events"],
        "events_per_s": round(merged["events_per_s"], 1),
        "sessions_done": merged["sessions_done"],
        "done_total": done_total,
        "live": merged["live"],
        "p99_ms": p99,
        "late_bins": [list(item) for item in bins],
    }


def name_of(path: str, summary: dict[str, Any], taken: set[str]) -> str:
    """A part's name for its row: its host, else its file; unique among ``taken``."""
    name = summary.get("host") or os.path.basename(path)
    if name in taken:
        name = f"{name} ({os.path.basename(path)})"
    while name in taken:
        name = f"{name}'"
    taken.add(name)
    return name
