"""YAML read and written as Go's ``gopkg.in/yaml.v3`` reads and writes it, bounded.

Owns: :func:`load`, the one bounded YAML decoder, and :func:`dump`, the one YAML
encoder in yaml.v3's look; the bounds every read keeps (:data:`MAX_ALIAS_NODES`, with
:data:`~simulator.formats.bounds.MAX_NESTING` and the size limit of the file's kind);
and a parser's error as one line of the simulator's (:class:`FormatError`, naming the
file's kind).

Reading is PyYAML's: ~30 ms to import (done on first use, not at module import) and a
parser in C (libyaml). Only ``true``/``false`` are booleans (YAML 1.2, as yaml.v3
reads them), so ``language: no`` stays the string ``no``.

Every read is bounded before a Python object is built, in one pass over the parser's
events: at most ``LIMITS[kind]`` bytes; collections nested at most
:data:`~simulator.formats.bounds.MAX_NESTING` deep, aliases expanded (an alias counts
as deep as the node it names); no alias inside the node it names (a recursive alias,
which would build a cyclic object); and aliases adding at most :data:`MAX_ALIAS_NODES`
nodes to what is written (the "billion laughs", nine levels of nine aliases each, is a
few hundred bytes and 10^9 nodes expanded). The nodes written are bounded by the size,
so the document a reader walks is bounded too. The pass counts and never expands: each
anchored node's expanded size and height are recorded when it ends, and an alias adds
them. Past a bound: :class:`FormatError`, one line naming the limit.

Writing (:func:`dump`) is done as yaml.v3 writes: double quotes only where a string
needs quoting, lists indented under their key, non-ASCII raw, no line wrapping, keys
in the order given.

Must not: know what a file's keys mean (config.yaml's are
:mod:`simulator.formats.config`'s), do I/O, or import PyYAML before a read or a write
needs it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any, Final

from simulator.formats.bounds import MAX_NESTING, FormatError, check_size

MAX_ALIAS_NODES: Final = 10_000
"""The most nodes aliases may add to a document once expanded (zread's own config.yaml
has no alias at all)."""

DEFAULT_INDENT: Final = 4
"""yaml.v3's indentation, for a file that shows none."""


@functools.cache
def _yaml() -> tuple[type[Any], type[Any]]:
    """The loader and dumper classes (PyYAML imported on first use)."""
    import yaml

    base: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc]
        """The safe loader (libyaml's parser when there is one) with YAML 1.2's
        booleans: ``true``/``false`` only."""

    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )

    class Dumper(yaml.SafeDumper):
        """yaml.v3's look: double quotes where quoting is needed, lists indented."""

        def choose_scalar_style(self) -> str:
            style: str = super().choose_scalar_style()
            return '"' if style == "'" else style

        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)

    return Loader, Dumper


def loader() -> type[Any]:
    """The loader every read uses (PyYAML's safe one, libyaml's parser where there is
    one, YAML 1.2's booleans)."""
    return _yaml()[0]


def _not_yaml(err: Exception, kind: str) -> FormatError:
    """PyYAML's error as one line of the simulator's, about a ``kind`` file."""
    import yaml

    if isinstance(err, yaml.reader.ReaderError):
        return FormatError(f"{kind}: not valid YAML: at byte {err.position}: {err.reason}")
    problem = getattr(err, "problem", None)
    mark = getattr(err, "problem_mark", None)
    if problem and mark is not None:
        context = getattr(err, "context", None)
        what = f"{context}: {problem}" if context else problem
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        return FormatError(f"{kind}: not valid YAML: {where}: {' '.join(what.split())}")
    return FormatError(f"{kind}: not valid YAML: {' '.join(str(err).split())}")


def _too_deep(kind: str) -> FormatError:
    return FormatError(f"{kind}: nested deeper than {MAX_NESTING} levels, the limit for {kind}")


def _check_bounds(data: bytes, kind: str) -> None:
    """:class:`FormatError` unless ``data`` keeps every bound of a ``kind`` file
    (size, nesting with aliases expanded, no recursive alias, the nodes aliases add),
    or is not YAML. One pass over the parser's events; nothing is built or expanded."""
    import yaml
    from yaml import events

    check_size(data, kind)
    loader, _ = _yaml()
    starts = (events.MappingStartEvent, events.SequenceStartEvent)
    ends = (events.MappingEndEvent, events.SequenceEndEvent)
    open_sizes: list[list[int]] = []  # [nodes, height] of each collection not yet ended
    open_anchors: list[str | None] = []  # the anchor of each, in the same order
    ended: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height), expanded
    added = 0  # nodes the aliases add
    parsed: Iterator[Any] = yaml.parse(data, Loader=loader)
    try:
        for event in parsed:
            event_type = type(event)
            if event_type is events.ScalarEvent:
                nodes, height = 1, 0
                if event.anchor is not None:
                    ended[event.anchor] = (1, 0)
            elif event_type in starts:
                if len(open_sizes) >= MAX_NESTING:
                    raise _too_deep(kind)
                open_sizes.append([1, 0])
                open_anchors.append(event.anchor)
                continue
            elif event_type in ends:
                nodes, height = open_sizes.pop()
                height += 1
                anchor = open_anchors.pop()
                if anchor is not None:
                    ended[anchor] = (nodes, height)
            elif event_type is events.AliasEvent:
                nodes, height = _alias_size(event, open_anchors, ended, len(open_sizes), kind)
                added += nodes
                if added > MAX_ALIAS_NODES:
                    raise FormatError(
                        f"{kind}: aliases expand to more than {MAX_ALIAS_NODES:,} nodes, "
                        f"the limit for {kind}"
                    )
            elif event_type is events.DocumentStartEvent:
                ended.clear()  # anchors are local to a document
                continue
            else:
                continue
            if open_sizes:
                parent = open_sizes[-1]
                parent[0] += nodes
                if height > parent[1]:
                    parent[1] = height
    except yaml.YAMLError as err:
        raise _not_yaml(err, kind) from None


def _alias_size(
    event: Any,
    open_anchors: list[str | None],
    ended: dict[str, tuple[int, int]],
    depth: int,
    kind: str,
) -> tuple[int, int]:
    """(nodes, height) an alias stands for, expanded; :class:`FormatError` for an
    alias inside the node it names, one that names no anchor, or one that nests past
    :data:`~simulator.formats.bounds.MAX_NESTING` at ``depth``."""
    name = event.anchor
    mark = event.start_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    if name in open_anchors:
        raise FormatError(
            f"{kind}: {where}: alias *{name} is inside the node it names: "
            "recursive aliases are not allowed"
        )
    if name not in ended:
        raise FormatError(f"{kind}: not valid YAML: {where}: alias *{name} names no anchor")
    nodes, height = ended[name]
    if depth + height > MAX_NESTING:
        raise _too_deep(kind)
    return nodes, height


def load(data: bytes, kind: str) -> Any:
    """The document of ``data``, a ``kind`` file (a key of
    :data:`~simulator.formats.bounds.LIMITS`; None when it holds no document), or
    :class:`FormatError` naming the problem or the bound it goes past."""
    import yaml

    _check_bounds(data, kind)
    loader, _ = _yaml()
    try:
        return yaml.load(data, Loader=loader)  # a subclass of (C)SafeLoader
    except yaml.YAMLError as err:
        raise _not_yaml(err, kind) from None
    except ValueError:  # a value PyYAML cannot build: int() refused an integer's digits
        raise FormatError(f"{kind}: a number has too many digits to read") from None


def dump(doc: Any) -> str:
    """``doc`` as yaml.v3 writes it: maps indented by :data:`DEFAULT_INDENT` spaces and
    lists under their key, keys in the order given, strings quoted only when they must
    be, with double quotes, non-ASCII raw, no line wrapping."""
    import yaml

    _, dumper = _yaml()
    text: str = yaml.dump(
        doc,
        Dumper=dumper,
        indent=DEFAULT_INDENT,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )
    return text
