"""What a save of config.yaml must keep of the user's file, and the refusal when it cannot.

Owns: :class:`Kept`, the user's file as a save sees it (its encoding, byte order mark
and line ends; the lines the changed values are written on, which alone may change; an
anchor on a changed value, kept on its key), and :func:`refused`, the one line that
names the line a save cannot keep.

A save changes the lines of the values that change (the key's line and its value's, a
null map's line when the map takes its place), adds the lines of keys the file does not
have, and nothing else: every other line stays byte for byte, its line end included
(``\\n``, ``\\r\\n`` or ``\\r`` alone, each line its own; a line changed keeps the end it
had, a line added takes the end of the line before it). A file in UTF-16 (with its byte
order mark, as YAML reads it) stays UTF-16.

A changed value that carries an anchor keeps it, on its key; each alias naming it is
written out with the value it had (the other keys keep their values), on its own line.

Must not: do I/O, or import ruamel (the round trip is
:mod:`simulator.formats.config_edit`'s).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from typing import Final

from simulator.formats.bounds import BOM
from simulator.formats.config import KIND, ConfigFileError
from simulator.formats.linemerge import first_touched, join_ends, opcodes, split_ends
from simulator.formats.yamlplaces import Path, Places, Scalar, places

_ENCODINGS: Final = (
    (BOM, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def refused(line: int, why: str) -> ConfigFileError:
    """The save refused: one line naming the line (from 0) that it cannot keep, and why."""
    return ConfigFileError(
        f"{KIND}: line {line + 1} cannot be kept as it is written by a save ({why}); "
        "nothing was saved"
    )


class Kept:
    """The user's config.yaml, about to have the values at ``paths`` changed.

    :attr:`text` is what the round trip works on: the file decoded, each line ending in
    ``\\n``, the aliases of changed anchored values written out; :attr:`anchors` the
    anchor each changed path keeps. :class:`ConfigFileError` (:func:`refused`) when
    the file cannot be mapped line by line."""

    def __init__(self, old: bytes, paths: Iterable[Path]) -> None:
        self.encoding, self.bom = "utf-8", b""
        for bom, encoding in _ENCODINGS:
            if old.startswith(bom):
                self.encoding, self.bom = encoding, bom
                break
        try:
            decoded = old.removeprefix(self.bom).decode(self.encoding)
        except UnicodeDecodeError:
            raise refused(0, f"not {self.encoding}") from None
        self.ours, self.ends, self.whole = split_ends(decoded)
        found = places(self.ours)
        if found is None:
            raise refused(_other_break(self.ours), "a line break other than \\n and \\r")
        self.places: Places = found
        self.paths = list(paths)
        self.free: set[int] = set()
        self.may_add = False
        self.anchors: dict[Path, str] = {}
        lines = self.ours.split("\n")
        for path in self.paths:
            self.free |= found.lines(path)
            place = found.last(path)
            self.may_add = self.may_add or place is None
            if place is not None and place.scalar is not None and place.scalar.anchor:
                self.anchors[path] = place.scalar.anchor
                for line, start, end in self.places.aliases_of(place.scalar):
                    self._write_out(lines, place.scalar, line, start, end)
            elif place is not None and place.named is not None:  # the value is an alias
                named, start, end = place.named
                self._write_out(lines, named, place.end_line, start, end)
        self.text = "\n".join(lines)

    def _write_out(self, lines: list[str], scalar: Scalar, line: int, start: int, end: int) -> None:
        """The alias at ``line``, columns ``start`` to ``end``, replaced by the text of
        the scalar it names; the line may change."""
        if scalar.text is None:
            raise refused(line, "an alias of a value written over several lines")
        lines[line] = lines[line][:start] + scalar.text + lines[line][end:]
        self.free.add(line)

    def check(self, candidate: str) -> bytes | tuple[int, str]:
        """``candidate`` (a save of :attr:`text`, each line ending in ``\\n``) as the
        file's bytes when it keeps every line but the free ones; else the first line it
        does not keep, and why."""
        lost = first_touched(self.ours, candidate, self.free, may_add=self.may_add)
        if lost is not None:
            return lost, self._why(lost)
        new = join_ends(self.ours, self.ends, self.whole, candidate)
        return self.bom + new.encode(self.encoding)

    def misread(self, candidate: str) -> tuple[int, str]:
        """Where ``candidate``, which keeps the lines it must, reads back otherwise than
        intended: a key written twice, else the first line it changes."""
        for again, (key, first) in self.places.twice.items():
            return again, f"{key} is written twice, on lines {first + 1} and {again + 1}"
        mine = self.ours.split("\n")
        for tag, i1, _, _, _ in opcodes(mine, candidate.split("\n")):
            if tag != "equal":
                return min(i1, max(len(mine) - 2, 0)), "the round trip would change what it means"
        return 0, "the round trip would change what it means"

    def _why(self, line: int) -> str:
        for again, (key, first) in self.places.twice.items():
            if line in (again, first):
                return f"{key} is written twice, on lines {first + 1} and {again + 1}"
        return "the round trip would write it otherwise"


def _other_break(text: str) -> int:
    for number, line in enumerate(text.split("\n")):
        if any(mark in line for mark in "\x85\u2028\u2029"):
            return number
    return 0
