"""The endpoint of one in-process load-test session: what the process would write,
counted, and its gates answered.

Owns: :class:`Sink`, the :class:`~simulator.runners.live.Endpoint` of each session of
an in-process run (:mod:`simulator.tools.load.inprocess`). It counts the events and
bytes the process would write, and answers gates with a
:class:`~simulator.tools.client.ReferenceClient`, fed back on the loop as a client
process answers after reading the event. A line is decoded only when ``waiting_for``
holds a gate, or when a transport fault broke the one-write-per-event rule (then the
writes are cut into lines first). What it needs of its run is a :class:`SinkRun`.

Must not: change what the session writes, or write anything anywhere.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol

from simulator.tools.client import ReferenceClient
from simulator.tools.load.common import EVENT_KEYS

if TYPE_CHECKING:
    from simulator.runners.aio import Channel, Hub
    from simulator.tools.load.stats import Stats


class SinkRun(Protocol):
    """What a sink needs of the run it belongs to."""

    @property
    def stats(self) -> Stats: ...

    @property
    def hub(self) -> Hub: ...

    @property
    def plain(self) -> bool:
        """Without transport faults every write is exactly one event line."""
        ...

    @property
    def gates(self) -> dict[tuple[str, ...], bool]:
        """:meth:`needs_answer` of each waiting_for met so far."""
        ...

    def needs_answer(self, waiting_for: tuple[str, ...]) -> bool:
        """True when the reference client may answer an event with this waiting_for."""
        ...


class Sink:
    """The endpoint of one in-process session: counts, and answers gates."""

    __slots__ = (
        "answers",
        "bytes",
        "channel",
        "client",
        "closed",
        "deadline",
        "events",
        "finished",
        "index",
        "pending",
        "problem",
        "run",
        "scheduled",
        "started",
    )

    def __init__(self, run: SinkRun, index: int, started: float, timeout: float) -> None:
        self.run = run
        self.index = index
        self.started = started
        self.scheduled = started
        self.deadline = started + timeout
        self.channel: Channel | None = None
        self.client: ReferenceClient | None = None
        self.events = 0
        self.bytes = 0
        self.answers = 0
        self.pending = b""
        self.problem = ""
        self.closed = False
        self.finished = False

    def write(self, data: bytes) -> bool:
        if self.closed:
            return True  # stdout points at /dev/null: written, and lost
        run, size = self.run, len(data)
        self.bytes += size
        stats = run.stats
        stats.bytes += size
        if run.plain:  # one event, one write
            self.events += 1
            stats.events += 1
            channel = self.channel
            assert channel is not None
            waiting_for = channel.session.waiting_for
            answer = run.gates.get(waiting_for)
            if answer is None:
                answer = run.needs_answer(waiting_for)
            if answer:
                self._line(data)
            return True
        data = self.pending + data
        *complete, self.pending = data.split(b"\n")
        self.events += len(complete)
        stats.events += len(complete)
        for line in complete:
            self._line(line)
        return True

    def stderr(self, line: str) -> None:
        pass

    def close_stdout(self) -> None:
        self.closed = True
        self.problem = self.problem or "stdout closed before done:true"

    def _line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            self.problem = self.problem or f"not a JSON line: {line[:80]!r}"
            return
        if not isinstance(event, dict) or any(key not in event for key in EVENT_KEYS):
            self.problem = self.problem or f"not an event: {line[:80]!r}"
            return
        if self.client is None:
            self.client = ReferenceClient()
        answer = self.client.answer(event)
        if answer is not None and self._reading():
            self.answers += 1
            self.run.hub.loop.call_soon(self._feed, answer[:-1])

    def _feed(self, line: bytes) -> None:
        if self.channel is not None and self._reading() and not self.finished:
            self.channel.feed(line)

    def _reading(self) -> bool:
        """The session still reads what the client sends (no stop_reading fault)."""
        return self.channel is not None and self.channel.reading
