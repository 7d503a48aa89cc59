"""Plots of a load test: throughput and lateness over time, as SVG.

Owns: :func:`write_plot`, which draws the time series of a load summary
(:mod:`simulator.tools.load`) as two stacked line charts (events per second, and the p99
lateness in milliseconds, per half second), each with its title and a y axis from 0.

One renderer, the SVG written here by hand, and no PNG: it needs no dependency (a
plotting library is tens of megabytes for two polylines), its output is the same bytes
for the same summary, and tests read it back as XML and check the coordinates. A PNG
is one conversion away (``rsvg-convert``, a browser, any image tool).

    python -m simulator.tools.plot SUMMARY.json OUT.svg

Must not: run anything; it reads a summary dict.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from simulator.errors import ConfigurationError

WIDTH, CHART_HEIGHT = 820, 250
LEFT, RIGHT, TOP, BOTTOM = 80, 30, 50, 50


class PlotError(ConfigurationError):
    """A plot that cannot be written: a file name that is not ``.svg``."""


def check_plot_path(path: str) -> None:
    """Raise :class:`PlotError` unless ``path`` ends in ``.svg``."""
    if os.path.splitext(path)[1].lower() != ".svg":
        raise PlotError(f"{path}: a plot is .svg (convert it for another format)")


def write_plot(summary: dict[str, Any], path: str) -> None:
    """Draw ``summary["series"]`` to ``path`` (.svg)."""
    check_plot_path(path)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_svg(summary))


def _title(summary: dict[str, Any]) -> str:
    args = " ".join([summary.get("command", "?"), *summary.get("args", [])])
    mode = summary.get("mode", "")
    return (
        f"zread-sim load: {args}, {summary.get('sessions', 0)} sessions "
        f"({summary.get('concurrency')} at once, {mode}), scenario "
        f"{summary.get('scenario', '')}, speed {summary.get('speed', 1):g}"
    )


def _series(summary: dict[str, Any]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    throughput, lateness = [], []
    for point in summary.get("series", []):
        throughput.append((float(point["t"]), float(point["events_per_s"])))
        if point.get("p99_ms") is not None:
            lateness.append((float(point["t"]), float(point["p99_ms"])))
    return throughput, lateness


def _ticks(top: float) -> list[float]:
    """Round tick values from 0 to at least ``top`` (steps of 1, 2 or 5 times 10^k)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def _label(value: float) -> str:
    if value >= 1_000:
        return f"{value / 1000:g}k"
    return f"{value:g}" if value == int(value) else f"{value:.3g}"


def _chart(
    name: str,
    title: str,
    points: list[tuple[float, float]],
    x_max: float,
    top: int,
    colour: str,
    empty: str,
) -> list[str]:
    height = CHART_HEIGHT
    x0, x1 = LEFT, WIDTH - RIGHT
    y0, y1 = top + height, top
    y_ticks = _ticks(max((v for _, v in points), default=0.0))
    y_max = y_ticks[-1]
    x_ticks = _ticks(x_max)
    x_span = x_ticks[-1]

    def sx(t: float) -> float:
        return x0 + (x1 - x0) * t / x_span

    def sy(v: float) -> float:
        return y0 - (y0 - y1) * v / y_max

    out = [f'<g class="chart" id="{name}">']
    out.append(
        f'<text x="{x0}" y="{top - 12}" font-size="14" font-weight="bold">{escape(title)}</text>'
    )
    for value in y_ticks:
        y = sy(value)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
            f"{_label(value)}</text>"
        )
    for value in x_ticks:
        x = sx(value)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 5}" stroke="#333"/>')
        out.append(
            f'<text x="{x:.1f}" y="{y0 + 18}" font-size="11" text-anchor="middle">'
            f"{_label(value)}</text>"
        )
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>')
    out.append(
        f'<text x="{(x0 + x1) / 2}" y="{y0 + 36}" font-size="12" text-anchor="middle">'
        "time (s)</text>"
    )
    coords = " ".join(f"{sx(t):.1f},{sy(v):.1f}" for t, v in points)
    out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>')
    if not points:
        out.append(
            f'<text x="{(x0 + x1) / 2}" y="{(y0 + y1) / 2}" font-size="13" '
            f'text-anchor="middle" fill="#888">{escape(empty)}</text>'
        )
    out.append("</g>")
    return out


def render_svg(summary: dict[str, Any]) -> str:
    """The SVG document: events/s above, p99 lateness (ms) below, on one time axis."""
    throughput, lateness = _series(summary)
    x_max = max((t for t, _ in throughput), default=0.0)
    height = 2 * (CHART_HEIGHT + TOP + BOTTOM) + 20
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="22" font-size="14" text-anchor="middle">'
        f"{escape(_title(summary))}</text>",
    ]
    parts += _chart(
        "throughput",
        "events per second",
        throughput,
        x_max,
        TOP + 20,
        "#1f77b4",
        "no events",
    )
    no_lateness = (
        "lateness is not measured in process mode"
        if summary.get("mode") == "process"
        else "no timer events"
    )
    parts += _chart(
        "lateness",
        "p99 lateness (ms), from each session's schedule",
        lateness,
        x_max,
        2 * TOP + CHART_HEIGHT + BOTTOM + 20,
        "#d62728",
        no_lateness,
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulator.tools.plot SUMMARY.json OUT.svg``; the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        sys.stderr.write("usage: python -m simulator.tools.plot SUMMARY.json OUT.svg\n")
        return 2
    try:
        with open(args[0], encoding="utf-8") as f:
            summary = json.load(f)
        write_plot(summary, args[1])
    except (OSError, ValueError, KeyError, PlotError) as error:
        sys.stderr.write(f"zread-sim plot: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
