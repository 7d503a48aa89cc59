"""A three-way merge by lines: one person's text with the lines another tool changed.

Owns: :func:`merge`, which applies to ``ours`` (the text as a person wrote it) the lines
that differ between ``base`` and ``theirs`` (a tool's rendering of the same document
before and after a change), where it can place them: a line of ``base`` may appear in
``ours`` as it is, or normalized line for line (the tool writes ``~`` for an empty
value, one space after a colon). :mod:`simulator.formats.config_edit` saves
config.yaml with it, keeping what the user wrote around the values that change.

Must not: know about YAML, config keys or files (it sees lines of text only), or do
I/O.
"""

from __future__ import annotations


def merge(ours: str, base: str, theirs: str) -> str | None:
    """``ours`` with the lines that differ between ``base`` and ``theirs`` changed as
    they changed there; None when a changed line of ``base`` is not in ``ours`` as it is
    (the person's line differs from the tool's) or an added line has no place."""
    mine = ours.splitlines(keepends=True)
    old = base.splitlines(keepends=True)
    new = theirs.splitlines(keepends=True)
    found: dict[int, int] = {}  # a line of base -> the same line in ours
    for tag, i1, i2, j1, j2 in _opcodes(old, mine):
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            # equal, or normalized line for line by the tool (`~` for null, one space)
            found.update(zip(range(i1, i2), range(j1, j2), strict=True))
    edits: list[tuple[int, int, list[str]]] = []
    for tag, i1, i2, j1, j2 in _opcodes(old, new):
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


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes from ``a`` to ``b``, the common head and tail taken off first
    (the two are mostly the same, and difflib is slow on many equal lines)."""
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
    middle = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail])
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        codes.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        codes.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return codes
