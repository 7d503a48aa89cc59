"""Tests for simulator.tools.charts: a command's diagrams by name, SVG and PNG through
Graphviz's ``dot``, ``zread-sim charts`` and ``docs/charts.md``.

What a diagram holds is tested with the drawing (``tests/tools/test_charts_draw.py``).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from simulator.tools import charts, charts_draw
from statecharts import COMMANDS, command_module, load_chart

REPOSITORY = Path(__file__).resolve().parents[2]
ALL = list(COMMANDS)
NO_DOT = "--format svg needs Graphviz's dot on PATH; --format mermaid or dot work without it"


# -- a command's diagrams by name ---------------------------------------------------------


@pytest.mark.parametrize("command", ALL)
def test_a_command_s_diagrams_are_those_of_its_compiled_chart(command: str) -> None:
    chart = load_chart(command)
    assert charts.mermaid(command) == charts_draw.mermaid(chart)
    assert charts.dot(command) == charts_draw.dot(chart)
    assert charts.edges(command) == charts_draw.edges(chart)


def test_the_output_is_the_same_in_another_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulator.tools.charts", "login"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPOSITORY,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == charts.mermaid("login")


@pytest.mark.parametrize("draw", [charts.mermaid, charts.dot, charts.edges])
def test_an_unknown_command_is_a_configuration_error(draw: Callable[[str], object]) -> None:
    with pytest.raises(charts.ChartsError, match="unknown command 'nope'"):
        draw("nope")


# -- svg and png through Graphviz's dot ---------------------------------------------------


def no_dot_path(tmp_path: Path) -> str:
    empty = tmp_path / "no-dot"
    empty.mkdir()
    return str(empty)


def test_render_without_dot_on_path_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", no_dot_path(tmp_path))
    with pytest.raises(charts.RenderError) as raised:
        charts.render("generate", "png")
    assert str(raised.value) == NO_DOT.replace("svg", "png")


def fake_dot(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "dot"
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return folder


def test_render_hands_the_dot_text_to_dot_and_returns_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "seen"
    folder = fake_dot(tmp_path, f'echo "$@" > {seen}.args; cat > {seen}.in; printf "<svg/>"')
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), os.environ["PATH"]]))
    assert charts.render("update", "svg") == b"<svg/>"
    assert Path(f"{seen}.args").read_text() == "-Tsvg\n"
    assert Path(f"{seen}.in").read_text() == charts.dot("update")


def test_a_failing_dot_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = fake_dot(tmp_path, 'echo "Error: syntax error in line 1" >&2; exit 3')
    monkeypatch.setenv("PATH", str(folder))
    with pytest.raises(charts.RenderError, match=r"failed \(exit 3\): Error: syntax error"):
        charts.render("update", "svg")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not on PATH")
def test_render_draws_an_svg_with_every_state() -> None:
    svg = ET.fromstring(charts.render("generate", "svg"))
    texts = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert set(load_chart("generate").states) <= {t.split(" ")[0] for t in texts if t}


# -- the command line ---------------------------------------------------------------------


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = charts.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_main_prints_mermaid_by_default_and_dot_when_asked() -> None:
    assert run("browse") == (0, charts.mermaid("browse"), "")
    assert run("browse", "--format", "dot") == (0, charts.dot("browse"), "")


def test_main_writes_out(tmp_path: Path) -> None:
    target = tmp_path / "generate.mmd"
    assert run("generate", "--out", str(target)) == (0, "", "")
    assert target.read_text(encoding="utf-8") == charts.mermaid("generate")


def test_main_all_prints_or_writes_every_chart(tmp_path: Path) -> None:
    code, out, err = run("--all")
    assert (code, err) == (0, "")
    for command in ALL:
        assert f"%% zread {command}\n{charts.mermaid(command)}" in out
    assert run("--all", "--format", "dot", "--out", str(tmp_path / "d")) == (0, "", "")
    assert sorted(os.listdir(tmp_path / "d")) == sorted(f"{c}.dot" for c in ALL)
    assert (tmp_path / "d" / "config.dot").read_text(encoding="utf-8") == charts.dot("config")


def test_main_help() -> None:
    code, out, err = run("-h")
    assert (code, err) == (0, "")
    assert "\nUsage:\n  zread-sim charts [COMMAND] [flags]\n" in out
    assert charts.REGENERATE.replace("\n", " ") in " ".join(out.split())


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (
            ["nope"],
            "unknown command 'nope' (one of browse, generate, config, login, update, version)",
        ),
        (["generate", "--format", "jpeg"], "unknown format 'jpeg' (one of mermaid, dot, svg, png)"),
        (["generate", "--colour"], "unrecognized arguments: --colour"),
        (["generate", "--format"], "argument --format: expected one argument"),
        ([], "give one of COMMAND, --all or --docs (see --help)"),
        (["generate", "--all"], "give one of COMMAND, --all or --docs (see --help)"),
        (["generate", "--format", "png"], "--format png is binary: give --out FILE"),
        (["--all", "--format", "svg"], "--all --format svg writes one file each: give --out DIR"),
        (["--docs", "--format", "dot"], "--docs writes mermaid; leave out --format"),
    ],
)
def test_main_refuses_with_one_line_and_exit_2(argv: list[str], reason: str) -> None:
    assert run(*argv) == (2, "", f"zread-sim charts: {reason}\n")


def test_main_cannot_write_is_one_line(tmp_path: Path) -> None:
    code, out, err = run("login", "--out", str(tmp_path / "missing" / "login.mmd"))
    assert (code, out) == (2, "")
    assert err.startswith("zread-sim charts: cannot write ") and err.count("\n") == 1


def test_main_svg_without_dot_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", no_dot_path(tmp_path))
    assert run("generate", "--format", "svg") == (2, "", f"zread-sim charts: {NO_DOT}\n")
    target = tmp_path / "out.svg"
    assert run("generate", "--format", "svg", "--out", str(target))[0] == 2
    assert not target.exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not on PATH")
def test_main_svg_with_dot(tmp_path: Path) -> None:
    target = tmp_path / "generate.png"
    assert run("generate", "--format", "png", "--out", str(target)) == (0, "", "")
    assert target.read_bytes().startswith(b"\x89PNG")
    code, out, _ = run("generate", "--format", "svg")
    assert code == 0 and "<svg" in out


# -- docs/charts.md -----------------------------------------------------------------------


def test_docs_charts_md_is_the_generated_page() -> None:
    page = (REPOSITORY / "docs" / "charts.md").read_text(encoding="utf-8")
    assert page == charts.docs_page(), f"docs/charts.md is stale: run {charts.REGENERATE}"


def test_the_page_has_every_chart_and_names_its_regenerate_command() -> None:
    page = charts.docs_page()
    assert page.splitlines()[0].startswith("<!--") and charts.REGENERATE in page.splitlines()[0]
    blocks = re.findall(r"^## (\w+)\n\n[^\n]+\n\n```mermaid\n(.*?)```$", page, re.M | re.S)
    assert [command for command, _ in blocks] == ALL
    for command, block in blocks:
        assert block == charts.mermaid(command)
    for command in COMMANDS:  # each chart's sentence is its module's ABOUT
        assert f"## {command}\n\n{command_module(command).ABOUT}\n" in page


def test_main_docs_writes_the_page(tmp_path: Path) -> None:
    target = tmp_path / "charts.md"
    assert run("--docs", "--out", str(target)) == (0, "", "")
    assert target.read_text(encoding="utf-8") == charts.docs_page()


def test_architecture_links_the_charts_page() -> None:
    assert "(charts.md)" in (REPOSITORY / "docs" / "architecture.md").read_text(encoding="utf-8")
