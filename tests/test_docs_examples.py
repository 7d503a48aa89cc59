"""Every fenced Python and shell example of README.md and docs/*.md runs, and passes.

Owns: running each example (tests/docblocks.py finds them, and reads the marks) as a
reader would. Each runs in a fresh short directory (work, HOME, TMPDIR), with this
package's scripts (``zread``, ``zread-sim``, ``python``) first on PATH and no
``ZREAD_SIM_*`` variable from outside, within a time limit, and its process group is
killed at the end:

- a script, exit 0, and a pytest module, loading only this package's plugin, every test
  passing: each in a process of its own forked from one that imported pytest and the
  simulator once (tests/forkserver.py), as ``python SCRIPT`` and ``python -m pytest``
  run them but for the start-up;
- a shell block with ``bash -e -o pipefail``, exit 0;
- a transcript in one bash, each command exiting 0 or 1 (the tools' "found
  something": violations, a figure below the bar); 2 and above is a mistake or a crash.

No example's output may hold a Python traceback. A block marked ``not run`` is skipped
with its reason; a misplaced mark fails here.

Also here: the README's set-up block (the install is not run; the command after it
is, fed the line the README says to type) and its scenario example, which loads.

Must not: edit the docs, or hide a failing example (it is fixed, or marked with its
reason).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.docblocks import (
    ALL,
    EXAMPLES,
    LOOKS_RUNNABLE,
    ROOT,
    RUNNABLE,
    SHELL,
    TEST,
    Block,
    bad_marks,
    docs,
    misplaced_marks,
    parse,
)
from tests.forkserver import ForkServer

BIN = Path(sysconfig.get_path("scripts"))
TIMEOUT = 45.0  # seconds for one example, below the suite's per-test limit


# -- the walk and the marks -----------------------------------------------------------------


def test_the_walk_finds_examples_of_every_kind() -> None:
    kinds = {block.kind for block in EXAMPLES}
    assert kinds == {"pytest", "script", "shell", "console"}, kinds
    walked = {block.doc for block in ALL}
    assert {"README.md", "docs/testing.md", "docs/control.md"} <= walked
    testing = [block for block in EXAMPLES if block.doc == "docs/testing.md"]
    assert sum(block.kind == "pytest" for block in testing) >= 8
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    for needed in ("zread_sim", "zread_bin", "spawn_async", "violations", "monkeypatch"):
        assert needed in text


def test_no_block_of_code_escapes_the_walk() -> None:
    missed = [f"{b.where} ({b.info})" for b in ALL if b.info in LOOKS_RUNNABLE]
    assert not missed, f"blocks no rule runs; use one of {', '.join(RUNNABLE)}: {missed}"


def test_every_mark_sits_on_a_block_and_gives_its_reason() -> None:
    problems = [problem for path in docs() for problem in misplaced_marks(path)]
    problems += [problem for block in ALL for problem in bad_marks(block)]
    assert not problems, "\n".join(problems)


def test_no_two_blocks_of_a_doc_are_the_same_file() -> None:
    seen: dict[tuple[str, str], str] = {}
    for block in ALL:
        if block.file is not None:
            first = seen.setdefault((block.doc, block.file), block.where)
            assert first == block.where, f"{block.where} and {first} are both {block.file}"


# -- running one --------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def report(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out[-4000:]}\n--- stderr\n{self.err[-4000:]}"


@contextlib.contextmanager
def new_place() -> Iterator[Path]:
    """A short fresh directory (a Unix socket's path under it must stay short)."""
    root = Path(tempfile.mkdtemp(prefix="zdoc-"))
    for name in ("work", "home", "tmp"):
        (root / name).mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def place() -> Iterator[Path]:
    with new_place() as root:
        yield root


def plugin() -> str:
    """The module this package registers as its pytest plugin."""
    (entry,) = [e for e in entry_points(group="pytest11") if e.value.startswith("simulator")]
    return entry.value


def environment(root: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ZREAD_SIM_", "PYTEST_", "COV_"))
    }
    env.update(
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        PYTEST_PLUGINS=plugin(),
    )
    return env


def run(argv: list[str], root: Path, stdin: str | None = None) -> Ran:
    """``argv`` in ``root``'s work directory; its whole process group ends with it."""
    proc = subprocess.Popen(
        argv,
        cwd=root / "work",
        env=environment(root),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"still running after {TIMEOUT:.0f} s\n{Ran(-9, out, err).report()}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left running
    return Ran(proc.returncode, out, err)


def console_script(text: str) -> str:
    """A transcript's commands as one bash script that stops at an exit above 1."""
    commands: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        if not line.startswith("$ "):
            continue
        command = line[2:]
        while command.endswith("\\"):
            command += "\n" + next(lines, "")
        commands.append(command)
    assert commands, "a console block with no `$ ` command"
    stop = 'code=$?; [ "$code" -le 1 ] || {{ echo "command {}: exit $code" >&2; exit "$code"; }}'
    steps = (f"{command}\n{stop.format(n)}\n" for n, command in enumerate(commands, 1))
    return "set -o pipefail\n" + "".join(steps)


@pytest.fixture(scope="module")
def forks() -> Iterator[ForkServer]:
    """The fork server of the module's scripts and pytest modules, started as they are."""
    with new_place() as root, ForkServer(environment(root), root / "work") as server:
        yield server


def run_forked(forks: ForkServer, kind: str, argv: list[str], root: Path) -> Ran:
    """``argv`` in a child of the fork server, as :func:`run` runs a process."""
    forked = forks.run(kind, argv, root / "work", environment(root), TIMEOUT, root)
    ran = Ran(-9 if forked.code is None else forked.code, forked.out, forked.err)
    if forked.code is None:
        pytest.fail(f"still running after {TIMEOUT:.0f} s\n{ran.report()}")
    return ran


def run_block(block: Block, root: Path, forks: ForkServer) -> None:
    work = root / "work"
    for other in ALL:
        if other.doc == block.doc and other.file is not None:
            (work / other.file).write_text(other.text, encoding="utf-8")
    name = f"example_{block.line}"
    if block.kind == "pytest":
        (work / f"test_{name}.py").write_text(block.text, encoding="utf-8")
        ran = run_forked(forks, "pytest", ["-q", "-p", "no:cacheprovider", f"test_{name}.py"], root)
        wanted = len(TEST.findall(block.text))
        assert ran.code == 0, ran.report()
        assert re.search(rf"^{wanted} passed in", ran.out, re.MULTILINE), ran.report()
        return
    if block.kind == "script":
        (work / f"{name}.py").write_text(block.text, encoding="utf-8")
        ran = run_forked(forks, "script", [f"{name}.py"], root)
    elif block.kind == "shell":
        (work / f"{name}.sh").write_text(block.text, encoding="utf-8")
        ran = run(["bash", "-e", "-o", "pipefail", f"{name}.sh"], root)
    else:
        (work / f"{name}.sh").write_text(console_script(block.text), encoding="utf-8")
        ran = run(["bash", f"{name}.sh"], root)
    assert ran.code == 0, ran.report()
    assert "Traceback (most recent call last)" not in ran.out + ran.err, ran.report()


@pytest.mark.parametrize("block", EXAMPLES, ids=[block.where for block in EXAMPLES])
def test_the_example_runs(block: Block, place: Path, forks: ForkServer) -> None:
    if block.not_run is not None:
        pytest.skip(f"{block.where} not run: {block.not_run}")
    run_block(block, place, forks)


SAMPLE = """# A doc
<!-- not run: it needs the real binary -->
```sh
zread login
```

- a list item:

  <!-- file: data.txt -->
  ~~~Console
  $ cat data.txt
  ~~~

<!-- not run: -->
```json
{}
```
<!-- file: orphan.txt -->

text
"""


def test_the_walk_reads_fences_and_marks(tmp_path: Path) -> None:
    doc = tmp_path / "sample.md"
    doc.write_text(SAMPLE, encoding="utf-8")
    blocks = parse(doc, tmp_path)
    assert [(b.line, b.info, b.not_run, b.file) for b in blocks] == [
        (3, "sh", "it needs the real binary", None),
        (10, "console", None, "data.txt"),
        (15, "json", "", None),
    ]
    assert [b.text for b in blocks[:2]] == ["zread login\n", "$ cat data.txt\n"]
    assert [len(list(bad_marks(block))) for block in blocks] == [0, 0, 2]
    assert list(misplaced_marks(doc, tmp_path)) == [
        "sample.md:18: a mark is one comment right above a fence"
    ]


def test_a_transcript_runs_on_past_exit_1_and_stops_at_2(place: Path) -> None:
    script = "$ false\nshown, not compared\n$ echo next \\\n    line\n$ (exit 2)\n$ echo never\n"
    (place / "work" / "t.sh").write_text(console_script(script), encoding="utf-8")
    ran = run(["bash", "t.sh"], place)
    assert (ran.code, ran.out) == (2, "next line\n"), ran.report()
    assert "command 3: exit 2" in ran.err


# -- the README -----------------------------------------------------------------------------


def test_the_readme_main_job_runs_after_its_install(place: Path) -> None:
    """The README's first block sets up and installs, then runs the main job: the
    install is not run here, the main job is, as the README says to use it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = next(block for block in ALL if block.doc == "README.md")
    assert first.info in SHELL and first.not_run, "the set-up block, marked as not run"
    main_job, tests = (line.split(" && ") for line in first.text.splitlines())
    assert any(part.startswith("pip install") for part in main_job)
    assert main_job[-1].startswith("python -m simulator generate --stdio")
    assert tests[-1].startswith("python -m pytest")
    (typed,) = re.findall(r"type `(\{\"type\":\"select_action\".*?\})`", readme)
    # At the scenario's pace the job takes seconds; its variable makes it instant.
    ran = run(["bash", "-c", f"ZREAD_SIM_SPEED=0 {main_job[-1]}"], place, stdin=typed + "\n")
    assert ran.code == 0, ran.report()
    last = (ran.out.splitlines() or [""])[-1]
    assert '"state":"done"' in last and '"done":true' in last, ran.report()
    wiki = place / "work" / ".zread" / "wiki"
    assert (wiki / (wiki / "current").read_text() / "wiki.json").is_file()


def test_the_readme_scenario_example_loads(tmp_path: Path) -> None:
    from simulator.scenario import load_scenario

    blocks = [block for block in ALL if block.doc == "README.md" and block.info == "toml"]
    assert blocks
    for index, block in enumerate(blocks):
        path = tmp_path / f"readme{index}.toml"
        path.write_text(block.text, encoding="utf-8")
        scenario = load_scenario(str(path))
        assert scenario.description
        assert scenario.world.project.pages == 40
