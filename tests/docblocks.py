"""The fenced blocks of README.md and docs/*.md, and which of them are examples.

Owns: the walk (the files are walked on every run: a new doc or block is picked up
without editing anything), the kinds of example, and the marks. A block is an example by
its info string: ``python``/``py`` (a pytest module when it defines a ``test_``
function, else a script), ``sh``/``shell``/``bash`` (a script), ``console`` (a
transcript: its ``$ `` lines are the commands; the output shown, elided with ``...``,
is not compared). The marks, an HTML comment right above a fence:

- ``<!-- not run: REASON -->``: the block is not run here (it installs the project,
  say, or another test runs it and checks more); its test is skipped with REASON, so
  ``-ra`` lists them all. A mark with no reason, or on a block that is not an example,
  is a mistake.
- ``<!-- file: NAME -->``: the block is the file NAME, written into the directory of
  every example of its doc (a journal a transcript reads, tests ``pytest`` collects).

Must not: run anything (tests/test_docs_examples.py does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PYTHON = ("python", "py")
SHELL = ("sh", "shell", "bash")
CONSOLE = ("console",)
RUNNABLE = PYTHON + SHELL + CONSOLE
# Info strings that would be code a reader runs, but that no rule here runs: a block
# with one fails, so it is renamed to a kind above (or to text) rather than skipped.
LOOKS_RUNNABLE = ("python3", "pycon", "pytb", "ipython", "zsh", "shell-session", "bash-session")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_MARK = re.compile(r"^<!--\s*(?P<kind>not run|file)\s*:(?P<value>.*?)-->\s*$")
TEST = re.compile(r"^def test_\w+", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced block of a doc."""

    doc: str  # the path from the repository's root
    line: int  # the line of its opening fence, from 1
    info: str  # the first word of the info string, lower case
    text: str
    not_run: str | None  # the reason of a `not run` mark, "" when it gives none
    file: str | None  # the name of a `file` mark

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def kind(self) -> str:
        if self.info in PYTHON:
            return "pytest" if TEST.search(self.text) else "script"
        if self.info in SHELL:
            return "shell"
        return "console" if self.info in CONSOLE else "other"


def docs() -> list[Path]:
    """README.md and every docs/*.md, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def marks_above(lines: list[str], index: int) -> dict[str, str]:
    """The marks on the lines right above line ``index`` (the nearest wins)."""
    found: dict[str, str] = {}
    while index > 0 and (mark := _MARK.match(lines[index - 1].strip())):
        found.setdefault(mark["kind"], mark["value"].strip())
        index -= 1
    return found


def parse(path: Path, root: Path = ROOT) -> list[Block]:
    """Every fenced block of one markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = path.relative_to(root).as_posix()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        close = re.compile(rf"^[ \t]*{fence[0]}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        body = [
            line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end]
        ]
        marks = marks_above(lines, index)
        blocks.append(
            Block(
                doc=doc,
                line=index + 1,
                info=opening["info"].lower(),
                text="\n".join(body) + "\n",
                not_run=marks.get("not run"),
                file=marks.get("file"),
            )
        )
        index = end + 1
    return blocks


ALL = [block for path in docs() for block in parse(path)]
EXAMPLES = [block for block in ALL if block.info in RUNNABLE]


def misplaced_marks(path: Path, root: Path = ROOT) -> Iterator[str]:
    """The marks of one doc, outside its blocks, that are not right above a fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = parse(path, root)
    starts = {block.line - 1 for block in blocks}
    inside = {i for b in blocks for i in range(b.line, b.line + b.text.count("\n") + 1)}
    for index, line in enumerate(lines):
        if index in inside or not re.search(r"<!--\s*(not run|file)\b", line):
            continue
        below = index + 1
        while below < len(lines) and _MARK.match(lines[below].strip()):
            below += 1
        if not _MARK.match(line.strip()) or below not in starts:
            where = f"{path.relative_to(root).as_posix()}:{index + 1}"
            yield f"{where}: a mark is one comment right above a fence"


def bad_marks(block: Block) -> Iterator[str]:
    if block.not_run is not None and not block.not_run:
        yield f"{block.where}: `not run` gives no reason"
    if block.not_run is not None and block.info not in RUNNABLE:
        yield f"{block.where}: `not run` on a block that is not an example"
    if block.file is not None and not re.fullmatch(r"[\w.-]+", block.file):
        yield f"{block.where}: `file` names no plain file: {block.file!r}"
