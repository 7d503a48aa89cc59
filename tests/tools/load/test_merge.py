"""Tests for simulator.tools.load.merge: summaries of several parts as one.

Two real runs (``load --json``) are merged as two hosts would be, through the command
line (``load --merge``); the merge's arithmetic is checked on summaries built from
known samples; bad files are refused in one line with exit code 2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from simulator.tools.load import (
    MAX_MESSAGES,
    TICK,
    Histogram,
    LoadConfig,
    LoadError,
    Stats,
    format_summary,
    main,
)
from simulator.tools.load.merge import merge, name_of, read_summary
from simulator.tools.load.stats import bins_percentile_ms, build_summary

from .helpers import load

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def part(samples: list[float], *, live: int, events: int, errors: int = 0) -> dict[str, Any]:
    """A summary of a part whose one tick saw ``samples`` of lateness."""
    clock = Clock()
    stats = Stats(clock)
    stats.started = stats.completed = 3
    stats.events = events
    for seconds in samples:
        stats.late(seconds)
    for index in range(errors):
        stats.error(index, "exit code 3")
    clock.now = TICK + 0.01
    stats.sample(live)
    clock.now = 1.2
    stats.sample(0)
    summary = build_summary(LoadConfig(command="generate", concurrency=3), stats, lateness=True)
    summary.update(peak_live=live, rss_added_kb=live * 10, rss_peak_live=live, peak_rss_mb=50.0)
    return summary


def test_the_merged_histogram_is_the_histogram_of_all_samples() -> None:
    a, b = [0.001, 0.002, 0.2], [0.0005, 0.003, 0.003, 1.5]
    merged = merge([part(a, live=2, events=10), part(b, live=3, events=20)], ["a", "b"], "hosts")
    expected = Histogram()
    for seconds in a + b:
        expected.add(seconds)
    assert Histogram.from_json(merged["lateness_histogram"]) == expected
    assert merged["lateness_ms"] == {
        **expected.figures(),
        "samples": 7,
        "timer_events": 7,
        "starts": 0,
    }
    assert (merged["sessions"], merged["completed"], merged["events"]) == (6, 6, 30)
    assert merged["concurrency"] == 6
    assert merged["lateness_ms"]["max"] == 1500.0
    # The series add up on the tick grid, and so does each point's p99.
    first = merged["series"][0]
    assert (first["live"], first["events"]) == (5, 30)
    # A point's p99 is the upper edge of its bucket, as each part's own points are.
    assert first["p99_ms"] == bins_percentile_ms(enumerate(expected.counts), 7, 99)
    assert merged["peak_live"] == 5 == merged["peak_live_sum"]
    assert merged["rss_per_session_kb"] == 10.0 and merged["rss_peak_live"] == 5
    assert merged["peak_rss_mb"] == 100.0
    assert [row["name"] for row in merged["parts"]] == ["a", "b"]
    assert merged["parts"][1]["lateness_ms"]["max"] == 1500.0


def test_error_messages_of_hosts_say_which_host() -> None:
    merged = merge(
        [part([], live=1, events=1, errors=1), part([], live=1, events=1, errors=2)],
        ["east", "west"],
        "hosts",
    )
    assert merged["errors"] == 3
    assert merged["error_messages"] == [
        "east: session 0: exit code 3",
        "west: session 0: exit code 3",
        "west: session 1: exit code 3",
    ]


def test_the_merged_error_messages_are_bounded_and_the_count_has_them_all() -> None:
    # Each worker keeps its first MAX_MESSAGES; the merge keeps the first of them all.
    parts = [part([], live=1, events=1, errors=15), part([], live=1, events=1, errors=15)]
    merged = merge(parts, ["worker 0", "worker 1"], "workers")
    assert merged["errors"] == 30
    assert len(merged["error_messages"]) == MAX_MESSAGES == 20
    assert merged["error_messages"][14:16] == ["session 14: exit code 3", "session 0: exit code 3"]


def test_a_part_without_lateness_leaves_the_others() -> None:
    process = {**part([], live=1, events=1), "mode": "process"}
    process.update(lateness_ms=None, lateness_histogram=None)
    merged = merge([process, part([0.004], live=1, events=1)], ["p", "i"], "hosts")
    assert merged["mode"] == "mixed" and merged["lateness_ms"]["samples"] == 1
    assert merge([process], ["p"], "hosts")["lateness_ms"] is None


def test_names_are_the_hosts_and_stay_unique() -> None:
    taken: set[str] = set()
    one = name_of("/x/a.json", {"host": "box"}, taken)
    two = name_of("/y/b.json", {"host": "box"}, taken)
    three = name_of("/z/c.json", {}, taken)
    assert (one, two, three) == ("box", "box (b.json)", "c.json")


# -- through the command line -------------------------------------------------------------


def test_two_real_summaries_merge_into_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for seed in ("0", "100"):
        folder = tmp_path / seed
        folder.mkdir()
        argv = ["generate", "--sessions", "4", "--speed", "0.05", "--seed", seed, "--workers", "1"]
        code, _summary = load(folder, *argv, "--", "-y")
        assert code == 0
        runs.append(folder / "summary.json")
    capsys.readouterr()
    out = tmp_path / "merged.json"
    assert (
        main(["--merge", *map(str, runs), "--json", str(out), "--plot", str(tmp_path / "m.svg")])
        == 0
    )
    table = capsys.readouterr().out
    merged = json.loads(out.read_text())
    parts = [json.loads(path.read_text()) for path in runs]
    assert table == format_summary(merged)
    assert "2 hosts merged" in table.splitlines()[0]
    assert merged["sessions"] == 8 == merged["completed"]
    assert merged["events"] == sum(p["events"] for p in parts)
    expected = Histogram()
    for p in parts:
        expected.merge(Histogram.from_json(p["lateness_histogram"]))
    assert Histogram.from_json(merged["lateness_histogram"]) == expected
    assert merged["lateness_ms"]["p99"] == expected.percentile_ms(99)
    assert merged["lateness_ms"]["max"] == max(p["lateness_ms"]["max"] for p in parts)
    assert sorted(s["seed"] for s in merged["per_session"]) == [0, 1, 2, 3, 100, 101, 102, 103]
    assert len(merged["parts"]) == 2
    assert (tmp_path / "m.svg").read_text().startswith("<?xml")
    # A merged summary merges again, as a host of its own.
    again = tmp_path / "again.json"
    assert main(["--merge", str(out), str(runs[0]), "--json", str(again)]) == 0
    assert json.loads(again.read_text())["sessions"] == 12


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def good(tmp_path: Path) -> dict[str, Any]:
    return part([0.001], live=1, events=1)


BAD: list[tuple[Any, str]] = [
    (None, "No such file or directory"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not a load summary (load --json writes a JSON object)"),
    ('{"command": "generate"}', "not a load summary: Object missing required field"),
    ({"sessions": "many"}, "Expected `int`, got `str` - at `$.sessions`"),
    ({"lateness_histogram": None}, "has lateness figures but no lateness_histogram"),
    ({"lateness_histogram": {"scheme": "hdr", "buckets": [], "max_s": 0}}, "lateness buckets"),
]


@pytest.mark.parametrize(("content", "says"), BAD)
def test_a_bad_file_to_merge_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, says: str
) -> None:
    if content is None:
        path = str(tmp_path / "missing.json")
    elif isinstance(content, dict):
        path = write(tmp_path, "bad.json", json.dumps({**good(tmp_path), **content}))
    else:
        path = write(tmp_path, "bad.json", content)
    fine = write(tmp_path, "fine.json", json.dumps(good(tmp_path)))
    assert main(["--merge", fine, path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"zread-sim load: {path}: ")
    assert captured.err.count("\n") == 1 and says in captured.err
    assert "Traceback" not in captured.err
    with pytest.raises(LoadError, match=re.escape(says)):
        read_summary(path)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--merge"], "expected at least one argument"),
        (["--merge", "a.json", "--json", "/no/such/dir/x.json"], "no such directory"),
        (["--merge", "a.json", "--plot", "x.png"], "a plot is .svg"),
        (["--merge", "a.json", "--sessions", "3"], "unrecognized arguments"),
    ],
)
def test_bad_merge_arguments_are_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
