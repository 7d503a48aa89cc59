"""Instructions per generate event in the run phase, counted by cachegrind.

A figure that does not move with machine load: ``valgrind --tool=cachegrind
--cache-sim=no`` counts the instructions a process executes (``I refs``), whatever
else the machine runs. A small script runs N complete ``generate -y`` sessions in
virtual time with the bare ``Session`` (``build_session``, ``start``, then
``advance(next_deadline())`` until nothing is pending; timers fire in order, nothing
waits), seeds 0..N-1, and prints how many events they wrote. It runs under cachegrind
twice, with N1 and N2 sessions, and the figure is

    (Ir(N2) - Ir(N1)) / (events(N2) - events(N1))

so what both runs do alike cancels: interpreter start-up, the imports (with
``PYTHONDONTWRITEBYTECODE`` set, their compilation too: the same modules are compiled
in both runs), the scenario's loading and the first sessions' warm-up (lazy imports,
caches). What is left is the cost of the N2 - N1 further sessions, their building and
start included, spread over their events; it is also given per session.
``PYTHONHASHSEED=0`` makes both runs lay out their dicts and sets alike.

Target: <= 150,000 instructions per event (default scenario). ``--pages N`` uses a
scenario of N pages (written to a temporary folder) instead of the default one.
``--against DIR`` counts another checkout the same way (``PYTHONPATH=DIR``), beside
this one. Without valgrind on PATH the script says so and exits 0.

    python benchmarks/instructions.py [--sessions 20,60] [--pages N] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from _common import ROOT, pages_scenario, python, verdict

TARGET = 150_000

RUN = """
import sys
from simulator.scenario import load_scenario
try:
    from simulator.launch import build_session
except ImportError:  # a tree from before build_session
    from simulator.core.session import Session
    from simulator.launch import parse_flags
    from statecharts import load_chart

    def build_session(command, args, *, scenario, seed):
        return Session(load_chart(command), scenario, flags=parse_flags(command, args), seed=seed)

sessions, ref = int(sys.argv[1]), sys.argv[2]
scenario = load_scenario(ref)
events = 0
for seed in range(sessions):
    session = build_session("generate", ("-y",), scenario=scenario, seed=seed)
    events += len(session.start())
    while (deadline := session.next_deadline()) is not None:
        events += len(session.advance(deadline))
    assert session.done, seed
print(events)
"""

_SUMMARY = re.compile(r"^summary:\s+(\d+)", re.MULTILINE)
_I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(valgrind: str, tree: str, sessions: int, scenario: str, folder: str) -> tuple[int, int]:
    """(instructions, events) of one run of ``sessions`` sessions under cachegrind."""
    out = os.path.join(folder, f"cachegrind.{os.path.basename(tree)}.{sessions}.out")
    run = subprocess.run(
        [
            valgrind,
            "--tool=cachegrind",
            "--cache-sim=no",
            f"--cachegrind-out-file={out}",
            python(),
            "-c",
            RUN,
            str(sessions),
            scenario,
        ],
        cwd=folder,
        env=os.environ | {"PYTHONPATH": tree, "PYTHONHASHSEED": "0"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise SystemExit(f"{tree}: {sessions} sessions failed:\n{run.stderr[-3000:]}")
    events = int(run.stdout.split()[-1])
    with open(out) as f:
        found = _SUMMARY.search(f.read())
    if found is None:  # the out file's summary line, else valgrind's own total
        refs = _I_REFS.search(run.stderr)
        if refs is None:
            raise SystemExit(f"no instruction count in cachegrind's output:\n{run.stderr}")
        return int(refs.group(1).replace(",", "")), events
    return int(found.group(1)), events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="20,60", help="N1,N2 (default 20,60)")
    parser.add_argument("--pages", type=int, default=0, help="pages (0: the default scenario)")
    parser.add_argument("--against", metavar="DIR", help="another checkout to count beside this")
    args = parser.parse_args()
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("instructions.py: skipped, valgrind is not installed (no figure)")
        return
    n1, n2 = (int(n) for n in args.sessions.split(","))
    if not 0 <= n1 < n2:
        parser.error("--sessions N1,N2 needs 0 <= N1 < N2")
    trees = {"this tree": ROOT}
    if args.against:
        trees[args.against] = os.path.abspath(args.against)

    with tempfile.TemporaryDirectory(prefix="instructions-") as folder:
        scenario = "default"
        if args.pages:
            scenario = pages_scenario(folder, args.pages)
        where = f"{args.pages} pages" if args.pages else "default scenario"
        print(
            f"generate -y, {where}, bare Session in virtual time; cachegrind "
            f"(--cache-sim=no), {n2} sessions minus {n1}"
        )
        for name, tree in trees.items():
            ir1, ev1 = count(valgrind, tree, n1, scenario, folder)
            ir2, ev2 = count(valgrind, tree, n2, scenario, folder)
            if ev2 <= ev1:
                raise SystemExit(f"{name}: no more events with {n2} sessions than {n1}")
            per_event = (ir2 - ir1) / (ev2 - ev1)
            per_session = (ir2 - ir1) / (n2 - n1)
            print(f"{name}:")
            print(f"  {n1:4} sessions: {ir1:15,} instructions, {ev1:6,} events")
            print(f"  {n2:4} sessions: {ir2:15,} instructions, {ev2:6,} events")
            print(
                f"  per session: {per_session:12,.0f} instructions "
                f"({(ev2 - ev1) / (n2 - n1):.1f} events a session)"
            )
            print(
                f"  per event:   {per_event:12,.0f} instructions; target <= {TARGET:,}: "
                f"{verdict(per_event <= TARGET)}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
