"""Tests for simulator.tools.plot: the SVG drawn by hand, the one renderer.

The SVG is parsed with xml.etree, as any consumer would; the polylines' coordinates
are checked against the series they draw.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from simulator.tools import load, plot

SVG = "{http://www.w3.org/2000/svg}"


def summary(mode: str = "inprocess") -> dict[str, Any]:
    series = [
        {"t": 0.5, "events_per_s": 1000.0, "p99_ms": 2.0},
        {"t": 1.0, "events_per_s": 4000.0, "p99_ms": 8.0},
        {"t": 1.5, "events_per_s": 3000.0, "p99_ms": None if mode == "process" else 40.0},
        {"t": 2.0, "events_per_s": 0.0, "p99_ms": None},
    ]
    if mode == "process":
        series = [{**point, "p99_ms": None} for point in series]
    return {
        "command": "generate",
        "args": ["-y"],
        "mode": mode,
        "sessions": 10,
        "concurrency": 10,
        "scenario": "default",
        "speed": 1.0,
        "series": series,
    }


def charts(document: str) -> dict[str, ET.Element]:
    root = ET.fromstring(document)
    assert root.tag == f"{SVG}svg"
    found = {g.get("id", ""): g for g in root.iter(f"{SVG}g") if g.get("class") == "chart"}
    assert set(found) == {"throughput", "lateness"}
    return found


def points(chart: ET.Element) -> list[tuple[float, float]]:
    (line,) = chart.iter(f"{SVG}polyline")
    text = line.get("points", "")
    return [(float(x), float(y)) for x, y in (p.split(",") for p in text.split())]


def test_the_svg_is_valid_xml_with_two_charts_of_the_series() -> None:
    found = charts(plot.render_svg(summary()))
    throughput, lateness = points(found["throughput"]), points(found["lateness"])
    assert len(throughput) == 4
    assert len(lateness) == 3  # the point without timer events is left out
    # Time runs left to right; the busiest half second is the highest point (lowest y).
    assert [x for x, _ in throughput] == sorted(x for x, _ in throughput)
    ys = [y for _, y in throughput]
    assert min(ys) == ys[1] and max(ys) == ys[3]
    assert lateness[2][1] < lateness[1][1] < lateness[0][1]


def test_both_charts_share_the_time_axis_and_label_it() -> None:
    found = charts(plot.render_svg(summary()))
    assert [x for x, _ in points(found["lateness"])] == [x for x, _ in points(found["throughput"])][
        :3
    ]
    for chart in found.values():
        texts = [t.text for t in chart.iter(f"{SVG}text")]
        assert "time (s)" in texts
        assert "0" in texts  # the y axis starts at zero


def test_process_mode_says_lateness_was_not_measured() -> None:
    found = charts(plot.render_svg(summary("process")))
    assert points(found["lateness"]) == []
    texts = [t.text or "" for t in found["lateness"].iter(f"{SVG}text")]
    assert any("not measured in process mode" in t for t in texts)


def test_an_empty_series_still_draws_both_axes() -> None:
    found = charts(plot.render_svg({**summary(), "series": []}))
    assert points(found["throughput"]) == [] and points(found["lateness"]) == []


def test_text_is_escaped() -> None:
    document = plot.render_svg({**summary(), "scenario": "a<b>&c.toml"})
    charts(document)  # still parses
    assert "a&lt;b&gt;&amp;c.toml" in document


def test_ticks_are_round_and_cover_the_top() -> None:
    assert plot._ticks(3800) == [0, 1000, 2000, 3000, 4000]
    assert plot._ticks(0.7)[-1] >= 0.7
    assert plot._ticks(0) == [0.0, 1.0]


def test_a_load_run_writes_its_plot(tmp_path: Path) -> None:
    out = tmp_path / "load.svg"
    code = load.main(
        ["generate", "--sessions", "5", "--speed", "0.05", "--plot", str(out), "--no-progress"]
    )
    assert code == 0
    found = charts(out.read_text())
    assert len(points(found["throughput"])) >= 1


def test_the_plot_command_draws_a_saved_summary(tmp_path: Path) -> None:
    source, out = tmp_path / "s.json", tmp_path / "s.svg"
    source.write_text(json.dumps(summary()))
    assert plot.main([str(source), str(out)]) == 0
    assert len(points(charts(out.read_text())["throughput"])) == 4


def test_the_plot_command_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plot.main([str(tmp_path / "missing.json"), str(tmp_path / "x.svg")]) == 2
    assert plot.main(["only-one"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err


@pytest.mark.parametrize("name", ["out.jpg", "out.png", "out"])
def test_anything_but_svg_is_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(plot.PlotError, match=r"a plot is \.svg"):
        plot.check_plot_path(name)
    with pytest.raises(plot.PlotError, match=r"a plot is \.svg"):
        plot.write_plot(summary(), str(tmp_path / name))
    assert not (tmp_path / name).exists()


def test_a_png_is_refused_before_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert load.main(["generate", "--sessions", "100000", "--plot", "x.png"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a plot is .svg" in err


def test_each_chart_has_its_title_and_a_y_axis_from_zero() -> None:
    found = charts(plot.render_svg(summary()))
    titles = {
        name: next(t.text or "" for t in chart.iter(f"{SVG}text")) for name, chart in found.items()
    }
    assert titles["throughput"] == "events per second"
    assert titles["lateness"].startswith("p99 lateness (ms)")
    (_, low), *_ = sorted(points(found["lateness"]), key=lambda p: -p[1])
    axis = [
        line for line in found["lateness"].iter(f"{SVG}line") if line.get("x1") == line.get("x2")
    ]
    assert axis and low <= float(axis[-1].get("y1", 0))  # no point below the zero line


def test_the_same_summary_draws_the_same_bytes() -> None:
    assert plot.render_svg(summary()) == plot.render_svg(summary())
