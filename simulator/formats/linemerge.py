"""A three-way merge by lines: one person's text with the lines another tool changed.

Owns: :func:`merge`, which applies to ``ours`` (the text as a person wrote it) the lines
that differ between ``base`` and ``theirs`` (a tool's rendering of the same document
before and after a change), where it can place them: a line of ``base`` may appear in
``ours`` as it is, or normalized line for line (the tool writes ``~`` for an empty
value, one space after a colon). :mod:`simulator.formats.config_edit` saves
config.yaml with it, keeping what the user wrote around the values that change.

Also the checks around a merge: :func:`first_touched`, the first of a person's lines
that a new text does not keep as it is, outside the lines it may change; and a text's
line ends (:func:`split_ends`, :func:`join_ends`): ``\n``, ``\r\n`` or ``\r`` alone,
each line's own, worked on as ``\n`` and given back line by line.

Must not: know about YAML, config keys or files (it sees lines of text only), or do
I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from typing import Final

_LINE_END: Final = re.compile(r"\r\n|\r|\n")


def merge(ours: str, base: str, theirs: str) -> str | None:
    """``ours`` with the lines that differ between ``base`` and ``theirs`` changed as
    they changed there; None when a changed line of ``base`` is not in ``ours`` as it is
    (the person's line differs from the tool's) or an added line has no place."""
    mine = ours.splitlines(keepends=True)
    old = base.splitlines(keepends=True)
    new = theirs.splitlines(keepends=True)
    found: dict[int, int] = {}  # a line of base -> the same line in ours
    for tag, i1, i2, j1, j2 in opcodes(old, mine):
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            # equal, or normalized line for line by the tool (`~` for null, one space)
            found.update(zip(range(i1, i2), range(j1, j2), strict=True))
    edits: list[tuple[int, int, list[str]]] = []
    for tag, i1, i2, j1, j2 in opcodes(old, new):
        if tag == "equal":
            continue
        if i1 < i2:
            start = found.get(i1)
            if start is None or any(found.get(i) != start + i - i1 for i in range(i1, i2)):
                return None
            end = start + i2 - i1
        elif i1 - 1 in found:
            start = end = found[i1 - 1] + 1
        elif i1 in found:
            start = end = found[i1]
        else:
            return None
        edits.append((start, end, new[j1:j2]))
    for start, end, lines in reversed(edits):
        mine[start:end] = lines
    return "".join(mine)


def opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes from ``a`` to ``b``, the common head and tail taken off first
    (the two are mostly the same, and difflib is slow on many equal lines); no line is
    junk (a blank line repeated is matched as any other)."""
    import difflib  # only a save that changes a value needs it

    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    codes: list[tuple[str, int, int, int, int]] = []
    if head:
        codes.append(("equal", 0, head, 0, head))
    middle = difflib.SequenceMatcher(
        None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False
    )
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        codes.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        codes.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return codes


def first_touched(ours: str, new: str, free: Collection[int], *, may_add: bool) -> int | None:
    """The index of the first line of ``ours`` that ``new`` does not keep as it is
    (changed or removed) and that is not in ``free`` (the lines it may change); when
    ``may_add`` is false, lines added also count, as the line they come before. None
    when ``new`` keeps every other line."""
    mine = ours.split("\n")
    for tag, i1, i2, j1, j2 in opcodes(mine, new.split("\n")):
        if tag == "equal":
            continue
        for i in range(i1, i2):
            if i not in free:
                return i
        if j2 - j1 > i2 - i1 and not may_add:
            return min(i1, max(len(mine) - 2, 0))
    return None


def split_ends(text: str) -> tuple[str, list[str], bool]:
    """``text`` with every line ending in ``\n``; each line's own end (``\n``,
    ``\r\n``, ``\r``; the file's most common one for a last line without one); and
    whether the last line had one (an empty text has)."""
    lines = _LINE_END.split(text)
    ends = _LINE_END.findall(text)
    last = lines.pop()
    common = Counter(ends).most_common(1)[0][0] if ends else "\n"
    if last:
        lines.append(last)
        ends.append(common)
    return "".join(f"{line}\n" for line in lines), ends, not last


def join_ends(ours: str, ends: list[str], whole: bool, new: str) -> str:
    """``new`` (a text made from ``ours``, both as :func:`split_ends` gives them) with
    line ends as ``ours`` had them: a line kept keeps its own, a line changed takes the
    end of the line it replaces, a line added that of the line before it (the first
    line's, at the top); without ``whole``, the last line's end is taken off."""
    lines = new.split("\n")[:-1]
    out: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes(ours.split("\n")[:-1], lines):
        for k, line in enumerate(lines[j1:j2]):
            at = max(i1 - 1, 0) if tag == "insert" else min(i1 + k, i2 - 1)
            out.append(line + (ends[at] if at < len(ends) else "\n"))
    if not whole and out:
        out[-1] = _LINE_END.sub("", out[-1])
    return "".join(out)
