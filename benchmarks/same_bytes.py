"""Do two trees write the same bytes? Every command, built-in scenario and seed, compared.

Runs ``python -m simulator COMMAND [FLAGS] --stdio --speed 0 --scenario S --seed N
--no-files`` in each tree (its folder first on ``sys.path``; with no files every run
starts from its scenario's world, and nothing one run saves changes the next), answers
every gate with the tree's own reference client, and compares a digest of all it
wrote (the browse server's port, which the OS picks, masked). For a change that must
not change behaviour: check out the old commit beside this one (``git worktree add
../before HEAD~1``) and run

    python benchmarks/same_bytes.py ../before . [--seeds 2]

It prints one line per run that differs and a count; exit code 1 when any differs.
``hang`` is left out: it never ends, so there is no whole output to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

RUNS = [
    ("generate", ()),
    ("generate", ("-y",)),
    ("browse", ()),
    ("config", ()),
    ("login", ()),
    ("update", ()),
    ("version", ()),
]

DRIVER = r"""
import hashlib, json, os, re, selectors, subprocess, sys, time
tree, command, scenario, seed, *flags = sys.argv[1:]
sys.path.insert(0, tree)
try:
    from simulator.tools.client import ReferenceClient
except ImportError:
    from simulator.client import ReferenceClient
argv = [sys.executable, "-m", "simulator", command, *flags, "--stdio", "--speed", "0",
        "--scenario", scenario, "--seed", seed, "--no-files"]
child = subprocess.Popen(argv, cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
client, out, pending = ReferenceClient(), b"", b""
selector = selectors.DefaultSelector()
selector.register(child.stdout, selectors.EVENT_READ)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    if not selector.select(0.5):
        continue
    data = os.read(child.stdout.fileno(), 1 << 16)
    if not data:
        break
    out += data
    *lines, pending = (pending + data).split(b"\n")
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "waiting_for" in event:
            answer = client.answer(event)
            if answer is not None:
                try:
                    child.stdin.write(answer)
                    child.stdin.flush()
                except BrokenPipeError:
                    pass
code = child.wait(5)
out = re.sub(rb"127\.0\.0\.1:[0-9]+", b"127.0.0.1:PORT", out)
print(json.dumps({"digest": hashlib.sha256(out).hexdigest(), "bytes": len(out), "code": code}))
"""


def run(tree: str, command: str, flags: tuple[str, ...], scenario: str, seed: int) -> Any:
    argv = [sys.executable, "-c", DRIVER, tree, command, scenario, str(seed), *flags]
    done = subprocess.run(argv, capture_output=True, check=True, text=True)
    return json.loads(done.stdout)


def scenarios(tree: str) -> list[str]:
    folder = os.path.join(tree, "simulator", "scenario", "builtin")
    if not os.path.isdir(folder):
        folder = os.path.join(tree, "simulator", "scenarios")
    names = sorted(name.removesuffix(".toml") for name in os.listdir(folder))
    return [name for name in names if name != "hang"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    names = sorted(set(scenarios(args.old)) & set(scenarios(args.new)))
    begin, total, differ = time.perf_counter(), 0, 0
    for command, flags in RUNS:
        for scenario in names:
            for seed in range(args.seeds):
                old = run(args.old, command, flags, scenario, seed)
                new = run(args.new, command, flags, scenario, seed)
                total += 1
                if old != new:
                    differ += 1
                    where = f"{command} {' '.join(flags)} {scenario} seed {seed}"
                    print(f"differs: {where}: {old} {new}")
    took = time.perf_counter() - begin
    print(
        f"{total} runs ({len(names)} scenarios x {len(RUNS)} commands x {args.seeds} seeds), "
        f"{differ} differ, {took:.0f} s"
    )
    raise SystemExit(1 if differ else 0)


if __name__ == "__main__":
    main()
