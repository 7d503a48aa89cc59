"""What any session shows of itself, and what it keeps of its client: :class:`SessionView`.

Owns: the state every session has, whatever plays it (a chart, a cassette), and the
few ways it changes: the clock and timers (:mod:`simulator.core.timers`), the last
event shown (its vm, as the pieces it was joined from, its waiting_for and vm state),
whether the session is over, the lines the client sent (a bounded
:class:`~simulator.core.transcript.Transcript` of
:class:`~simulator.core.entries.JournalEntry`), and the API keys the session knows. A
rejected line repeats the last vm and waiting_for byte for byte; the ``done:true``
event ends the session and forgets every timer.

The rules that move a session (lines, quit, time) are
:class:`~simulator.core.session.BaseSession`'s, built on this.

Must not: read, write, sleep or look at the wall clock; decide what a line means.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import msgspec

from simulator.core.entries import JournalEntry
from simulator.core.eventbytes import encode_event
from simulator.core.interface import SessionError
from simulator.core.outcome import Outcome
from simulator.core.secrets import Secrets, redact
from simulator.core.timers import Timer, Timers
from simulator.core.transcript import Transcript


class SessionView(ABC):
    """The state of a session and the ways it changes; see the module docstring. What
    each member means is :class:`~simulator.core.interface.SessionLike`'s."""

    __slots__ = (
        "__weakref__",
        "_done",
        "_factor",
        "_last_vm_pieces",
        "_last_waiting_for",
        "_shown_state",
        "_started",
        "_timers",
        "secrets",
        "transcript",
    )

    def __init__(
        self, *, speed: float, factor: float = 1.0, now: float = 0.0, secrets: Secrets
    ) -> None:
        self._timers = Timers(now=now, speed=speed)
        self._factor = factor
        """What a speed given to ``set_speed`` is multiplied by (the scenario's)."""
        self._started = False
        self._done = False
        # The last vm, as the pieces its event was joined from (vm_pieces): a rejected
        # line and quit repeat it. A long task list is a piece its vm keeps anyway.
        self._last_vm_pieces: Sequence[bytes] = (b"{}",)
        self._last_waiting_for: tuple[str, ...] = ()
        self._shown_state = ""
        self.transcript: Transcript[JournalEntry] = Transcript()
        """What the session keeps of the lines it read: counts, and a bounded few whole."""
        self.secrets = secrets
        """The API keys this session knows (the world's, each one a line named): what the
        simulator writes or answers of it is redacted with them."""

    @property
    @abstractmethod
    def command(self) -> str: ...

    @property
    @abstractmethod
    def state(self) -> str: ...

    @property
    def done(self) -> bool:
        return self._done

    @property
    def now(self) -> float:
        return self._timers.now

    @property
    def shown_state(self) -> str:
        return self._shown_state

    @property
    def waiting_for(self) -> tuple[str, ...]:
        return self._last_waiting_for

    @property
    def journal(self) -> list[JournalEntry]:
        return self.transcript.recent

    @property
    def violations(self) -> list[JournalEntry]:
        return self.transcript.violations

    def pending(self) -> list[Timer]:
        return self._timers.pending()

    def snapshot(self) -> dict[str, Any]:
        timers = self._timers
        return {
            "command": self.command,
            "state": self._shown_state,
            "chart_state": self.state,
            "vm": redact(msgspec.json.decode(b"".join(self._last_vm_pieces))),
            "waiting_for": list(self._last_waiting_for),
            "done": self._done,
            "clock": timers.now,
            "speed": timers.speed,
            "timers": timers.as_json(),
        }

    # -- the ways it changes ----------------------------------------------------------

    def _starting(self) -> None:
        if self._started:
            raise SessionError("start() was already called")
        self._started = True

    def _require_started(self) -> None:
        if not self._started:
            raise SessionError("call start() first")

    def _record(self, line: bytes, error: str) -> None:
        """Keep a line the client sent, with what was expected when it came."""
        self.secrets.learn(line)
        waiting_for, done = self._last_waiting_for, self._done
        entry = JournalEntry(self._timers.now, line, self._shown_state, waiting_for, done, error)
        self.transcript.add(entry)

    def _keep(self, vm: Sequence[bytes], waiting_for: tuple[str, ...]) -> None:
        self._last_vm_pieces, self._last_waiting_for = vm, waiting_for

    def _finish(self, out: Outcome, vm: Sequence[bytes], vm_state: str) -> None:
        """The ``done:true`` event, with ``vm``: the session is over."""
        self._done = True
        self._timers.clear()
        out.append(encode_event(vm, (), True, ""))
        self._keep(vm, ())
        out.states.append(vm_state)

    def _reject(self, out: Outcome, text: str) -> Outcome:
        """The answer to a refused line: the last vm and waiting_for, and ``text``."""
        out.append(encode_event(self._last_vm_pieces, self._last_waiting_for, False, text))
        out.states.append(self._shown_state)
        return self._close(out)

    def _close(self, out: Outcome) -> Outcome:
        """``out`` as a call returns it: the done flag set."""
        out.done = self._done
        return out
