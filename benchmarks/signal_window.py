"""How long a spawned zread is deaf to SIGTERM: from the spawn to the moment it catches it.

For each command, N processes are spawned as a hub spawns them (``python -m
simulator``, and the ``zread`` console script when one is installed beside the
interpreter; stdin a pipe left open, ``--no-files``), and ``/proc/<pid>/status`` is
polled until ``SigCgt`` shows SIGTERM and SIGHUP caught: that is the window in which
a signal still kills the process (the interpreter's own start-up, the launcher, then
the program's first instruction). Beside it, in the same run: the time to the first
event (when the session exists), and the floor: a Python program whose first line
catches the two signals, polled the same way (the interpreter's own start-up, the
window no Python program can close).

    python benchmarks/signal_window.py [--runs 30] [--commands generate,version]

No target: the window is reported, and the rule it serves (FIDELITY.md section 4)
starts where it ends. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from _common import python, wall

CAUGHT = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))


def caught(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16) & CAUGHT == CAUGHT
    except OSError:
        pass
    return False


FLOOR = (
    "import _signal, sys; _signal.signal(1, print); _signal.signal(15, print);"
    " sys.stdout.write('x\\n'); sys.stdout.flush(); sys.stdin.read()"
)
"""A program that catches SIGHUP and SIGTERM first thing, writes a line, waits."""


def one(launcher: list[str], command: str, home: str) -> tuple[float, float]:
    """(spawn → signals caught, spawn → first event), in seconds."""
    argv = [*launcher, command, "--stdio", "--no-files"]
    env = {**os.environ, "HOME": home}
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        while not caught(proc.pid):
            time.sleep(0.0001)
        deaf = time.perf_counter() - start
        assert proc.stdout is not None
        select.select([proc.stdout], [], [], 30)
        first = time.perf_counter() - start
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream:
                stream.close()
    return deaf, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--commands", default="generate,version")
    args = parser.parse_args()
    floor = [wall([python(), "-c", "pass"]) for _ in range(args.runs)]
    print(f"python -c pass {statistics.median(floor) * 1e3:6.1f} ms (wall, start to exit)")
    with tempfile.TemporaryDirectory() as home:
        samples = [one([python(), "-c", FLOOR, "--"], "x", home)[0] for _ in range(args.runs)]
    caught = statistics.median(samples) * 1e3
    print(f"floor: a program catching them first, caught at {caught:6.1f} ms")
    launchers = {"python -m simulator": [python(), "-m", "simulator"]}
    script = os.path.join(os.path.dirname(python()), "zread")
    if os.path.exists(script):  # the console script pip installed beside the interpreter
        launchers["zread"] = [script]
    with tempfile.TemporaryDirectory() as home:
        for name, launcher in launchers.items():
            for command in args.commands.split(","):
                samples = [one(launcher, command, home) for _ in range(args.runs)]
                deaf = statistics.median(s[0] for s in samples) * 1e3
                first = statistics.median(s[1] for s in samples) * 1e3
                print(
                    f"{name:<20} {command:<9} signals caught at {deaf:6.1f} ms,"
                    f" first event at {first:6.1f} ms (medians of {args.runs}, from the spawn)"
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
