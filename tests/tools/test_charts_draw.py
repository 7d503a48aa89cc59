"""Tests for simulator.tools.charts_draw: the diagrams hold every state and transition
of each chart, once, and nothing else.

The mermaid text is read back by a small parser of the ``stateDiagram-v2`` lines it
uses (``state "title" as id``, ``id : text``, ``a --> b : label``, ``[*]``,
``classDef``/``class``); a line it cannot read fails the test. What a diagram must
hold is worked out here from the raw ``CHART`` dicts, not from the module under test.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from simulator.errors import SimulatorBug
from simulator.tools.charts_draw import _checked, dot, edges, mermaid
from statecharts import COMMANDS, load_chart

ALL = list(COMMANDS)


def drawn(command: str) -> str:
    return mermaid(load_chart(command))


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
    check_diagram(command, drawn(command))


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


@pytest.mark.parametrize(("what", "text"), list(mutations(drawn("generate"))))
def test_the_check_catches_a_wrong_diagram(what: str, text: str) -> None:
    assert text != drawn("generate"), what
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        check_diagram("generate", text)


def test_the_diagrams_show_vm_state_gates_and_internal_marks() -> None:
    text = drawn("generate")
    assert 'state "catalog (vm.state running)" as catalog' in text
    assert "select_action : waits for select_action, cancel, quit" in text
    assert "catalog : ⏱ _catalog_step every catalog_step" in text
    assert "catalog --> catalog : ⏱ _catalog_step [else]" in text  # dest None
    assert "starting --> error : ▶ _start [not logged_in]" in text
    assert "pages --> retry_gate : ⚙ _page_done [gate_needed]" in text
    assert "retry_gate --> done : skip_all\n" in text
    assert 'state "saved (zread state editing)" as saved' in drawn("config")
    assert "-.->" not in text and "linkStyle" not in text  # neither parses in a state diagram


def test_a_name_mermaid_would_misread_is_refused() -> None:
    chart = load_chart("version")
    spec = chart.states["done"]
    for bad in ("default_done", "state", "two words", "_hidden", "a-b"):
        odd = msgspec.structs.replace(chart, states={**chart.states, bad: spec})
        with pytest.raises(SimulatorBug, match="not a safe diagram id"):
            _checked(odd, [])
    with pytest.raises(SimulatorBug, match="cannot be a diagram label"):
        _checked(chart, ["a: b"])


def test_edges_are_one_per_candidate_marked_by_who_fires_them() -> None:
    chart = load_chart("generate")
    drawn_edges = edges(chart)
    assert len(drawn_edges) == len(chart.transitions)
    catalog = [e for e in drawn_edges if e.source == "catalog" and e.trigger == "_catalog_step"]
    assert [(e.dest, e.guard, e.kind) for e in catalog][-1] == ("catalog", "[else]", "timer")
    start = next(e for e in drawn_edges if e.trigger == "_start")
    assert (start.kind, start.internal, start.label.split()[0]) == ("start", True, "▶")
    page = next(e for e in drawn_edges if e.trigger == "_page_done")
    assert (page.kind, page.label.split()[0]) == ("model", "⚙")
    command = next(e for e in drawn_edges if e.trigger == "skip_all")
    assert (command.kind, command.internal, command.label) == ("command", False, "skip_all")


# -- DOT ----------------------------------------------------------------------------------

DOT_EDGE = re.compile(r'    "(?P<source>[^"]+)" -> "(?P<dest>[^"]+)"(?: \[(?P<attrs>.*)\])?;')
DOT_NODE = re.compile(r'    "(?P<id>[^"]+)" \[(?P<attrs>.*)\];')


@pytest.mark.parametrize("command", ALL)
def test_the_dot_graph_has_every_edge_once_internal_ones_dashed(command: str) -> None:
    text = dot(load_chart(command))
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
    assert '"select_model" [label="select_model\\nwaits for select_model, quit"' in dot(
        load_chart("login")
    )
