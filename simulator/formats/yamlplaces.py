"""Where things are written in a YAML text: the lines of a key's value, its anchor, the
aliases that name it.

Owns: :func:`places` (one pass over PyYAML's events of a text, nothing built) and what
it finds (:class:`Places`): for each key path, where each time it is written puts its
key and value (a key written twice is two places, the last one in force, as PyYAML and
yaml.v3 read it); the anchors scalars define, and the aliases that name them.
:mod:`simulator.formats.config_edit` uses them to know which lines a save may change
and to keep an anchor on its key.

Lines and columns count from 0, in characters, with ``\\n``, ``\\r\\n`` and ``\\r`` each
one line break (a text with other breaks YAML knows, U+0085, U+2028, U+2029, is not
mapped: :func:`places` says so with ``None``).

Must not: know what a file's keys mean, do I/O, or import PyYAML before it is called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from simulator.formats.bounds import MAX_NESTING

Path = tuple[str, ...]
_PROPERTIES: Final = re.compile(r"(?:[&!]\S*[ \t]+)*")
_OTHER_BREAKS: Final = re.compile("[\x85\u2028\u2029]")


@dataclass
class Scalar:
    """A scalar written at one place: its lines, its anchor and its text (the anchor
    and tag left out) when it is written on one line."""

    line: int
    end_line: int
    anchor: str | None
    text: str | None


@dataclass
class Place:
    """One time a key is written: the line of the key, the last line of its value, and
    what the value is (a scalar, a map, a list, or an alias: of a map, with the path it
    is written at)."""

    key_line: int
    end_line: int
    kind: str  # "scalar", "map", "list", "alias"
    scalar: Scalar | None = None
    target: Path | None = None  # an alias's map, by the path it is written at
    named: tuple[Scalar, int, int] | None = None  # an alias's scalar, and its columns


@dataclass
class Places:
    """What :func:`places` finds in one text."""

    written: dict[Path, list[Place]] = field(default_factory=dict)
    aliases: list[tuple[Scalar, int, int, int]] = field(default_factory=list)
    """Each alias of a scalar: the scalar it names, its line, and its columns."""
    twice: dict[int, tuple[str, int]] = field(default_factory=dict)
    """The line of a key written again in the same map: the key, the line it was first."""

    def last(self, path: Path) -> Place | None:
        """Where ``path`` is in force (through aliases of maps), or None when the text
        does not write it."""
        path = self.resolve(path)
        found = self.written.get(path)
        return found[-1] if found else None

    def resolve(self, path: Path) -> Path:
        """``path`` with each map reached through an alias replaced by where the map is
        written (``llm: *d`` and ``base: &d``: ``llm.model`` is ``base.model``)."""
        for _ in range(MAX_NESTING):
            for depth in range(1, len(path)):
                found = self.written.get(path[:depth])
                if found and found[-1].target is not None:
                    path = found[-1].target + path[depth:]
                    break
            else:
                return path
        return path

    def lines(self, path: Path) -> set[int]:
        """The lines a new value at ``path`` may change: those of the key and value in
        force, and of each map on the way that is written as a scalar (a null the map
        takes the place of)."""
        path = self.resolve(path)
        free: set[int] = set()
        for depth in range(1, len(path) + 1):
            place = self.last(path[:depth])
            if place is not None and (depth == len(path) or place.kind == "scalar"):
                free.update(range(place.key_line, place.end_line + 1))
        return free

    def aliases_of(self, scalar: Scalar) -> list[tuple[int, int, int]]:
        """The line and columns of each alias naming ``scalar``."""
        return [(line, start, end) for named, line, start, end in self.aliases if named is scalar]


class _Frame:
    """A collection being read: its path (None inside a list, or under a key that is
    not text), and, for a map, the key whose value comes next."""

    def __init__(self, path: Path | None, is_map: bool) -> None:
        self.path, self.is_map = path, is_map
        self.key: str | None = None
        self.key_line = 0
        self.expect_key = is_map
        self.keys: dict[str, int] = {}


def places(text: str) -> Places | None:
    """Where each key of ``text`` (a YAML text PyYAML reads) is written; None when a
    line break other than ``\\n`` and ``\\r`` would make PyYAML's lines differ from
    the text's."""
    import yaml
    from yaml import events

    from simulator.formats.yamlv3 import loader

    if _OTHER_BREAKS.search(text):
        return None
    lines = re.split(r"\r\n|\r|\n", text)
    found = Places()
    anchors: dict[str, Scalar | Path] = {}
    frames: list[_Frame] = []
    starts = (events.MappingStartEvent, events.SequenceStartEvent)
    nodes = (events.ScalarEvent, events.AliasEvent, *starts)
    parsed: Any = yaml.parse(text, Loader=loader())
    for event in parsed:
        kind = type(event)
        if kind in (events.MappingEndEvent, events.SequenceEndEvent):
            frames.pop()
            continue
        if kind not in nodes:
            continue
        parent = frames[-1] if frames else None
        if parent is not None and parent.expect_key:
            _key(found, anchors, parent, event, kind is events.ScalarEvent)
            if kind in starts:  # a key that is a collection: no path under it
                frames.append(_Frame(None, kind is events.MappingStartEvent))
            continue
        path = _value_path(parent)
        if path is None:
            _unplaced(found, anchors, event, lines)
        else:
            place = _place(found, anchors, event, lines)
            if parent is not None:
                place.key_line = parent.key_line
                found.written.setdefault(path, []).append(place)
            if kind in starts and event.anchor is not None:  # only a map's path is followed
                if kind is events.MappingStartEvent:
                    anchors[event.anchor] = path
                else:
                    anchors.pop(event.anchor, None)
        if kind in starts:
            is_map = kind is events.MappingStartEvent
            frames.append(_Frame(path if is_map else None, is_map))
        if parent is not None and parent.is_map:
            parent.expect_key = True
    return found


def _key(found: Places, anchors: dict[str, Any], frame: _Frame, event: Any, scalar: bool) -> None:
    """The key of ``frame``'s next value; a key written before in the same map noted."""
    from yaml import events

    if getattr(event, "anchor", None) is not None and not isinstance(event, events.AliasEvent):
        anchors.pop(event.anchor, None)  # a key's anchor: nothing a save follows
    frame.key = event.value if scalar else None
    frame.key_line = event.start_mark.line
    frame.expect_key = False
    if frame.key is not None:
        first = frame.keys.setdefault(frame.key, frame.key_line)
        if first != frame.key_line:
            found.twice[frame.key_line] = (frame.key, first)


def _value_path(parent: _Frame | None) -> Path | None:
    if parent is None:
        return ()
    if not parent.is_map or parent.path is None or parent.key is None:
        return None
    return (*parent.path, parent.key)


def _place(found: Places, anchors: dict[str, Any], event: Any, lines: list[str]) -> Place:
    """The place of a value read at a path (a collection's: the line it starts on)."""
    from yaml import events

    line = event.start_mark.line
    kind = type(event)
    if kind is events.ScalarEvent:
        scalar = _scalar(event, lines)
        if event.anchor is not None:
            anchors[event.anchor] = scalar
        return Place(line, scalar.end_line, "scalar", scalar=scalar)
    if kind is events.AliasEvent:
        target = anchors.get(event.anchor)
        _alias(found, anchors, event)
        if isinstance(target, tuple):
            return Place(line, line, "alias", target=target)
        if isinstance(target, Scalar):
            named = (target, event.start_mark.column, event.end_mark.column)
            return Place(line, line, "alias", named=named)
        return Place(line, line, "alias")
    return Place(line, line, "map" if kind is events.MappingStartEvent else "list")


def _unplaced(found: Places, anchors: dict[str, Any], event: Any, lines: list[str]) -> None:
    """A value at no path (in a list): its anchor, or the scalar an alias names."""
    from yaml import events

    if isinstance(event, events.ScalarEvent) and event.anchor is not None:
        anchors[event.anchor] = _scalar(event, lines)
    elif isinstance(event, events.AliasEvent):
        _alias(found, anchors, event)
    elif event.anchor is not None:  # a collection in a list: not a path an alias can follow
        anchors.pop(event.anchor, None)


def _scalar(event: Any, lines: list[str]) -> Scalar:
    start, end = event.start_mark, event.end_mark
    text = None
    if start.line == end.line:
        text = _PROPERTIES.sub("", lines[start.line][start.column : end.column], count=1)
    return Scalar(start.line, _last_line(end, start.line), event.anchor, text)


def _alias(found: Places, anchors: dict[str, Any], event: Any) -> None:
    target = anchors.get(event.anchor)
    if isinstance(target, Scalar):
        start, end = event.start_mark, event.end_mark
        found.aliases.append((target, start.line, start.column, end.column))


def _last_line(mark: Any, first: int = 0) -> int:
    """The last line a node ending at ``mark`` is written on (a block ends at the start
    of the line after it)."""
    if mark.column == 0 and mark.line > first:
        return int(mark.line) - 1
    return int(mark.line)
