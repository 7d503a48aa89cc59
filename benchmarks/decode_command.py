"""Decoding one command line as the session does: ``decode_command``, then
``decode_params`` into the command's params struct. Target: the common line (keys
spelled exactly, in lower case) no slower than the tree before Go's decoding rules
(within noise, a ratio near 1.0).

Lines:

- **common**: what clients send: ``quit``, ``select_action``, ``retry``,
  ``update_fields`` (three fields, one value with capitals, which sends it through
  the closer look at the bytes) and ``select_version``;
- **go** (this tree's figures only; a tree from before refuses or misreads them):
  ``{"Type":"quit"}``, a ``null`` region, folded keys in ``params`` and a line with an
  unknown key: the lines Go's rules are applied to by hand.

Times are ``time.perf_counter_ns`` around ``--lines`` decodes of one line divided by
their number; ``--rounds`` rounds, each tree in turn within a round, and the median
round is reported. ``--against DIR`` times the envelope of another tree (its
``simulator/core/envelope.py``, e.g. ``git archive HEAD | tar -x -C /tmp/before``) in
the same rounds, and prints this tree's time over it.

Times move with the machine's load; ``--instructions`` counts instead, with
``valgrind --tool=cachegrind --cache-sim=no`` (as instructions.py does): one process
per line and tree decodes the line N1 times, another N2 times, and the figure is the
difference over N2 - N1, which start-up and warm-up do not enter (the garbage
collector is off while it decodes).

    python benchmarks/decode_command.py [--lines 20000] [--rounds 9] [--against DIR]
    python benchmarks/decode_command.py --instructions [--lines 20000] [--against DIR]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import msgspec
from _common import ROOT

from simulator.core import envelope
from statecharts.browse import SelectVersionParams
from statecharts.config import UpdateFields
from statecharts.generate import ActionParams, RetryParams
from statecharts.login import RegionParams


class NoParams(msgspec.Struct):
    """The params of a command that takes none, as the session decodes them."""


COMMON: dict[str, tuple[bytes, Any]] = {
    "quit": (b'{"type":"quit"}', NoParams),
    "select_action": (b'{"type":"select_action","params":{"action":"generate"}}', ActionParams),
    "retry": (b'{"type":"retry","params":{"task_id":3}}', RetryParams),
    "update_fields": (
        b'{"type":"update_fields","params":{"fields":'
        b'{"language":"zh","max_retries":"3","llm_model":"GLM-4.6"}}}',
        UpdateFields,
    ),
    "select_version": (
        b'{"type":"select_version","params":{"wiki_id":"2024-05-01T10:00:00Z"}}',
        SelectVersionParams,
    ),
}
GO: dict[str, tuple[bytes, Any]] = {
    "Type": (b'{"Type":"quit"}', NoParams),
    "null region": (b'{"type":"select_region","params":{"region":null}}', RegionParams),
    "folded params": (
        b'{"TYPE":"update_fields","PARAMS":{"FIELDS":{"language":"zh"}}}',
        UpdateFields,
    ),
    "unknown key": (b'{"id":7,"type":"retry","params":{"task_id":3}}', RetryParams),
}


def load_envelope(tree: str) -> ModuleType:
    """The envelope module of another tree, under a name of its own."""
    path = os.path.join(tree, "simulator", "core", "envelope.py")
    spec = importlib.util.spec_from_file_location("envelope_against", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where msgspec looks up its annotations
    spec.loader.exec_module(module)
    return module


def per_line_ns(module: Any, line: bytes, params_type: Any, count: int) -> float:
    decode_command: Callable[[bytes], Any] = module.decode_command
    decode_params: Callable[[bytes, Any], Any] = module.decode_params
    start = time.perf_counter_ns()
    for _ in range(count):
        decode_params(decode_command(line).params, params_type)
    return (time.perf_counter_ns() - start) / count


def decode_n(name: str, count: int, tree: str | None) -> None:
    """The child of --instructions: decode one line ``count`` times."""
    module: Any = load_envelope(tree) if tree else envelope
    line, params_type = {**COMMON, **GO}[name]
    per_line_ns(module, line, params_type, 10)  # warm: plans, caches
    gc.disable()  # a collection now and then would count as much as the lines
    per_line_ns(module, line, params_type, count)


_SUMMARY = re.compile(rb"^summary:\s+(\d+)", re.MULTILINE)


def instructions(name: str, count: int, tree: str | None, folder: str) -> int:
    """Instructions a process executes decoding line ``name`` ``count`` times."""
    out = os.path.join(folder, "cachegrind.out")
    argv = [sys.executable, os.path.abspath(__file__), "--child", name, str(count)]
    subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}"]
        + argv
        + ([tree] if tree else []),
        env=os.environ | {"PYTHONHASHSEED": "0", "PYTHONPATH": ROOT},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
    )
    with open(out, "rb") as f:
        found = _SUMMARY.search(f.read())
    assert found is not None
    return int(found.group(1))


def count_instructions(lines: int, against: str | None) -> None:
    trees: dict[str, str | None] = {"this": None}
    if against:
        trees["against"] = os.path.abspath(against)
    low = lines // 10
    print(f"instructions per line (cachegrind, {lines} decodes minus {low})")
    print(f"{'line':<16} {'this tree':>12}" + f" {'against':>12} {'ratio':>7}" * bool(against))
    ratios = []
    with tempfile.TemporaryDirectory(prefix="decode-command-") as folder:
        for name in {**COMMON, **GO}:
            per: dict[str, float] = {}
            for tree, where in trees.items():
                if tree != "this" and name in GO:
                    continue
                high_ir = instructions(name, lines, where, folder)
                low_ir = instructions(name, low, where, folder)
                per[tree] = (high_ir - low_ir) / (lines - low)
            row = f"{name:<16} {per['this']:>12,.0f}"
            if "against" in per:
                ratios.append(per["this"] / per["against"])
                row += f" {per['against']:>12,.0f} {per['this'] / per['against']:>7.2f}"
            print(row)
    if ratios:
        print(f"common lines, this tree over the other: {statistics.geometric_mean(ratios):.2f}x")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        decode_n(argv[1], int(argv[2]), argv[3] if len(argv) > 3 else None)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--against", metavar="DIR", help="another tree to time side by side")
    parser.add_argument("--instructions", action="store_true", help="count with cachegrind")
    args = parser.parse_args(argv)
    if args.instructions:
        if shutil.which("valgrind") is None:
            print("decode_command.py --instructions: valgrind is not installed (no figure)")
            return 0
        count_instructions(args.lines, args.against)
        return 0
    trees: dict[str, Any] = {"this": envelope}
    if args.against:
        trees["against"] = load_envelope(args.against)
    cases = {**COMMON, **GO}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, (line, params_type) in cases.items():
            for tree, module in trees.items():
                if tree != "this" and name in GO:
                    continue
                sample = per_line_ns(module, line, params_type, args.lines)
                times.setdefault((name, tree), []).append(sample)
    print(
        f"{'line':<16} {'this tree':>12}" + (f" {'against':>12} {'ratio':>7}" * bool(args.against))
    )
    ratios = []
    for name in cases:
        this = statistics.median(times[name, "this"])
        row = f"{name:<16} {this / 1000:>9.2f} us"
        if (name, "against") in times:
            other = statistics.median(times[name, "against"])
            ratios.append(this / other)
            row += f" {other / 1000:>9.2f} us {this / other:>7.2f}"
        print(row)
    if ratios:
        print(f"common lines, this tree over the other: {statistics.geometric_mean(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
