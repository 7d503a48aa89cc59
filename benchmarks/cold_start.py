"""Cold start: ``python -m simulator version --stdio`` to its event and exit.

Timed from spawn to exit, stdin /dev/null, against ``python -c pass`` run the same
way, interleaved (pass, simulator, pass, simulator, ...) so that both see the same
machine load. Reported per mode: the median of each, and the median of the per-pair
ratios (each simulator run over the ``python -c pass`` run just before it).

Two modes, both in every run of this script, interleaved with each other too:

- **compiled**: ``PYTHONPYCACHEPREFIX`` points at a temporary folder, filled first by
  ``python -m compileall`` over the tree's packages and by one run of each command
  with bytecode writing on (for the standard library and third-party modules they
  import). The timed runs then read every module from that cache and write nothing
  (``PYTHONDONTWRITEBYTECODE=1``).
- **not compiled**: ``PYTHONPYCACHEPREFIX`` points at another, empty temporary
  folder and ``PYTHONDONTWRITEBYTECODE=1``, so the folder stays empty. With a prefix
  set, the interpreter looks for bytecode only under the prefix, never in the
  ``__pycache__`` folders beside the sources, so every module that is not frozen
  into the interpreter or an extension (msgspec's is) is compiled from source on
  every run, the standard library's too, for both commands alike.

Neither is taken on trust: before timing, each command runs once with ``-v`` in each
mode, and the script counts the modules whose code came from cached bytecode and those
compiled from source; it stops if a compiled run compiled a module, or if a run that
should compile read bytecode.

Each command gets ``PYTHONPATH`` set to its tree. ``--against DIR`` times the
simulator of another checkout (``git worktree add ../before <commit>``) in the same
runs, interleaved with this one, against the same ``python -c pass`` runs.
Targets: <= 3.2x compiled, <= 4.0x not compiled (median of the per-pair ratios).

``--python EXE`` runs both commands with another interpreter, the tree still first on
its path: a virtual environment with zread-sim's run-time dependencies alone, as a
user installs it (``python -m venv /tmp/rt && /tmp/rt/bin/pip install .``). The
development environment differs from it twice: its editable install's import hook
starts with every interpreter (``python -c pass`` included: ~15 ms of ``pathlib`` and
``importlib.util``), and mypy brings ``typing_extensions``, which msgspec then imports
(~12 ms). So the ratio there is lower than a user's, though the simulator is slower.

``--installed VENV`` times what a user runs instead: the ``zread`` console script of a
virtual environment where the project is installed as a user installs it, with its
run-time dependencies alone (``python3 -m venv V && V/bin/pip install .``), from a
folder outside the tree, bytecode compiled (pip compiles it; the script checks that
nothing is compiled from source). Interleaved in each round: ``V/bin/python -c pass``,
``zread version --stdio``, ``zread generate --stdio -y --speed 0 --no-files`` to its
``done``, and a replay: ``V/bin/python`` running a script that writes the generate run's
bytes (recorded once before timing) to its stdout, the floor of any Python program
that writes them. Targets: version <= 3.0x ``python -c pass``, generate <= 3.0x the
replay. A third line, ``import msgspec, transitions`` alone, shows how much of the
floor is the two libraries every command imports.

    python benchmarks/cold_start.py [--runs 30] [--bytecode both|compiled|none]
        [--against DIR] [--python EXE]
    python benchmarks/cold_start.py --installed VENV [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile

from _common import ROOT, median_ms, verdict, wall
from _common import python as this_python

PYTHON = this_python()
"""The interpreter timed (``--python``)."""
SIMULATOR = ["-m", "simulator", "version", "--stdio"]
PASS = ["-c", "pass"]
TARGETS = {"compiled": 3.2, "none": 4.0}
TITLES = {"compiled": "compiled (bytecode cached)", "none": "not compiled (no bytecode read)"}


def environment(prefix: str, tree: str, *, write: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
    env |= {"PYTHONPYCACHEPREFIX": prefix, "PYTHONPATH": tree}
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def code_sources(args: list[str], tree: str, env: dict[str, str]) -> tuple[int, int, int]:
    """(modules read from bytecode, modules compiled from source, modules of ``tree``)
    in one ``-v`` run of ``python *args``."""
    run = subprocess.run(
        [PYTHON, "-v", *args],
        cwd=tree,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    cached = compiled = own = 0
    prefix = env["PYTHONPYCACHEPREFIX"]
    for line in run.stderr.splitlines():
        if not line.startswith("# code object from "):
            continue
        path = line.removeprefix("# code object from ").strip("'")
        if path.endswith(".pyc"):
            if not path.startswith(prefix):
                raise SystemExit(f"bytecode read from outside the cache prefix: {path}")
            cached += 1
            path = path[len(prefix) :]
        else:
            compiled += 1
        own += path.startswith(os.path.join(tree, "simulator") + os.sep) or path.startswith(
            os.path.join(tree, "statecharts") + os.sep
        )
    return cached, compiled, own


INSTALLED_TARGET = 3.0
GENERATE = ["generate", "--stdio", "-y", "--speed", "0", "--no-files"]


def installed(venv: str, runs: int) -> None:
    """The ``--installed VENV`` figures (see the module's docstring)."""
    python, zread = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "zread")
    work = tempfile.TemporaryDirectory(prefix="cold-installed-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ZREAD_SIM_"))}
    env["HOME"] = work.name
    recorded = subprocess.run(
        [zread, *GENERATE],
        cwd=work.name,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
    ).stdout
    replay = os.path.join(work.name, "replay.py")
    with open(replay, "w", encoding="utf-8") as f:
        f.write(f"import sys\nsys.stdout.buffer.write({recorded!r})\n")
    for argv in ([zread, "version", "--stdio"], [zread, *GENERATE]):
        verbose = subprocess.run(
            [python, "-v", zread, *argv[1:]],
            cwd=work.name,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        from_source = [
            line
            for line in verbose.splitlines()
            if line.startswith("# code object from ") and not line.rstrip("'").endswith(".pyc")
        ]
        if from_source:
            raise SystemExit(f"{argv[1]}: {len(from_source)} modules compiled from source")
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "import msgspec, transitions": [python, "-c", "import msgspec, transitions"],
        "zread version --stdio": [zread, "version", "--stdio"],
        "replay of the generate bytes": [python, replay],
        "zread generate -y --speed 0": [zread, *GENERATE],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(wall(argv, cwd=work.name, env=env))
    work.cleanup()

    def ratio(name: str, floor: str) -> float:
        return statistics.median(a / b for a, b in zip(times[name], times[floor], strict=True))

    print(f"installed in {venv}: {runs} rounds, interleaved, stdin /dev/null")
    for name in commands:
        print(f"  {name + ':':31} {median_ms(times[name]):>9} median")
    for name, floor in (
        ("import msgspec, transitions", "python -c pass"),
        ("zread version --stdio", "python -c pass"),
        ("zread generate -y --speed 0", "replay of the generate bytes"),
    ):
        met = verdict(ratio(name, floor) <= INSTALLED_TARGET)
        target = "" if name.startswith("import") else f"; target <= {INSTALLED_TARGET}x: {met}"
        print(f"  {name} / {floor}: {ratio(name, floor):.2f}x median of the rounds{target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--installed", metavar="VENV", help="time VENV's installed zread")
    parser.add_argument(
        "--bytecode", choices=("both", "compiled", "cached", "none"), default="both"
    )
    parser.add_argument("--against", metavar="DIR", help="another checkout to time beside this")
    parser.add_argument("--python", metavar="EXE", help="the interpreter to time (default: this)")
    args = parser.parse_args()
    if args.installed:
        installed(args.installed, args.runs)
        return
    global PYTHON
    PYTHON = args.python or this_python()
    modes = {"both": ["compiled", "none"], "cached": ["compiled"]}.get(
        args.bytecode, [args.bytecode]
    )
    trees = {"this tree": ROOT}
    if args.against:
        trees[args.against] = os.path.abspath(args.against)
    folders = {mode: tempfile.TemporaryDirectory(prefix=f"pycache-{mode}-") for mode in modes}
    prefixes = {mode: folder.name for mode, folder in folders.items()}

    if "compiled" in prefixes:  # the cache filled, then only read
        prefix = prefixes["compiled"]
        for tree in trees.values():
            packages = [os.path.join(tree, p) for p in ("simulator", "statecharts")]
            subprocess.run(
                [PYTHON, "-m", "compileall", "-q", *packages],
                env=environment(prefix, tree, write=True),
                stdout=subprocess.DEVNULL,
                check=True,
            )
            for command in (PASS, SIMULATOR):
                wall([PYTHON, *command], cwd=tree, env=environment(prefix, tree, write=True))

    print(f"cold start, stdin /dev/null, {args.runs} runs of each, interleaved")
    for mode in modes:
        checks = {"python -c pass": (PASS, ROOT)}
        checks |= {f"version --stdio, {name}": (SIMULATOR, tree) for name, tree in trees.items()}
        for label, (command, tree) in checks.items():
            cached, compiled, own = code_sources(command, tree, environment(prefixes[mode], tree))
            print(
                f"  {mode:8} {label}: {cached} modules from cached bytecode, "
                f"{compiled} compiled from source ({own} of the tree's packages)"
            )
            wrong = compiled if mode == "compiled" else cached
            if wrong:
                raise SystemExit(f"{mode}: {wrong} modules did not load as the mode says")

    baseline: dict[str, list[float]] = {mode: [] for mode in modes}
    times: dict[str, dict[str, list[float]]] = {m: {name: [] for name in trees} for m in modes}
    ratios: dict[str, dict[str, list[float]]] = {m: {name: [] for name in trees} for m in modes}
    for _ in range(args.runs):
        for mode in modes:
            for name, tree in trees.items():
                env = environment(prefixes[mode], tree)
                before = wall([PYTHON, *PASS], cwd=tree, env=env)
                seconds = wall([PYTHON, *SIMULATOR], cwd=tree, env=env)
                if name == "this tree":
                    baseline[mode].append(before)
                times[mode][name].append(seconds)
                ratios[mode][name].append(seconds / before)

    for mode in modes:
        target = TARGETS[mode]
        print(f"{TITLES[mode]}:")
        width = max(len(f"version --stdio, {name}:") for name in trees)
        print(f"  {'python -c pass:':{width}} {median_ms(baseline[mode]):>9} median")
        for name in trees:
            ratio = statistics.median(ratios[mode][name])
            label = f"version --stdio, {name}:"
            print(
                f"  {label:{width}} {median_ms(times[mode][name]):>9} median; "
                f"per-pair ratio {ratio:.2f}x median "
                f"(range {min(ratios[mode][name]):.2f} to {max(ratios[mode][name]):.2f}); "
                f"target <= {target}x: {verdict(ratio <= target)}"
            )
    if "none" in prefixes and any(os.scandir(prefixes["none"])):
        raise SystemExit("bytecode was written into the folder that must stay empty")
    for folder in folders.values():
        folder.cleanup()


if __name__ == "__main__":
    main()
