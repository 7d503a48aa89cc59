"""``--journal FILE``: what happens to a live session, written to its journal.

Owns: :class:`Journaling`, the :class:`~simulator.runners.live.Observer` that turns
what a live session tells into records of a
:class:`~simulator.hosts.journal.JournalWriter`: each line the session records (handed
over as it records it: the session itself keeps only a bounded few,
:mod:`simulator.core.transcript`), what of its chart it reached and which transport
faults fired (a ``cover`` record, before the events that show it), each event it
produced, how late each timer fired (a ``timer`` record, on the clock the live session
runs on), and how the run ended (:data:`simulator.hosts.journal.HOWS`).

Must not: decide anything about the run, or write anywhere but through the writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from simulator.core.coverage import Reached
from simulator.runners.hooks import Live, Observer

if TYPE_CHECKING:
    from simulator.core.interface import SessionLike
    from simulator.core.outcome import Outcome
    from simulator.hosts.journal import JournalWriter


class Journaling(Observer):
    """Journals one live session of ``session`` into ``writer``; ``clock`` is the live
    session's (timers are due on it)."""

    __slots__ = ("_clock", "_marks", "_told", "writer")

    def __init__(
        self,
        writer: JournalWriter,
        session: SessionLike,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self._clock = clock
        session.transcript.listener = writer.line  # each line as the session records it
        self._marks: tuple[tuple[int, ...], frozenset[str]] = ((0, 0, 0, 0), frozenset())
        """The session's coverage marks and the faults fired when last told."""
        self._told = Reached(session.command)
        """What the ``cover`` records said so far."""

    def produced(self, live: Live, outcome: Outcome) -> None:
        session = live.session
        self._cover(live)
        writer = self.writer
        for event, state in zip(outcome, outcome.states, strict=False):
            writer.event(session.now, event, state)
        writer.flush()  # a client that saw an event finds its record

    def fired(self, live: Live, due: float) -> None:
        self.writer.timer(live.now(), self._clock() - due)

    def ended(self, live: Live, code: int | None, how: str) -> None:
        self.writer.exit(live.now(), code, how)

    def _cover(self, live: Live) -> None:
        """Tell the journal what the session reached since it was last told."""
        session = live.session
        marks = session.coverage_marks, live.stage.faults.fired
        if marks == self._marks:
            return
        self._marks = marks
        reached, told = session.reached, self._told
        new = Reached(
            reached.command,
            reached.states - told.states,
            reached.transitions - told.transitions,
            reached.gates - told.gates,
            reached.failures - told.failures,
            marks[1] - told.faults,
        )
        self._told = msgspec.structs.replace(reached, faults=marks[1])
        self.writer.cover(session.now, new)
