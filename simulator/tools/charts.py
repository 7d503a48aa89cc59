"""Diagrams of the six charts: mermaid ``stateDiagram-v2``, Graphviz DOT, SVG and PNG.

Owns: :func:`mermaid` and :func:`dot`, which draw one chart from its data
(``statecharts.load_chart`` for the states, the module's ``CHART["transitions"]`` for
the edges, in chart order); :func:`render`, which turns the DOT text into SVG or PNG
with Graphviz's ``dot`` executable; :func:`docs_page`, the text of ``docs/charts.md``;
and :func:`main`, the body of ``zread-sim charts``. ``docs/charts.md`` is regenerated
with::

    python -m simulator.tools.charts --docs --out docs/charts.md

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

Why not ``transitions.extensions.diagrams``: its ``GraphMachine`` is a second machine,
built again from the transitions beside the one the sessions share, and knows nothing
of what a chart adds: the gates (``waiting_for``), ``vm_state``, the timers, which
triggers are internal. Its mermaid engine (transitions 0.9.3 has one) merges every
transition between two states into one edge (``a | b``), so one edge per candidate is
lost; its SVG and PNG need the ``graphviz`` or ``pygraphviz`` package as well as
Graphviz's ``dot``. Here the text is written from the chart data and needs nothing;
only SVG and PNG need ``dot`` on PATH.

Must not: run a session, or change a chart; print anything but what it was asked for.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

from simulator.core.chart import Chart, StateSpec
from simulator.errors import ConfigurationError, SimulatorBug
from simulator.tools.arguments import raising
from statecharts import COMMANDS, load_chart

__all__ = [
    "FORMATS",
    "ChartsError",
    "Edge",
    "RenderError",
    "docs_page",
    "dot",
    "edges",
    "main",
    "mermaid",
    "render",
]

FORMATS = ("mermaid", "dot", "svg", "png")
"""What ``--format`` takes; svg and png need Graphviz's ``dot`` on PATH."""
REGENERATE = "python -m simulator.tools.charts --docs --out docs/charts.md"
"""The command that writes ``docs/charts.md``."""

Kind = Literal["command", "start", "timer", "model"]
MARKS: dict[Kind, str] = {"command": "", "start": "▶ ", "timer": "⏱ ", "model": "⚙ "}
"""The prefix of an edge's label, by who fires its trigger."""

_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Words mermaid's state-diagram lexer reads before an id (it has no word boundaries:
# ``default`` is a keyword at the start of any token, ``state``/``note``/``class``
# before a space).
_MERMAID_WORDS = ("state", "note", "class", "classdef", "scale", "direction", "hide", "end")
_UNSAFE_TEXT = re.compile(r'[:;"#%\n{}<>]')

SUMMARIES: dict[str, str] = {
    "browse": "Serves the generated wiki: start-up picks the version (asking with "
    "`select_version` when there are several), the server starts on a timer, and the "
    "wiki is served until `quit`.",
    "generate": "Generates the wiki: start-up resumes a draft, asks `select_action` or "
    "starts fresh; the catalog and every page run on timers, and a failed page opens "
    "the retry gate.",
    "config": "Edits zread's configuration: `update_fields` and `reload_llm` change it "
    "in place, `save` writes it and ends the session.",
    "login": "Logs in: after `select_region` the browser flow runs on timers until the "
    "authorisation comes (or expires), then `select_model` and the saving of the "
    "credentials.",
    "update": "Updates zread: the release check runs on a timer, `download` starts the "
    "download, which steps on a timer, and `restart` or `skip_restart` ends it.",
    "version": "Prints the version: one internal transition from start-up to done.",
}
"""One sentence per command for ``docs/charts.md``."""


class ChartsError(ConfigurationError):
    """A diagram that cannot be made as asked: an unknown command or format (exit 2)."""


class RenderError(ChartsError):
    """SVG or PNG without Graphviz's ``dot`` on PATH, or ``dot`` failing."""


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


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _chart(command: str) -> Chart:
    if command not in COMMANDS:
        raise ChartsError(f"unknown command {command!r} (one of {', '.join(COMMANDS)})")
    return load_chart(command)


def _kind(trigger: str, source: StateSpec) -> Kind:
    if not trigger.startswith("_"):
        return "command"
    if trigger == "_start":
        return "start"
    if any(timer.trigger == trigger for timer in source.timers):
        return "timer"
    return "model"


def _guard(transition: dict[str, Any], follows_others: bool) -> str:
    terms = _names(transition.get("conditions"))
    terms += [f"not {name}" for name in _names(transition.get("unless"))]
    if terms:
        return f"[{' and '.join(terms)}]"
    return "[else]" if follows_others else ""


def edges(command: str) -> list[Edge]:
    """Every transition of ``command``'s chart, one per trigger, source and candidate,
    in chart order."""
    chart = _chart(command)
    raw = importlib.import_module(f"statecharts.{command}").CHART["transitions"]
    seen: set[tuple[str, str]] = set()
    out: list[Edge] = []
    for transition in raw:
        trigger = transition["trigger"]
        for source in _names(transition["source"]):
            dest = transition.get("dest") or source
            kind = _kind(trigger, chart.states[source])
            guard = _guard(transition, (trigger, source) in seen)
            seen.add((trigger, source))
            out.append(Edge(source, dest, trigger, guard, kind))
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


def mermaid(command: str) -> str:
    """The mermaid ``stateDiagram-v2`` of ``command``'s chart, ending in a newline."""
    chart = _chart(command)
    drawn = edges(command)
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


def dot(command: str) -> str:
    """The Graphviz DOT graph of ``command``'s chart: internal triggers dashed."""
    chart = _chart(command)
    drawn = edges(command)
    _checked(chart, [])
    lines = [
        f"digraph {_quoted(command)} {{",
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


def render(command: str, fmt: str) -> bytes:
    """``command``'s chart as ``svg`` or ``png`` bytes, drawn by Graphviz's ``dot``."""
    if fmt not in ("svg", "png"):
        raise ChartsError(f"render draws svg or png, not {fmt!r}")
    text = dot(command)
    program = shutil.which("dot")
    if program is None:
        raise RenderError(
            f"--format {fmt} needs Graphviz's dot on PATH; --format mermaid or dot work without it"
        )
    try:
        done = subprocess.run(
            [program, f"-T{fmt}"], input=text.encode(), capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RenderError(f"{program} -T{fmt} could not run: {error}") from error
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise RenderError(
            f"{program} -T{fmt} failed (exit {done.returncode}): {reason[0] if reason else ''}"
        )
    return done.stdout


def docs_page() -> str:
    """The text of ``docs/charts.md``: every chart's mermaid diagram."""
    parts = [
        f"<!-- Generated from statecharts/*.py by `{REGENERATE}`; do not edit by hand. -->",
        "",
        "# The charts",
        "",
        "Each zread command the simulator stands in for is a chart declared as data in",
        "`statecharts/<command>.py`. These diagrams are drawn from that data",
        "(`simulator/tools/charts.py`); a test fails when this page no longer matches it.",
        "`zread-sim charts COMMAND --format mermaid|dot|svg|png` draws one of them (svg and",
        "png need Graphviz's `dot` on PATH).",
        "",
        "How to read them:",
        "",
        "- A box is a chart state. Its title shows the `vm.state` a client sees when that",
        "  differs from the state's name (`zread state` where the vm has no `state`: the",
        "  state its errors name); `waits for ...` is the state's `waiting_for`, the",
        "  commands a client may send there (`quit` is answered by the session in every",
        "  state, so it has no edge); a `⏱` line is a timer the state arms on entry",
        "  (`after` a delay once, or `every` delay while the state holds).",
        "- A bold border marks a gate (a state that waits for a client); a dashed border,",
        "  a state the session leaves only by internal triggers.",
        "- An edge is one transition: `trigger [guard]`, `[not x]` for an `unless`. The",
        "  candidates of one trigger from one state are tried in chart order and the first",
        "  whose guard holds wins; `[else]` marks the fallback. An edge back to its own",
        "  state is internal (`dest: None`): the state is neither left nor entered again,",
        "  so its timers keep running.",
        "- A plain label is a client's command. Mermaid's state diagrams cannot draw a",
        "  dashed or styled transition (`linkStyle` is for flowcharts only), so internal",
        "  triggers are marked in their label instead: `⏱` a timer of the source state,",
        "  `▶` `_start`, fired once at start-up, `⚙` fired by the model itself (a delay it",
        "  schedules, or the answer to an effect). In the DOT output they are dashed.",
    ]
    for command in COMMANDS:
        parts += ["", f"## {command}", "", SUMMARIES.get(command, f"`zread {command}`.")]
        parts += ["", "```mermaid", mermaid(command).rstrip("\n"), "```"]
    return "\n".join(parts) + "\n"


# -- the command line ---------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = raising(ChartsError)(
        prog="zread-sim charts",
        add_help=False,
        description="Draw the chart of a zread command from its data.",
        epilog=f"docs/charts.md is written by:\n  {REGENERATE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", nargs="?", metavar="COMMAND", help=", ".join(COMMANDS))
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument(
        "--all", action="store_true", help="every chart (one file each in --out DIR)"
    )
    parser.add_argument("--docs", action="store_true", help="the page docs/charts.md")
    parser.add_argument(
        "--format",
        default="mermaid",
        metavar="|".join(FORMATS),
        help="mermaid (the default), dot, or svg/png drawn by Graphviz's dot",
    )
    parser.add_argument("--out", metavar="PATH", help="write here, not to stdout (png needs it)")
    return parser


def _ext(fmt: str) -> str:
    return {"mermaid": "mmd", "dot": "dot", "svg": "svg", "png": "png"}[fmt]


def _drawn(command: str, fmt: str) -> bytes:
    if fmt == "mermaid":
        return mermaid(command).encode()
    if fmt == "dot":
        return dot(command).encode()
    return render(command, fmt)


def _write(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as error:
        raise ChartsError(f"cannot write {path}: {error.strerror or error}") from error


def _outputs(args: argparse.Namespace) -> Iterator[tuple[str | None, bytes]]:
    """(path or None for stdout, bytes) of everything asked for; raises ChartsError."""
    fmt: str = args.format
    if fmt not in FORMATS:
        raise ChartsError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if sum([args.command is not None, args.all, args.docs]) != 1:
        raise ChartsError("give one of COMMAND, --all or --docs (see --help)")
    if args.docs:
        if fmt != "mermaid":
            raise ChartsError("--docs writes mermaid; leave out --format")
        yield args.out, docs_page().encode()
    elif args.all:
        if args.out is None and fmt in ("svg", "png"):
            raise ChartsError(f"--all --format {fmt} writes one file each: give --out DIR")
        if args.out is not None:
            try:
                os.makedirs(args.out, exist_ok=True)
            except OSError as error:
                raise ChartsError(f"cannot make {args.out}: {error.strerror or error}") from error
        for command in COMMANDS:
            data = _drawn(command, fmt)
            if args.out is None:
                comment = "%%" if fmt == "mermaid" else "//"
                yield None, f"{comment} zread {command}\n".encode() + data
            else:
                yield os.path.join(args.out, f"{command}.{_ext(fmt)}"), data
    else:
        if fmt == "png" and args.out is None:
            raise ChartsError("--format png is binary: give --out FILE")
        _chart(args.command)
        yield args.out, _drawn(args.command, fmt)


def main(
    argv: Sequence[str], *, stdout: IO[str] | None = None, stderr: IO[str] | None = None
) -> int:
    """``zread-sim charts COMMAND [--format F] [--out FILE]``, ``--all``, ``--docs``
    (``argv`` without the word ``charts``); the exit code: 0, or 2 with one line on
    ``stderr``."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(list(argv))
        if args.help:
            out.write(parser.format_help())
            return 0
        for path, data in _outputs(args):
            if path is None:
                out.write(data.decode())
            else:
                _write(path, data)
    except ChartsError as error:
        err.write(f"zread-sim charts: {error}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
