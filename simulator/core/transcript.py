"""What a session remembers of the lines it read: counts of all, a bounded few whole.

Owns: :class:`Transcript`, the bounded record of a session's lines (its journal
entries, :class:`~simulator.core.entries.JournalEntry`), and the numbers that bound it.
A session may read millions of lines (a client in a loop, a fuzzer); what it keeps of
them does not grow with their number:

- counts: every line (:attr:`Transcript.total`) and every violation
  (:attr:`Transcript.total_violations`), for ever;
- the most recent :data:`RECENT_LINES` lines (:attr:`Transcript.recent`);
- the first :data:`FIRST_VIOLATIONS` violations, kept for the whole session (the first
  mistake is usually the cause of the others), and the most recent
  :data:`RECENT_VIOLATIONS` after them (:attr:`Transcript.violations`, oldest first).

Each of those three holds at most :data:`KEPT_BYTES` of lines (a line is up to 1 MiB):
past it, its oldest entries go first, its newest one always stays, and the first
violations stop at the first that would not fit (later ones are recent ones).

Every entry is handed to :attr:`Transcript.listener` as it comes (a ``--journal``
file gets every line), before anything is dropped.

Must not: read, write or know what an entry means beyond its ``line`` and ``error``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final, Generic, Protocol, TypeVar

RECENT_LINES: Final = 1000
"""How many of the latest lines a session keeps whole (``Session.journal``)."""

FIRST_VIOLATIONS: Final = 10
"""How many of its first violations a session keeps for its whole life."""

RECENT_VIOLATIONS: Final = 100
"""How many of the latest violations after the first ones a session keeps."""

KEPT_BYTES: Final = 2 << 20
"""The most bytes of lines each of the three windows holds (its newest entry aside)."""


class _Entry(Protocol):
    @property
    def line(self) -> bytes: ...

    @property
    def error(self) -> str: ...


E = TypeVar("E", bound=_Entry)


class _Window(Generic[E]):
    """The latest entries, at most ``limit`` of them and :data:`KEPT_BYTES` of lines
    (the newest always kept)."""

    __slots__ = ("entries", "size")

    def __init__(self, limit: int) -> None:
        self.entries: deque[E] = deque(maxlen=limit)
        self.size = 0

    def add(self, entry: E) -> None:
        entries = self.entries
        if len(entries) == entries.maxlen:
            self.size -= len(entries[0].line)  # the one append pushes out
        entries.append(entry)
        self.size += len(entry.line)
        while self.size > KEPT_BYTES and len(entries) > 1:
            self.size -= len(entries.popleft().line)


class Violations(list[E]):
    """A list of violations that prints each as its one line of text (``str``),
    numbered: what a failing ``assert not session.violations`` shows, rather than each
    entry's fields (pytest shortens a long one in the middle; ``-vv`` shows it whole)."""

    def __repr__(self) -> str:
        if not self:
            return "[]"
        return "[" + " | ".join(f"{i}. {entry}" for i, entry in enumerate(self, 1)) + "]"


class Transcript(Generic[E]):
    """A session's lines as it keeps them; see the module docstring."""

    __slots__ = (
        "_first",
        "_first_size",
        "_late",
        "_recent",
        "listener",
        "total",
        "total_violations",
    )

    def __init__(self) -> None:
        self.total = 0
        """Every line recorded, kept or not."""
        self.total_violations = 0
        """Every violation recorded (an entry whose ``error`` is set), kept or not."""
        self.listener: Callable[[E], None] | None = None
        """Given each entry as it is recorded (a journal writer's ``line``)."""
        # Made when first needed (a deque costs ~0.8 KB; thousands of sessions need none).
        self._recent: _Window[E] | None = None
        self._first: list[E] | None = None
        self._first_size = 0
        self._late: _Window[E] | None = None

    def add(self, entry: E) -> None:
        """Record one line: counted, handed to the listener, kept as the bounds allow."""
        self.total += 1
        if self.listener is not None:
            self.listener(entry)
        if self._recent is None:
            self._recent = _Window(RECENT_LINES)
        self._recent.add(entry)
        if not entry.error:
            return
        self.total_violations += 1
        size = len(entry.line)
        if self._first is None:
            self._first, self._first_size = [entry], size  # the first always stays
            return
        first_open = self._late is None and len(self._first) < FIRST_VIOLATIONS
        if first_open and self._first_size + size <= KEPT_BYTES:
            self._first.append(entry)
            self._first_size += size
            return
        if self._late is None:
            self._late = _Window(RECENT_VIOLATIONS)
        self._late.add(entry)

    @property
    def recent(self) -> list[E]:
        """The most recent lines kept, oldest first (all of them while fewer than
        :data:`RECENT_LINES` came)."""
        return [] if self._recent is None else list(self._recent.entries)

    @property
    def violations(self) -> Violations[E]:
        """The violations kept, oldest first: the first ones, then the most recent
        ones after them; :attr:`omitted_violations` says how many are left out between."""
        kept = Violations(self._first or [])
        if self._late is not None:
            kept.extend(self._late.entries)
        return kept

    @property
    def omitted_violations(self) -> int:
        """How many violations were recorded but are no longer kept."""
        late = 0 if self._late is None else len(self._late.entries)
        return self.total_violations - len(self._first or ()) - late
