"""What a test pays per session: zread-sim's fixtures against pytest-subprocess.

One default ``generate -y`` session per test (24 events, ~42 KB), served seven ways,
interleaved in one run:

- **A** ``zread_sim``, files on: what the fixture does per test. A fresh temporary
  folder with ``home`` and ``project`` in it, ``ZreadSim(home=..., project=...)``,
  ``start("generate", "-y")``, ``wait_done()``, the events read, ``close()``. Creating
  the folders is timed; removing them is not (pytest keeps a test's ``tmp_path``; the
  folders are removed after the run). The fixture's folder comes from
  ``tmp_path_factory.mktemp``, which also lists its base folder to number the new one
  (more so as a run's tests add folders): here ``tempfile.mkdtemp``, without that.
- **B** ``zread_sim``, files off: the same with no ``home`` and ``project`` (nothing is
  written anywhere) and no folders.
- **C** pytest-subprocess, per test: what a test with the ``fp`` fixture pays. The
  fixture's ``FakeProcess`` entered (which rebinds ``subprocess.Popen`` in every loaded
  module that holds it: its cost grows with the modules loaded, fewer here than in a
  pytest process) and, in the test, ``fp.register(["zread", "generate", "-y",
  "--stdio"], stdout=<the lines>)``, then the client's code: ``subprocess.Popen`` with
  stdin and stdout piped, stdout read line by line, each line ``json.loads``-ed, up to
  the one with ``"done": true``, ``wait()``; then the fixture's exit.
- **C0** pytest-subprocess, the test's body alone: C without the fixture's enter and
  exit (done outside the timed region).
- **D** ``zread_popen``, per call: the client's own code as in C (``subprocess.Popen``
  of ``zread generate -y --stdio``, stdout read line by line and decoded up to done,
  ``wait()``), served in-process by :class:`simulator.popen.Launches` (installed and
  removed outside the timed region, as the fixture does once per test), in the
  environment ``zread_bin`` gives a test: ``ZREAD_SIM_SPEED=0``, a fresh HOME and
  project each call (``cwd=``, files on), a journal. Creating the folders is timed.
- **E** ``zread_bin`` without its warm server (``--zread-no-server``), per call: D's
  code and environment, with nothing installed: the launch runs the ``zread`` script
  ``zread_bin`` writes (first on PATH), a process that imports the simulator.
- **E'** ``zread_bin`` as it runs by default, per call: E with ``ZREAD_SIM_SERVER`` set
  to a warm server started before timing (``python -m simulator serve``), so the
  script hands its run to a child forked from it.

The client's decoding is in every peer once: ``SimSession`` decodes each line it
writes with ``json.loads`` into ``session.events`` (what a test reads), so A and B do
not decode again; C and C0 decode in the client's loop. The lines pytest-subprocess
serves are recorded once before timing from a files-off session, and every session's
events, A to C0, are checked equal to them (outside the timed region). D and E run in
real time at speed 0, where a line and the timers due interleave as in a process (a
task's state may differ from the virtual run's in between): theirs are checked equal to
those of one process (E) run before timing.

Each round runs one session of every peer, the order rotated by one each round so
each peer follows each other alike, and drift in the machine's speed hits all of them.
Before each timed session the collector runs (untimed), so a session pays the
collections its own garbage causes, not the previous peer's. The process is pinned to
one CPU. Figures: median, p90 and mean per session; a ratio is the median of the
per-round ratios (a peer's session over C's, or C0's, of the same round). Targets:
A <= 6x C, B <= 3x C, D <= 6x C, each also given against C0, and E >= 10x D (how many
times faster D is than E, the median of the per-round E/D). Nothing asserts on time.

    python benchmarks/fixture.py [--sessions 200] [--only files,memory,fp,fp-body,popen,bin]
        [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import verdict
from pytest_subprocess import FakeProcess

from simulator.hosts.executable import write_zread_executable
from simulator.launcher import VARIABLE
from simulator.popen import Launches
from simulator.runners.virtual import ZreadSim
from simulator.tools.serve import ServerProcess

ARGV = ["zread", "generate", "-y", "--stdio"]
TARGETS = {"files": 6.0, "memory": 3.0, "popen": 6.0}
"""The most each zread-sim peer may cost, as a multiple of pytest-subprocess's."""
FASTER = 10.0
"""How many times faster than ``zread_bin`` (E) ``zread_popen`` (D) is to be, at least."""

PEERS = {
    "files": "A  zread_sim, files on",
    "memory": "B  zread_sim, files off",
    "fp": "C  pytest-subprocess, per test",
    "fp-body": "C0 pytest-subprocess, test body",
    "popen": "D  zread_popen, per call",
    "bin": "E  zread_bin, cold, per call",
    "bin-warm": "E' zread_bin, warm, per call",
}

Events = list[dict[str, Any]]


def record() -> tuple[list[bytes], Events]:
    """The lines (without their newlines) and the events of a files-off session."""
    sim = ZreadSim()
    session = sim.start("generate", "-y")
    session.wait_done()
    sim.close()
    lines = [line.data.rstrip(b"\n") for line in session.transcript if line.direction == "out"]
    return lines, session.events


def client(fp: FakeProcess, lines: list[bytes]) -> Events:
    """The test's body with pytest-subprocess: register, then the client's own code."""
    fp.register(ARGV, stdout=lines)
    proc = subprocess.Popen(ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    events = read_to_done(proc)
    proc.wait()
    return events


def read_to_done(proc: subprocess.Popen[bytes]) -> Events:
    """The client's reading, the same in every peer that spawns: each line decoded, up
    to the event with ``done``."""
    assert proc.stdout is not None
    events = []
    for line in proc.stdout:
        event = json.loads(line)
        events.append(event)
        if event["done"]:
            break
    return events


def client_spawns(cwd: str) -> Events:
    """The client's own code under zread_popen and zread_bin: it spawns zread itself."""
    proc = subprocess.Popen(ARGV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd)
    assert proc.stdin is not None
    assert proc.stdout is not None
    events = read_to_done(proc)
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    return events


class Peers:
    """One session of a peer each call: (seconds, its events). Only the timed region
    is timed; what is around it (the collector, C0's enter and exit) is not."""

    def __init__(self, lines: list[bytes], base: str) -> None:
        self.lines = lines
        self.base = base
        self.launches = Launches()
        self.server = ""
        """The socket of the warm server E' hands its runs to."""
        folder = os.path.join(base, "bin")
        os.mkdir(folder)
        write_zread_executable(Path(folder))
        os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
        os.environ["ZREAD_SIM_SPEED"] = "0"

    def places(self) -> tuple[str, str, str]:
        """A fresh folder with ``home`` and ``project`` in it: (folder, home, project)."""
        root = tempfile.mkdtemp(prefix="zread-sim-", dir=self.base)
        home, project = os.path.join(root, "home"), os.path.join(root, "project")
        os.mkdir(home)
        os.mkdir(project)
        return root, home, project

    def files(self) -> tuple[float, Events]:
        gc.collect()
        begin = time.perf_counter()
        _, home, project = self.places()
        sim = ZreadSim(home=home, project=project)
        session = sim.start("generate", "-y")
        session.wait_done()
        events = session.events
        sim.close()
        return time.perf_counter() - begin, events

    def memory(self) -> tuple[float, Events]:
        gc.collect()
        begin = time.perf_counter()
        sim = ZreadSim()
        session = sim.start("generate", "-y")
        session.wait_done()
        events = session.events
        sim.close()
        return time.perf_counter() - begin, events

    def spawned(self) -> tuple[float, Events]:
        """D's and E's timed region: fresh folders and a journal as zread_bin's, then
        the client's code."""
        gc.collect()
        begin = time.perf_counter()
        root, home, project = self.places()
        os.environ["ZREAD_SIM_HOME"] = home
        os.environ["ZREAD_SIM_JOURNAL"] = os.path.join(root, "journal.jsonl")
        events = client_spawns(project)
        return time.perf_counter() - begin, events

    def warm(self) -> tuple[float, Events]:
        """E': E with the warm server's socket in the environment the script sees."""
        os.environ[VARIABLE] = self.server
        try:
            return self.spawned()
        finally:
            del os.environ[VARIABLE]

    def popen(self) -> tuple[float, Events]:
        self.launches.install()
        try:
            return self.spawned()
        finally:
            self.launches.uninstall()

    def fp(self) -> tuple[float, Events]:
        gc.collect()
        begin = time.perf_counter()
        with FakeProcess() as fp:
            events = client(fp, self.lines)
        return time.perf_counter() - begin, events

    def fp_body(self) -> tuple[float, Events]:
        fp = FakeProcess()
        fp.__enter__()
        try:
            gc.collect()
            begin = time.perf_counter()
            events = client(fp, self.lines)
            seconds = time.perf_counter() - begin
        finally:
            fp.__exit__()
        return seconds, events


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10, method="inclusive")[-1]


def show(seconds: float) -> str:
    return f"{seconds * 1e3:7.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:7.1f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200, help="timed sessions per peer")
    parser.add_argument("--warmup", type=int, default=5, help="untimed sessions per peer first")
    parser.add_argument(
        "--only",
        default=",".join(PEERS),
        help=f"the peers to run, comma-separated, of {','.join(PEERS)}",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PEERS))
    if unknown or not names:
        parser.error(f"--only: {', '.join(unknown) or 'nothing'}; the peers are {', '.join(PEERS)}")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    lines, expected = record()
    size = sum(len(line) + 1 for line in lines)
    base = tempfile.mkdtemp(prefix="zread-bench-fixture-")
    server: ServerProcess | None = None
    try:
        peers = Peers(lines, base)
        run: dict[str, Callable[[], tuple[float, Events]]] = {
            "files": peers.files,
            "memory": peers.memory,
            "fp": peers.fp,
            "fp-body": peers.fp_body,
            "popen": peers.popen,
            "bin": peers.spawned,
            "bin-warm": peers.warm,
        }
        if "bin-warm" in names:
            server = ServerProcess()
            if not server.path:
                raise SystemExit("the warm server did not start")
            peers.server = server.path
        real = {"popen", "bin", "bin-warm"}
        spawned = peers.spawned()[1] if real & set(names) else []
        wanted = {name: spawned if name in real else expected for name in names}
        for name in names:
            for _ in range(args.warmup):
                _, events = run[name]()
                assert events == wanted[name], f"{name}: not the recorded events"
        times: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.sessions):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                seconds, events = run[name]()
                if events != wanted[name]:
                    raise SystemExit(f"{name}, round {round_}: not the recorded events")
                times[name].append(seconds)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)

    def ratio(name: str, peer: str) -> float | None:
        if peer not in times or name not in times:
            return None
        return statistics.median(a / b for a, b in zip(times[name], times[peer], strict=True))

    figures: dict[str, Any] = {
        "command": "generate -y --stdio, default scenario",
        "events": len(expected),
        "bytes": size,
        "sessions": args.sessions,
        "peers": {
            name: {
                "label": PEERS[name],
                "median_us": statistics.median(times[name]) * 1e6,
                "p90_us": p90(times[name]) * 1e6,
                "mean_us": statistics.fmean(times[name]) * 1e6,
                "vs_fp": ratio(name, "fp"),
                "vs_fp_body": ratio(name, "fp-body"),
            }
            for name in names
        },
        "targets": {},
    }
    for name, most in TARGETS.items():
        if name not in times:
            continue
        for peer in ("fp", "fp-body"):
            value = ratio(name, peer)
            if value is not None:
                figures["targets"][f"{name} <= {most:g}x {peer}"] = {
                    "ratio": value,
                    "met": value <= most,
                }
    faster = {peer: ratio(peer, "popen") for peer in ("bin", "bin-warm")}
    for peer, value in faster.items():
        if value is not None:
            figures["targets"][f"{peer} >= {FASTER:g}x popen"] = {
                "ratio": value,
                "met": value >= FASTER,
            }
    if args.json:
        print(json.dumps(figures, indent=2))
        return

    print(
        f"generate -y --stdio, default scenario: {len(expected)} events, {size:,} bytes a "
        f"session; {args.sessions} sessions per peer, interleaved (order rotated each "
        "round), one CPU"
    )
    shown = [key for key, peer in (("vs_fp", "fp"), ("vs_fp_body", "fp-body")) if peer in times]
    heads = {"vs_fp": "x C", "vs_fp_body": "x C0"}
    print(
        f"{'peer':33} {'median':>10} {'p90':>10} {'mean':>10}"
        + "".join(f" {heads[key]:>7}" for key in shown)
    )
    for name in names:
        peer = figures["peers"][name]
        print(
            f"{PEERS[name]:33} {show(peer['median_us'] / 1e6):>10} "
            f"{show(peer['p90_us'] / 1e6):>10} {show(peer['mean_us'] / 1e6):>10}"
            + "".join(f" {peer[key]:6.2f}x" for key in shown)
        )
    if shown:
        print(", ".join(heads[key] for key in shown) + ": the median of the per-round ratios")
    for name, most in TARGETS.items():
        parts = []
        for peer, short in (("fp", "C"), ("fp-body", "C0")):
            value = ratio(name, peer)
            if value is not None:
                parts.append(f"{value:.2f}x {short}, {verdict(value <= most)}")
        if parts:
            print(f"target {PEERS[name][:1]} <= {most:g}x pytest-subprocess: " + "; ".join(parts))
    for peer, value in faster.items():
        if value is not None:
            letter = PEERS[peer].split()[0]
            print(
                f"target D >= {FASTER:g}x faster than {letter}: {value:.1f}x, "
                f"{verdict(value >= FASTER)}"
            )


if __name__ == "__main__":
    main()
