"""Diagrams of the six charts: ``zread-sim charts``, ``docs/charts.md``, SVG and PNG.

Owns: :func:`mermaid`, :func:`dot` and :func:`edges` of a command by name (the
drawing itself is :mod:`simulator.tools.charts_draw`'s, from the compiled chart
``statecharts.load_chart`` gives); :func:`render`, which turns the DOT text into SVG or
PNG with Graphviz's ``dot`` executable; :func:`docs_page`, the text of
``docs/charts.md``; and :func:`main`, the body of ``zread-sim charts``.
``docs/charts.md`` is regenerated with::

    python -m simulator.tools.charts --docs --out docs/charts.md

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
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import IO

from simulator.core.chart_specs import Chart
from simulator.errors import ConfigurationError
from simulator.tools import charts_draw
from simulator.tools.arguments import raising
from simulator.tools.charts_draw import Edge
from statecharts import COMMANDS, command_module, load_chart

FORMATS = ("mermaid", "dot", "svg", "png")
"""What ``--format`` takes; svg and png need Graphviz's ``dot`` on PATH."""
REGENERATE = "python -m simulator.tools.charts --docs --out docs/charts.md"
"""The command that writes ``docs/charts.md``."""


class ChartsError(ConfigurationError):
    """A diagram that cannot be made as asked: an unknown command or format (exit 2)."""


class RenderError(ChartsError):
    """SVG or PNG without Graphviz's ``dot`` on PATH, or ``dot`` failing."""


def _chart(command: str) -> Chart:
    if command not in COMMANDS:
        raise ChartsError(f"unknown command {command!r} (one of {', '.join(COMMANDS)})")
    return load_chart(command)


def edges(command: str) -> list[Edge]:
    """Every transition of ``command``'s chart, one per trigger, source and candidate,
    in chart order."""
    return charts_draw.edges(_chart(command))


def mermaid(command: str) -> str:
    """The mermaid ``stateDiagram-v2`` of ``command``'s chart, ending in a newline."""
    return charts_draw.mermaid(_chart(command))


def dot(command: str) -> str:
    """The Graphviz DOT graph of ``command``'s chart: internal triggers dashed."""
    return charts_draw.dot(_chart(command))


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
        parts += [
            "",
            f"## {command}",
            "",
            getattr(command_module(command), "ABOUT", f"`zread {command}`."),
        ]
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
        yield from _every_chart(fmt, args.out)
    else:
        if fmt == "png" and args.out is None:
            raise ChartsError("--format png is binary: give --out FILE")
        _chart(args.command)
        yield args.out, _drawn(args.command, fmt)


def _every_chart(fmt: str, out: str | None) -> Iterator[tuple[str | None, bytes]]:
    """``--all``: every chart, one file each in ``out``, or one after the other."""
    if out is None and fmt in ("svg", "png"):
        raise ChartsError(f"--all --format {fmt} writes one file each: give --out DIR")
    if out is not None:
        try:
            os.makedirs(out, exist_ok=True)
        except OSError as error:
            raise ChartsError(f"cannot make {out}: {error.strerror or error}") from error
    for command in COMMANDS:
        data = _drawn(command, fmt)
        if out is None:
            comment = "%%" if fmt == "mermaid" else "//"
            yield None, f"{comment} zread {command}\n".encode() + data
        else:
            yield os.path.join(out, f"{command}.{_ext(fmt)}"), data


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
