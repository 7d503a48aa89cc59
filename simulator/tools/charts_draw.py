"""Drawing one compiled chart as text: mermaid ``stateDiagram-v2`` and Graphviz DOT.

Owns: :func:`edges`, the transitions of a chart as drawn, and :func:`mermaid` and
:func:`dot`, the two texts; all from the compiled :class:`~simulator.core.chart.Chart`
alone (its states, and its transitions in chart order). Which chart to draw, SVG and
PNG through Graphviz, ``docs/charts.md`` and ``zread-sim charts`` are
:mod:`simulator.tools.charts`'s.

What a diagram shows: every chart state once, with its ``vm.state`` when that differs
from its name, the ``waiting_for`` of a gate (``waits for select_action, cancel, quit``)
and its timers; ``[*]`` into the initial state and out of every terminal one; every
transition once per trigger, source and candidate, labelled ``trigger [guard]``
(``[not x]`` for an ``unless``, ``[else]`` for an unguarded candidate tried after
guarded ones); an internal transition (``dest: None``) is an edge back to its state.

Internal triggers (``_`` names, never sent by a client) are told apart from commands.
In DOT they are dashed (``style=dashed``). Mermaid's ``stateDiagram-v2`` cannot draw a
dashed or otherwise styled transition: its grammar has one arrow, ``-->``, every edge
gets the same fixed style, ``linkStyle`` exists only in flowcharts (mermaid issue #1352,
open since 2020; mermaid 11.17 refuses both ``-.->`` and ``linkStyle`` in a state
diagram), and ``classDef`` applies to states only. So in mermaid (and, for the
same reading, in DOT too) an internal trigger's label starts with a mark: ``⏱`` for a
timer of its source state, ``▶`` for ``_start`` (fired once at start-up), ``⚙`` for one
the model fires itself (a delay it schedules, the answer to an effect); and the states
a session leaves only by internal triggers get a dashed border (``classDef internal``),
the gates a bold one (``classDef gate``).

A state name or label mermaid would read as something else is the chart's bug, refused
with a :class:`~simulator.errors.SimulatorBug` rather than drawn wrong.

Must not: run a session, change a chart, load one by name, or do any I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from simulator.core.chart_specs import Chart, StateSpec, TransitionSpec
from simulator.errors import SimulatorBug

Kind = Literal["command", "start", "timer", "model"]
MARKS: dict[Kind, str] = {"command": "", "start": "▶ ", "timer": "⏱ ", "model": "⚙ "}
"""The prefix of an edge's label, by who fires its trigger."""

_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Words mermaid's state-diagram lexer reads before an id (it has no word boundaries:
# ``default`` is a keyword at the start of any token, ``state``/``note``/``class``
# before a space).
_MERMAID_WORDS = ("state", "note", "class", "classdef", "scale", "direction", "hide", "end")
_UNSAFE_TEXT = re.compile(r'[:;"#%\n{}<>]')


@dataclass(frozen=True, slots=True)
class Edge:
    """One transition of a chart as drawn: one trigger, source and candidate."""

    source: str
    dest: str  # the source again for an internal transition (dest None)
    trigger: str
    guard: str  # "" or "[chose_fresh]", "[not logged_in]", "[else]"
    kind: Kind

    @property
    def internal(self) -> bool:
        """True for a trigger a client never sends (timers, start-up, the model's)."""
        return self.kind != "command"

    @property
    def label(self) -> str:
        return f"{MARKS[self.kind]}{self.trigger}{' ' + self.guard if self.guard else ''}"


def _kind(trigger: str, source: StateSpec) -> Kind:
    if not trigger.startswith("_"):
        return "command"
    if trigger == "_start":
        return "start"
    if any(timer.trigger == trigger for timer in source.timers):
        return "timer"
    return "model"


def _guard(transition: TransitionSpec, follows_others: bool) -> str:
    terms = [*transition.conditions, *(f"not {name}" for name in transition.unless)]
    if terms:
        return f"[{' and '.join(terms)}]"
    return "[else]" if follows_others else ""


def edges(chart: Chart) -> list[Edge]:
    """Every transition of ``chart``, one per trigger, source and candidate, in chart
    order."""
    seen: set[tuple[str, str]] = set()
    out: list[Edge] = []
    for transition in chart.transitions:
        trigger, source = transition.trigger, transition.source
        kind = _kind(trigger, chart.states[source])
        guard = _guard(transition, (trigger, source) in seen)
        seen.add((trigger, source))
        out.append(Edge(source, transition.dest or source, trigger, guard, kind))
    return out


def _details(chart: Chart, spec: StateSpec) -> tuple[str, list[str]]:
    """A state's title and the lines under it: its gate, then its timers."""
    title = spec.name
    if spec.vm_state != spec.name:
        shown = "vm.state" if chart.shows_state else "zread state"
        title = f"{spec.name} ({shown} {spec.vm_state})"
    lines = []
    if spec.waiting_for:
        lines.append(f"waits for {', '.join(spec.waiting_for)}")
    for timer in spec.timers:
        when = "every" if timer.repeat else "after"
        lines.append(f"{MARKS['timer']}{timer.trigger} {when} {timer.after}")
    return title, lines


def _state_class(spec: StateSpec) -> str | None:
    if spec.waiting_for:
        return "gate"
    return None if spec.terminal else "internal"


def _checked(chart: Chart, texts: Sequence[str]) -> None:
    """Refuse a state name or text mermaid would read as something else."""
    for name in chart.states:
        lowered = name.lower()
        if not _ID.match(name) or lowered in _MERMAID_WORDS or lowered.startswith("default"):
            raise SimulatorBug(f"chart {chart.name}: state {name!r} is not a safe diagram id")
    for text in texts:
        if _UNSAFE_TEXT.search(text):
            raise SimulatorBug(f"chart {chart.name}: {text!r} cannot be a diagram label")


def mermaid(chart: Chart) -> str:
    """The mermaid ``stateDiagram-v2`` of ``chart``, ending in a newline."""
    drawn = edges(chart)
    details = {name: _details(chart, spec) for name, spec in chart.states.items()}
    _checked(
        chart,
        [e.label for e in drawn] + [t for title, more in details.values() for t in [title, *more]],
    )
    lines = [
        "stateDiagram-v2",
        "    classDef gate stroke-width:3px",
        "    classDef internal stroke-dasharray:5 4",
    ]
    for name, (title, more) in details.items():
        lines.append(f'    state "{title}" as {name}')
        lines.extend(f"    {name} : {line}" for line in more)
    lines.append(f"    [*] --> {chart.initial}")
    lines.extend(f"    {e.source} --> {e.dest} : {e.label}" for e in drawn)
    lines.extend(f"    {name} --> [*]" for name, spec in chart.states.items() if spec.terminal)
    for css in ("gate", "internal"):
        members = [name for name, spec in chart.states.items() if _state_class(spec) == css]
        if members:
            lines.append(f"    class {','.join(members)} {css}")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(chart: Chart) -> str:
    """The Graphviz DOT graph of ``chart``, named after its command: internal triggers
    dashed."""
    drawn = edges(chart)
    _checked(chart, [])
    lines = [
        f"digraph {_quoted(chart.name)} {{",
        '    node [shape=box, style=rounded, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
        '    "__start" [shape=point, width=0.15, label=""];',
        '    "__end" [shape=doublecircle, width=0.1, label="", style=filled, fillcolor=black];',
    ]
    for name, spec in chart.states.items():
        title, more = _details(chart, spec)
        label = "\\n".join(_quoted(t)[1:-1] for t in [title, *more])
        css = _state_class(spec)
        style = {"gate": ", penwidth=2", "internal": ', style="rounded,dashed"', None: ""}[css]
        lines.append(f'    {_quoted(name)} [label="{label}"{style}];')
    lines.append(f'    "__start" -> {_quoted(chart.initial)};')
    for e in drawn:
        dashed = ", style=dashed" if e.internal else ""
        lines.append(
            f"    {_quoted(e.source)} -> {_quoted(e.dest)} [label={_quoted(e.label)}{dashed}];"
        )
    lines.extend(
        f'    {_quoted(name)} -> "__end";' for name, spec in chart.states.items() if spec.terminal
    )
    lines.append("}")
    return "\n".join(lines) + "\n"
