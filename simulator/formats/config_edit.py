"""config.yaml saved over the user's file: only the values that changed change.

Owns: :func:`save_config`, the encoder of a config.yaml that already exists (a new
one is :func:`simulator.formats.config.encode_config`'s).

Saving over an existing file (:func:`save_config`) keeps what the user wrote:
comments, blank lines, anchors and aliases, key order, quoting and indentation, line
ends and encoding. That takes ruamel.yaml's round-trip mode, which is slow to import and
to run (pure Python), so it is imported by :func:`save_config` only, and only when a
value differs. ruamel re-emits the whole document and normalizes some layouts on the
way, so its output is not used as it is: the document is dumped once before the change
and once after, and only the lines that differ between those two are applied to the
user's text (a three-way merge by lines). Then the result is checked: every line but
those of the changed values is the user's, byte for byte
(:class:`~simulator.formats.config_keep.Kept` says which lines may change), and the
file reads back as intended. When no result passes (ruamel cannot read the file, a
key is written twice where the change falls, ruamel would rewrite a line around the
change), the save is refused (:class:`ConfigFileError`, one line naming the line that
would not be kept): the file is never rewritten from scratch.

Known limits of the round-trip save:

- A line whose value changes is written as ruamel writes that line: ``model:   x``
  becomes ``model: y``, ``language: ~`` becomes ``language: de``; an end-of-line
  comment after it keeps its column when the new value leaves room, else follows it
  after one space.
- A file ruamel cannot load while PyYAML reads it (a tab after ``key:`` or before a
  comment), or whose lines around a change ruamel writes otherwise (a flow map over
  several lines, a scalar folded over several lines), cannot be saved until that line
  is written otherwise.
- One indentation per file: the first nested block map and the first block list under
  a key set the indentation of the lines the save adds (4, and lists as ``    - ``,
  when the file has neither).
- A value changed through an alias changes the anchored node, as the file says the two
  are one (with ``llm: *d``, a new model changes ``d``). A changed scalar that carries
  an anchor keeps it; the aliases naming it are written out with the old value (their
  keys did not change).
- A key added before the first key of a map goes below the comment lines above that
  key. A key added after another takes over the comment lines that followed it, so
  they stay above the key they were written for.
- ruamel is pure Python: saving a file near the 64 KiB limit takes a second or two.

Must not: do I/O, or import ruamel before a save needs it.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from simulator.formats.bounds import MAX_NESTING, FormatError, check_size
from simulator.formats.config import (
    CONFIG_KEYS,
    KEY_ORDER,
    ConfigFileError,
    apply_values,
    changed_values,
    default_config,
    encode_config,
    needs_quotes,
    read_config,
    update_config,
)
from simulator.formats.config_keep import Kept, refused
from simulator.formats.linemerge import merge
from simulator.formats.yamlv3 import DEFAULT_INDENT


def save_config(old: bytes | None, values: Mapping[str, str]) -> bytes:
    """The bytes of config.yaml once ``values`` (by json_key) are saved into ``old``,
    the file's bytes (``None``: there is no file yet, so zread's defaults with
    ``values`` in zread's layout).

    ``old`` is read bounded, as :func:`read_config` reads it (the same errors). Only the
    values that differ from what the file shows change (``3`` and ``"3"`` are the same);
    a missing map or key is added in zread's order; ``max_concurrent`` and
    ``max_retries`` are written as integers (:class:`ConfigFileError` if they are not
    one). Everything else stays as the user wrote it (see the module's limits); when
    nothing differs, ``old`` itself is returned. A file larger than config.yaml may be
    (a client saved a key of 100,000 characters) is :class:`ConfigFileError`: the
    simulator would refuse to read it back."""
    new = _save(old, values)
    if new is not old:
        _check_size(new)
    return new


def _check_size(new: bytes) -> None:
    try:
        check_size(new, "config.yaml")
    except FormatError as err:
        raise ConfigFileError(f"{err}: not saved") from None


def _save(old: bytes | None, values: Mapping[str, str]) -> bytes:
    if old is None:
        return encode_config(update_config(default_config(), values))
    doc = read_config(old)
    changes = changed_values(doc, values)
    if not changes:
        return old
    apply_values(doc, changes)  # what the saved file must read as
    kept = Kept(old, [CONFIG_KEYS[key] for key in changes])
    problem: tuple[int, str] | None = None
    for candidate in _round_trips(kept, changes):
        result = kept.check(candidate)
        if isinstance(result, bytes):
            _check_size(result)
            try:
                if read_config(result) == doc:
                    return result
            except ConfigFileError:
                pass
            result = kept.misread(candidate)
        problem = problem or result
    raise refused(*(problem or (0, "the round trip reads it otherwise than zread")))


def _round_trips(kept: Kept, changes: Mapping[str, str | int]) -> list[str]:
    """The texts that keep what the user wrote, best first: the user's text with the
    lines ruamel changes merged in, then ruamel's whole output (each line ending in
    ``\\n``; the caller checks each one). :func:`refused` when ruamel cannot take the
    file."""
    text = kept.text
    base, theirs = _ruamel_edit(text, changes, kept.anchors)
    if base is None:  # no document at all: comments or nothing
        added = encode_config(update_config({}, {k: str(v) for k, v in changes.items()}))
        return [text + added.decode()]
    merged = merge(text, base, theirs)
    return [new for new in (merged, theirs) if new is not None]


def _ruamel_edit(
    text: str, changes: Mapping[str, str | int], anchors: Mapping[tuple[str, ...], str]
) -> tuple[str | None, str]:
    """ruamel's dump of ``text`` before and after ``changes`` (a value at a path of
    ``anchors`` keeps its anchor); ``(None, "")`` when the file holds no document,
    :func:`refused` naming the line when ruamel cannot load it or reads it otherwise."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.allow_duplicate_keys = True
    yaml.width = 1 << 30

    def dump(doc: Any) -> str:
        out = io.StringIO()
        yaml.dump(doc, out)
        return out.getvalue()

    try:
        doc = yaml.load(text)
        if doc is None:
            return None, ""
        if not isinstance(doc, CommentedMap):
            raise refused(0, "the round trip reads it otherwise than zread")
        mapping, sequence, offset = _indents(doc)
        yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
        base = dump(doc)
        for key, value in changes.items():
            path = CONFIG_KEYS[key]
            if not _set(doc, path, value, anchors.get(path)):
                raise refused(0, "the round trip reads it otherwise than zread")
        return base, dump(doc)
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        problem = " ".join(str(getattr(err, "problem", None) or "it is not YAML").split())
        raise refused(
            mark.line if mark is not None else 0, f"the round trip cannot read it: {problem}"
        ) from None


def _indents(doc: Any) -> tuple[int, int, int]:
    """The file's indentation as ruamel's ``indent()`` takes it: (mapping, sequence,
    offset), from the first block map and the first block list written under a key."""
    from ruamel.yaml.comments import CommentedMap

    mapping: int | None = None
    sequence: int | None = None
    offset: int | None = None
    for value, column in _nested_blocks(doc):
        if isinstance(value, CommentedMap):
            if mapping is None and value.lc.col > column:
                mapping = value.lc.col - column
        elif sequence is None:
            item_column = value.lc.item(0)[1]
            if value.lc.col >= column and item_column >= value.lc.col + 2:
                offset = value.lc.col - column
                sequence = item_column - column
        if mapping is not None and sequence is not None:
            break
    if mapping is None:
        mapping = DEFAULT_INDENT
    if sequence is None or offset is None:
        sequence, offset = mapping + 2, mapping
    return mapping, sequence, offset


def _nested_blocks(doc: Any) -> Iterator[tuple[Any, int]]:
    """Each block map or list, not empty, written under a key of a block map (below
    that key's line), with the key's column; breadth first from ``doc``."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    todo: deque[Any] = deque([doc])
    while todo:
        node = todo.popleft()
        if isinstance(node, CommentedSeq):
            todo.extend(item for item in node if isinstance(item, CommentedMap | CommentedSeq))
            continue
        if not isinstance(node, CommentedMap) or node.fa.flow_style():
            continue
        for key in list(node):
            value = node[key]
            if not isinstance(value, CommentedMap | CommentedSeq) or not value:
                continue
            todo.append(value)
            column = _key_column(node, key, value)
            if column is not None:
                yield value, column


def _key_column(node: Any, key: Any, value: Any) -> int | None:
    """The column of ``key`` in the block map ``node``, when its ``value`` is a block
    collection written on the lines below it; None when the value is a flow collection,
    is written elsewhere (an alias) or the key was merged in from elsewhere."""
    try:
        line, column = node.lc.key(key)
    except (KeyError, TypeError):  # a key merged in from elsewhere
        return None
    if value.fa.flow_style() or value.lc.line is None or value.lc.line <= line:
        return None  # a flow collection, or one written elsewhere (an alias)
    return int(column)


def _set(doc: Any, path: tuple[str, ...], value: str | int, anchor: str | None) -> bool:
    """``value`` written at ``path`` in ruamel's document, in the style of the value it
    replaces, with ``anchor`` if it has one; False if a map on the way is not one
    (ruamel and PyYAML disagree)."""
    from ruamel.yaml.comments import CommentedMap

    node = doc
    added: tuple[Any, tuple[str, ...], str, Any] | None = None  # a new map, filled first
    for depth, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = CommentedMap()
            if part in node:  # null: the map takes its place
                node[part] = child
            elif added is None:
                added = (node, path[:depth], part, child)
            else:
                node[part] = child
        elif not isinstance(child, CommentedMap):
            return False
        node = child
    leaf = path[-1]
    styled = _styled(node.get(leaf), value, anchor)
    if leaf in node:
        node[leaf] = styled
    else:
        _insert(node, path[:-1], leaf, styled)
    if added is not None:
        _insert(*added)
    return True


def _styled(old: Any, value: str | int, anchor: str | None = None) -> Any:
    """``value`` as ruamel is to write it: quoted as ``old`` was, else plain or double
    quoted as zread would write it; with ``anchor``, if any."""
    from ruamel.yaml.scalarint import ScalarInt
    from ruamel.yaml.scalarstring import (
        DoubleQuotedScalarString,
        FoldedScalarString,
        LiteralScalarString,
        PlainScalarString,
        SingleQuotedScalarString,
    )

    if isinstance(value, int):
        return value if anchor is None else ScalarInt(value, anchor=anchor)
    kept = (SingleQuotedScalarString, DoubleQuotedScalarString)
    blocks = (LiteralScalarString, FoldedScalarString)
    style: type[Any] = PlainScalarString
    if isinstance(old, kept) or (isinstance(old, blocks) and "\n" in value):
        style = type(old)
    elif needs_quotes(value):
        style = DoubleQuotedScalarString
    if style is PlainScalarString and anchor is None:
        return value
    return style(value) if anchor is None else style(value, anchor=anchor)


def _insert(node: Any, where: tuple[str, ...], key: str, value: Any) -> None:
    """``key`` added to ruamel's map ``node`` (at ``where``) in zread's order: after the
    last of zread's keys that come before it, else before the first that comes after
    it, else at the end. The comment lines that followed the key before it move
    below the new key, so they stay above the key they were written for."""
    order = KEY_ORDER.get(where, ())
    keys = list(node)
    rank = order.index(key) if key in order else len(order)
    before = [i for i, k in enumerate(keys) if k in order and order.index(k) < rank]
    after = [i for i, k in enumerate(keys) if k in order and order.index(k) > rank]
    position = before[-1] + 1 if before else after[0] if after else len(keys)
    node.insert(position, key, value)
    if position > 0 and not node.fa.flow_style():
        _move_comment(node, keys[position - 1], key)


def _last_entry(node: Any, key: Any) -> tuple[Any, Any]:
    """Where ruamel keeps the comment that follows ``node[key]`` in the file: the map
    or list, and the key or index, of the last scalar written in that value."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    for _ in range(MAX_NESTING + 1):
        value = node[key]
        if not isinstance(value, CommentedMap | CommentedSeq) or not value:
            break
        anchor = value.yaml_anchor()
        if value.fa.flow_style() or (anchor is not None and anchor.value is not None):
            break  # a flow collection's comment is the key's; an anchor may be elsewhere
        node, key = value, (list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1)
    return node, key


def _move_comment(node: Any, previous: Any, key: Any) -> None:
    """The full comment lines (and blank lines) after ``node[previous]`` moved after
    ``node[key]``; an end-of-line comment stays where it is."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    holder, at = _last_entry(node, previous)
    slot = 2 if isinstance(holder, CommentedMap) else 0
    entry = holder.ca.items.get(at)
    if not entry or entry[slot] is None:
        return
    token = entry[slot]
    head, _, rest = token.value.partition("\n")
    if not rest:
        return
    if head:
        token.value = head + "\n"
    else:
        entry[slot] = None
    target, target_key = _last_entry(node, key)
    moved = CommentToken("\n" + rest, CommentMark(0))
    if isinstance(target, CommentedMap):
        target.ca.items[target_key] = [None, None, moved, None]
    else:
        target.ca.items[target_key] = [moved, None, None, None]
