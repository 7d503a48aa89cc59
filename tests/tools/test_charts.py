"""Tests for simulator.tools.charts: the diagrams hold every state and transition of
each chart, once, and nothing else.

The mermaid text is read back by a small parser of the ``stateDiagram-v2`` lines it
uses (``state "title" as id``, ``id : text``, ``a --> b : label``, ``[*]``,
``classDef``/``class``); a line it cannot read fails the test. What a diagram must
hold is worked out here from the raw ``CHART`` dicts, not from the module under test.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.errors import SimulatorBug
from simulator.tools import charts
from statecharts import COMMANDS, load_chart

REPOSITORY = Path(__file__).resolve().parents[2]
ALL = list(COMMANDS)
NO_DOT = "--format svg needs Graphviz's dot on PATH; --format mermaid or dot work without it"


# -- what a chart's diagram must hold, from the raw chart ---------------------------------


def names(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


@dataclasses.dataclass(frozen=True)
class Want:
    source: str
    dest: str
    trigger: str
    guard: str | None  # the text inside [...], or None
    mark: str  # "" for a client's command


def wanted(command: str) -> list[Want]:
    """Every transition of the chart, one per trigger, source and candidate, in order."""
    chart = importlib.import_module(f"statecharts.{command}").CHART
    timers = {s["name"]: {t["trigger"] for t in s.get("timers", ())} for s in chart["states"]}
    tried: set[tuple[str, str]] = set()
    out = []
    for t in chart["transitions"]:
        for source in names(t["source"]):
            terms = names(t.get("conditions")) + [f"not {u}" for u in names(t.get("unless"))]
            guard = " and ".join(terms) if terms else None
            if guard is None and (t["trigger"], source) in tried:
                guard = "else"
            tried.add((t["trigger"], source))
            trigger = t["trigger"]
            if not trigger.startswith("_"):
                mark = ""
            elif trigger == "_start":
                mark = "▶"
            elif trigger in timers[source]:
                mark = "⏱"
            else:
                mark = "⚙"
            out.append(Want(source, t["dest"] or source, trigger, guard, mark))
    return out


def raw_states(command: str) -> list[dict[str, Any]]:
    return list(importlib.import_module(f"statecharts.{command}").CHART["states"])


# -- a small stateDiagram-v2 reader -------------------------------------------------------

DECLARATION = re.compile(r'    state "(?P<title>[^"]+)" as (?P<id>[A-Za-z]\w*)')
DESCRIPTION = re.compile(r"    (?P<id>[A-Za-z]\w*) : (?P<text>[^:;\n]+)")
TRANSITION = re.compile(
    r"    (?P<source>[A-Za-z]\w*|\[\*\]) --> (?P<dest>[A-Za-z]\w*|\[\*\])"
    r"(?: : (?P<label>[^:;\n]+))?"
)
LABEL = re.compile(r"(?:(?P<mark>[⏱▶⚙]) )?(?P<trigger>\w+)(?: \[(?P<guard>[^\]]+)\])?")
CLASSDEF = re.compile(r"    classDef (?P<name>\w+) (?P<style>\S+(?: \S+)*)")
CLASS = re.compile(r"    class (?P<ids>\w+(?:,\w+)*) (?P<name>\w+)")


@dataclasses.dataclass
class Diagram:
    declared: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    descriptions: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    starts: list[str] = dataclasses.field(default_factory=list)
    ends: list[str] = dataclasses.field(default_factory=list)
    edges: list[Want] = dataclasses.field(default_factory=list)
    classdefs: dict[str, str] = dataclasses.field(default_factory=dict)
    classes: dict[str, set[str]] = dataclasses.field(default_factory=dict)


def parse_mermaid(text: str) -> Diagram:
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2", lines[0]
    assert text.endswith("\n")
    d = Diagram()
    for line in lines[1:]:
        if m := DECLARATION.fullmatch(line):
            d.declared.append((m["id"], m["title"]))
        elif m := TRANSITION.fullmatch(line):
            source, dest = m["source"], m["dest"]
            if source == "[*]":
                assert m["label"] is None, line
                d.starts.append(dest)
            elif dest == "[*]":
                assert m["label"] is None, line
                d.ends.append(source)
            else:
                assert m["label"] is not None, f"an edge without a label: {line}"
                label = LABEL.fullmatch(m["label"])
                assert label, f"unreadable label: {line}"
                d.edges.append(
                    Want(source, dest, label["trigger"], label["guard"], label["mark"] or "")
                )
        elif m := DESCRIPTION.fullmatch(line):
            d.descriptions.setdefault(m["id"], []).append(m["text"])
        elif m := CLASSDEF.fullmatch(line):
            d.classdefs[m["name"]] = m["style"]
        elif m := CLASS.fullmatch(line):
            d.classes.setdefault(m["name"], set()).update(m["ids"].split(","))
        else:
            pytest.fail(f"a line the reader does not know: {line!r}")
    return d


def check_diagram(command: str, text: str) -> None:
    """Assert that ``text`` draws exactly ``command``'s chart."""
    d = parse_mermaid(text)
    chart = load_chart(command)
    states = raw_states(command)
    ids = [state_id for state_id, _ in d.declared]
    assert ids == [s["name"] for s in states], "every state declared once, in chart order"
    for state_id, title in d.declared:
        spec = chart.states[state_id]
        if spec.vm_state == state_id:
            assert title == state_id
        else:
            assert title.startswith(f"{state_id} (") and f" {spec.vm_state})" in title, title
    assert set(d.descriptions) <= set(ids), "a description of an undeclared state"
    for state in states:
        lines = d.descriptions.get(state["name"], [])
        gates = [line for line in lines if line.startswith("waits for ")]
        waiting_for = state.get("waiting_for", [])
        assert gates == ([f"waits for {', '.join(waiting_for)}"] if waiting_for else []), state
        timers = [line for line in lines if line.startswith("⏱ ")]
        assert len(timers) == len(state.get("timers", ())), state
        for timer, line in zip(state.get("timers", ()), timers, strict=True):
            assert line.split()[1] == timer["trigger"] and line.endswith(timer["after"])
    assert d.starts == [chart.initial]
    assert Counter(d.ends) == Counter(s["name"] for s in states if s.get("terminal"))
    want = wanted(command)
    assert Counter(d.edges) == Counter(want), "every transition exactly once, no other"
    assert d.edges == want, "in chart order"
    for edge in d.edges:
        assert edge.source in ids and edge.dest in ids
        assert (edge.mark != "") == edge.trigger.startswith("_"), edge
    gate_states = {s["name"] for s in states if s.get("waiting_for")}
    assert d.classes.get("gate", set()) == gate_states
    assert all(name in d.classdefs for name in d.classes)


@pytest.mark.parametrize("command", ALL)
def test_the_mermaid_diagram_draws_exactly_the_chart(command: str) -> None:
    check_diagram(command, charts.mermaid(command))


def mutations(text: str) -> Iterator[tuple[str, str]]:
    lines = text.splitlines(keepends=True)
    edge = next(i for i, line in enumerate(lines) if " --> " in line and " : " in line)
    yield "an edge dropped", "".join(lines[:edge] + lines[edge + 1 :])
    yield "an edge twice", "".join(lines[: edge + 1] + lines[edge:])
    m = TRANSITION.fullmatch(lines[edge].rstrip("\n"))
    assert m
    other = "starting" if m["dest"] != "starting" else "done"
    moved = f"    {m['source']} --> {other} : {m['label']}\n"
    yield "an edge misdirected", "".join([*lines[:edge], moved, *lines[edge + 1 :]])
    yield "a mark dropped", text.replace("▶ _start", "_start", 1)
    yield "a gate dropped", text.replace("waits for ", "waits for nothing, ", 1)
    yield "a state twice", text.replace("    [*] -->", '    state "error" as error\n    [*] -->', 1)
    yield "a stray line", text + "    a -.-> b\n"


@pytest.mark.parametrize(("what", "text"), list(mutations(charts.mermaid("generate"))))
def test_the_check_catches_a_wrong_diagram(what: str, text: str) -> None:
    assert text != charts.mermaid("generate"), what
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        check_diagram("generate", text)


def test_the_diagrams_show_vm_state_gates_and_internal_marks() -> None:
    text = charts.mermaid("generate")
    assert 'state "catalog (vm.state running)" as catalog' in text
    assert "select_action : waits for select_action, cancel, quit" in text
    assert "catalog : ⏱ _catalog_step every catalog_step" in text
    assert "catalog --> catalog : ⏱ _catalog_step [else]" in text  # dest None
    assert "starting --> error : ▶ _start [not logged_in]" in text
    assert "pages --> retry_gate : ⚙ _page_done [gate_needed]" in text
    assert "retry_gate --> done : skip_all\n" in text
    assert 'state "saved (zread state editing)" as saved' in charts.mermaid("config")
    assert "-.->" not in text and "linkStyle" not in text  # neither parses in a state diagram


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


def test_a_name_mermaid_would_misread_is_refused() -> None:
    chart = load_chart("version")
    spec = chart.states["done"]
    for bad in ("default_done", "state", "two words", "_hidden", "a-b"):
        odd = msgspec.structs.replace(chart, states={**chart.states, bad: spec})
        with pytest.raises(SimulatorBug, match="not a safe diagram id"):
            charts._checked(odd, [])
    with pytest.raises(SimulatorBug, match="cannot be a diagram label"):
        charts._checked(chart, ["a: b"])


def test_an_unknown_command_is_a_configuration_error() -> None:
    with pytest.raises(charts.ChartsError, match="unknown command 'nope'"):
        charts.mermaid("nope")


# -- DOT ----------------------------------------------------------------------------------

DOT_EDGE = re.compile(r'    "(?P<source>[^"]+)" -> "(?P<dest>[^"]+)"(?: \[(?P<attrs>.*)\])?;')
DOT_NODE = re.compile(r'    "(?P<id>[^"]+)" \[(?P<attrs>.*)\];')


@pytest.mark.parametrize("command", ALL)
def test_the_dot_graph_has_every_edge_once_internal_ones_dashed(command: str) -> None:
    text = charts.dot(command)
    lines = text.splitlines()
    assert lines[0] == f'digraph "{command}" {{' and lines[-1] == "}"
    nodes: list[str] = []
    edges: list[Want] = []
    starts, ends = [], []
    for line in lines[1:-1]:
        if m := DOT_EDGE.fullmatch(line):
            if m["source"] == "__start":
                starts.append(m["dest"])
                continue
            if m["dest"] == "__end":
                ends.append(m["source"])
                continue
            label = re.search(r'label="([^"]*)"', m["attrs"] or "")
            assert label, line
            parsed = LABEL.fullmatch(label[1])
            assert parsed, line
            edge = Want(
                m["source"], m["dest"], parsed["trigger"], parsed["guard"], parsed["mark"] or ""
            )
            assert ("style=dashed" in m["attrs"]) == edge.trigger.startswith("_"), line
            edges.append(edge)
        elif m := DOT_NODE.fullmatch(line):
            nodes.append(m["id"])
        else:
            assert line.startswith(("    node [", "    edge [")), line
    states = raw_states(command)
    assert nodes == ["__start", "__end"] + [s["name"] for s in states]
    assert starts == [load_chart(command).initial]
    assert Counter(ends) == Counter(s["name"] for s in states if s.get("terminal"))
    assert edges == wanted(command)


def test_a_dot_label_carries_the_gate() -> None:
    assert '"select_model" [label="select_model\\nwaits for select_model, quit"' in charts.dot(
        "login"
    )


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
    assert out.startswith("usage: zread-sim charts") and charts.REGENERATE in out


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
    assert set(charts.SUMMARIES) == set(COMMANDS)


def test_main_docs_writes_the_page(tmp_path: Path) -> None:
    target = tmp_path / "charts.md"
    assert run("--docs", "--out", str(target)) == (0, "", "")
    assert target.read_text(encoding="utf-8") == charts.docs_page()


def test_architecture_links_the_charts_page() -> None:
    assert "(charts.md)" in (REPOSITORY / "docs" / "architecture.md").read_text(encoding="utf-8")
