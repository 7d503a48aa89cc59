"""A list of structs that keeps its own JSON between events, re-encoding only what changed.

Owns: :class:`SplicedList`. The envelope inlines what its ``json_fragment()`` returns
(:mod:`simulator.core.envelope`), so a vm holding one is encoded without walking the
items that did not change. generate's page tasks are one (``statecharts.generate``).

Must not: know what its items are, beyond msgspec structs the envelope can encode.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Generic, TypeVar

import msgspec

from simulator.core.eventbytes import encode_part, encode_parts

S = TypeVar("S", bound=msgspec.Struct)


class SplicedList(Generic[S]):
    """A list of structs, and its JSON, kept between events: an event re-encodes only
    the items changed since the last one and copies the rest around them.

    The JSON is one buffer, kept with the length of each task in it. Re-making it is
    one sequential copy, where encoding the list walks every task and its strings, each
    elsewhere in memory (in a load test, with thousands of sessions, those walks miss
    the caches: ~14 us an event for 50 tasks). The session keeps the buffer as a piece
    of its last vm rather than a copy of it. (``benchmarks/instructions.py``: 18 % fewer
    instructions an event with 50 pages; with the default scenario's 16, as many as one
    call encoding the list.)

    Read an item with ``items[i]``; change it only through ``items.edit(i)``, which
    marks it for encoding. Its JSON is that of the list of items.
    """

    __slots__ = ("_dirty", "_fragment", "_items", "_lengths", "_mark")

    def __init__(self, items: list[S] | None = None) -> None:
        self._items = items or []
        self._fragment: bytes | None = None  # None: not encoded yet
        self._lengths = array("I")  # of each item's JSON in the fragment
        self._dirty: list[int] = []  # indexes edited since the last encoding; repeats allowed
        self._mark = (0, 1)  # an item's index, and where it begins in the fragment

    def __getitem__(self, index: int) -> S:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[S]:
        return iter(self._items)

    def edit(self, index: int) -> S:
        """The item at ``index``, marked as changed."""
        item = self._items[index]  # IndexError before anything is marked
        self._dirty.append(index)
        return item

    def json_fragment(self) -> bytes:
        fragment = self._fragment
        dirty = self._dirty
        if fragment is None:
            parts = encode_parts(self._items)
            self._lengths = array("I", map(len, parts))
            fragment = b"[" + b",".join(parts) + b"]"
            self._mark = (0, 1)
        elif dirty:
            if len(dirty) == 1 or (len(dirty) == 2 and dirty[0] == dirty[1]):
                changed = dirty[:1]  # one item, maybe edited twice: the common event
            else:
                changed = sorted(set(dirty))
            fragment = self._splice(fragment, changed)
        self._fragment = fragment
        dirty.clear()
        return fragment

    def _splice(self, fragment: bytes, changed: list[int]) -> bytes:
        """``fragment`` with the items at ``changed`` (ascending) encoded anew.

        Where an item begins is counted from :attr:`_mark`, the last item changed and
        where it begins: the items that change are few and next to each other (the
        pages running), so the lengths added up are a few, not all those before."""
        lengths, items = self._lengths, self._items
        view = memoryview(fragment)
        pieces: list[bytes | memoryview] = []
        copied = 0  # the old fragment is in pieces up to here
        written = 0  # and the new one is this long
        index, start = self._mark  # item ``index`` begins at ``start`` in the old fragment
        if changed[0] < index:
            start -= sum(lengths[changed[0] : index]) + (index - changed[0])
            index = changed[0]
        for changed_index in changed:
            start += sum(lengths[index:changed_index]) + (changed_index - index)
            part = encode_part(items[changed_index])
            pieces += (view[copied:start], part)
            written += start - copied
            self._mark = (changed_index, written)
            written += len(part)
            copied = start + lengths[changed_index]
            index, start = changed_index + 1, copied + 1
            lengths[changed_index] = len(part)
        pieces.append(view[copied:])
        return b"".join(pieces)
