"""Warm start: a ``zread`` handed to a warm server (``zread-sim serve``), beside its floors.

Timed from spawn to exit, interleaved in one run so that all see the same machine load:

- ``python -c pass``, the floor of ``zread version --stdio``;
- ``zread version --stdio`` through the warm server (``ZREAD_SIM_SERVER`` set);
- a replay script: a Python program that writes the bytes of one ``zread generate
  --stdio -y --speed 0 --no-files`` run to stdout, the floor of the short generate;
- ``zread generate --stdio -y --speed 0 --no-files`` through the warm server, read to
  its end (stdout is a pipe the benchmark drains, as a client's is);
- the same two commands without the server (the cold start, for comparison).

``zread`` is the console script beside the interpreter (``--python``: a user's venv,
``python3 -m venv V && V/bin/pip install .``), run from a scratch folder, so the
installed package is the one timed, and the server is ``python -m simulator serve``
of that interpreter. Reported: the median of each, and the median of the per-pair
ratios (each run over the floor run just before it). Targets: served, <= 1.6x each
floor; ``version`` cold, <= 4x ``python -c pass``.

    python benchmarks/warm_start.py [--runs 30] [--python EXE] [--script | --warm]

``--script`` times the script ``zread_bin`` writes (``simulator.hosts.executable``,
its ``/bin/sh`` trampoline and the server baked in) instead of the console script.
``--warm`` times the ``zread`` that ``zread-sim install DIR --warm`` writes, nothing
started for it: its first launch (not timed) starts the user's own server, in a
private ``XDG_RUNTIME_DIR`` of the benchmark's; "served" is every launch after it, and
the benchmark waits at the end for that server to end by itself once idle.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import ROOT, median_ms, verdict
from _common import python as this_python

TARGET = 1.6
COLD_TARGET = 4.0
WARM_IDLE = 3.0
"""``--warm``: the idle seconds of the server the first launch starts."""
VERSION = ["version", "--stdio"]
GENERATE = ["generate", "--stdio", "-y", "--speed", "0", "--no-files"]


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, bytes]:
    """Seconds from spawn to exit, stdin /dev/null, stdout read to its end."""
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=True
    )
    return time.perf_counter() - start, done.stdout


def start_server(python: str, env: dict[str, str], cwd: str) -> tuple[subprocess.Popen[bytes], str]:
    server = subprocess.Popen(
        [python, "-m", "simulator", "serve"],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert server.stdout is not None
    line = server.stdout.readline().decode().strip()
    name, _, path = line.partition("=")
    if name != "ZREAD_SIM_SERVER":
        server.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return server, path


def zread_script(python: str, folder: str, server: str) -> str:
    """The script zread_bin writes, for ``python``, with the server baked in."""
    code = (
        "import sys; from pathlib import Path; "
        "from simulator.hosts.executable import write_zread_executable; "
        f"print(write_zread_executable(Path({folder!r}), {{'ZREAD_SIM_SERVER': {server!r}}}))"
    )
    done = subprocess.run([python, "-c", code], cwd=folder, capture_output=True, check=True)
    return done.stdout.decode().strip()


def install_warm(python: str, folder: str, env: dict[str, str]) -> str:
    """``zread-sim install FOLDER/bin --warm`` of ``python``: the script's path."""
    done = subprocess.run(
        [
            python,
            "-m",
            "simulator",
            "install",
            os.path.join(folder, "bin"),
            "--warm",
            "--warm-idle",
            str(WARM_IDLE),
        ],
        env=env,
        cwd=folder if python != this_python() else ROOT,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().strip()


def wait_for(socket_folder: str, there: bool, timeout: float = 60.0) -> None:
    """Until a server's socket is in ``socket_folder`` (``there``) or none is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = os.listdir(socket_folder) if os.path.isdir(socket_folder) else []
        if any(name.endswith(".sock") for name in names) == there:
            return
        time.sleep(0.02)
    raise SystemExit(f"the warm server did not {'start' if there else 'end'} in {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--python", metavar="EXE", help="the interpreter (default: this)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--script", action="store_true", help="time zread_bin's script")
    how.add_argument("--warm", action="store_true", help="time a zread installed --warm")
    args = parser.parse_args()
    python = args.python or this_python()
    scratch = tempfile.mkdtemp(prefix="warm-start-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    env["HOME"] = scratch
    cwd = scratch if args.python else ROOT  # this tree's package when no venv is named
    server: subprocess.Popen[bytes] | None = None
    sockets = os.path.join(scratch, "run", "zread-sim")
    if args.warm:
        os.mkdir(os.path.join(scratch, "run"), 0o700)
        env["XDG_RUNTIME_DIR"] = os.path.join(scratch, "run")
        zread = install_warm(python, scratch, env)
        served = dict(env)
        timed([zread, *VERSION], served, scratch)  # the first launch: starts the server
        wait_for(sockets, there=True)
    else:
        server, path = start_server(python, env, cwd)
        served = env | {"ZREAD_SIM_SERVER": path}
    try:
        if args.script:
            zread = zread_script(python, scratch, path)
        elif not args.warm:
            zread = os.path.join(os.path.dirname(python), "zread")
        cold = env | {"ZREAD_SIM_SERVER": ""}  # set, so a baked server is not used either
        _, expected = timed([zread, *GENERATE], cold, scratch)
        replay = os.path.join(scratch, "replay.py")
        with open(replay, "w", encoding="utf-8") as file:
            file.write(f"import sys\nsys.stdout.buffer.write({expected!r})\n")
        plans = {
            "python -c pass": ([python, "-c", "pass"], env, None),
            "version, served": ([zread, *VERSION], served, "python -c pass"),
            "version, cold": ([zread, *VERSION], cold, "python -c pass"),
            "replay script": ([python, replay], env, None),
            "generate, served": ([zread, *GENERATE], served, "replay script"),
            "generate, cold": ([zread, *GENERATE], cold, "replay script"),
        }
        for label, (argv, plan_env, _) in plans.items():  # once each before timing
            _, out = timed(argv, plan_env, scratch)
            if label.startswith("generate") and out != expected:
                raise SystemExit(f"{label}: not the bytes of the run it is compared with")
        times: dict[str, list[float]] = {label: [] for label in plans}
        ratios: dict[str, list[float]] = {label: [] for label in plans}
        for _ in range(args.runs):
            for label, (argv, plan_env, floor) in plans.items():
                seconds, _ = timed(argv, plan_env, scratch)
                times[label].append(seconds)
                if floor is not None:
                    ratios[label].append(seconds / times[floor][-1])
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        else:
            wait_for(sockets, there=False)  # it ends by itself once idle
    print(f"warm start, {args.runs} runs of each, interleaved; {python}; zread: {zread}")
    for label, (_, _, floor) in plans.items():
        line = f"  {label + ':':18} {median_ms(times[label]):>9} median"
        if floor is not None:
            ratio = statistics.median(ratios[label])
            line += (
                f"; {ratio:.2f}x {floor} (range {min(ratios[label]):.2f} to "
                f"{max(ratios[label]):.2f})"
            )
            if label.endswith("served"):
                line += f"; target <= {TARGET}x: {verdict(ratio <= TARGET)}"
            elif label == "version, cold":
                line += f"; target <= {COLD_TARGET}x: {verdict(ratio <= COLD_TARGET)}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
