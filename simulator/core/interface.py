"""The one interface every runner drives a session through: :class:`SessionLike`.

Owns: the members a runner may use of a session, whatever plays it: a chart
(:class:`~simulator.core.session.Session`) or a cassette
(:class:`~simulator.core.replay.ReplaySession`). The process runner, the live session
on any loop, virtual time, the admin API and the pytest plugin are typed against it, so
anything that offers these members runs in all of them. And :class:`SessionError`, what
a session raises when its caller uses it out of order or gives it a bad value.

Lines and time go in, :class:`~simulator.core.outcome.Outcome` values come out::

    out = session.start()              # the first events, before anything is read
    out = session.feed(line)           # a command line, at the time of the last advance
    deadline = session.next_deadline() # when a timer wants to fire, or None
    out = session.advance(deadline)    # fire every timer due by then, in order

Must not: hold any behaviour; read, write or look at the clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from simulator.errors import MisuseError

if TYPE_CHECKING:
    from simulator.core.coverage import Reached
    from simulator.core.entries import JournalEntry
    from simulator.core.outcome import Outcome
    from simulator.core.secrets import Secrets
    from simulator.core.timers import Timer
    from simulator.core.transcript import Transcript
    from simulator.scenario.failures import Failure


class SessionError(MisuseError):
    """The session was used out of order or given a bad value (a caller's bug, not the
    client's)."""


class SessionLike(Protocol):
    """What a runner uses of a session."""

    transcript: Transcript[JournalEntry]
    """What the session keeps of the client's lines; its ``listener`` hears each one."""
    secrets: Secrets
    """The API keys the session knows: what is written of it is redacted with them."""
    peer_attached: bool
    """A control peer can answer requests (set by the runner)."""

    @property
    def command(self) -> str:
        """What plays: the zread command of the chart, or ``replay``."""
        ...

    @property
    def done(self) -> bool:
        """True once the ``done:true`` event has been produced."""
        ...

    @property
    def now(self) -> float:
        """The session's clock: the latest time given to :meth:`advance`."""
        ...

    @property
    def speed(self) -> float:
        """The factor every delay is multiplied by (``--speed`` times the scenario's)."""
        ...

    @property
    def state(self) -> str:
        """The state it is in (a chart's is finer than ``vm.state`` where one zread
        state has gates)."""
        ...

    @property
    def shown_state(self) -> str:
        """The vm state the last event showed (config's is ``editing``)."""
        ...

    @property
    def waiting_for(self) -> tuple[str, ...]:
        """The waiting_for of the last event."""
        ...

    @property
    def armed(self) -> int:
        """How many timers were ever armed: a timer whose ``seq`` is above a reading of
        this was armed after it."""
        ...

    @property
    def journal(self) -> list[JournalEntry]:
        """The lines the client sent (blank ones aside), with what was expected then:
        the most recent 1,000, oldest first (:mod:`simulator.core.transcript`;
        ``transcript.total`` counts them all)."""
        ...

    @property
    def violations(self) -> list[JournalEntry]:
        """The client's mistakes, rejected lines and anything sent after done, oldest
        first: the first 10 of the session and the most recent 100 after them
        (``transcript.total_violations`` counts them all)."""
        ...

    @property
    def reached(self) -> Reached:
        """What of its chart the session reached so far: states entered, transitions
        taken, gates the client answered, failures met (:mod:`simulator.core.coverage`)."""
        ...

    @property
    def coverage_marks(self) -> tuple[int, int, int, int]:
        """:attr:`reached` as the bit masks it is made from, (states, transitions,
        gates, failures): cheap to compare, for a runner that journals what is new."""
        ...

    def start(self) -> Outcome:
        """The first events. Call once, before anything else."""
        ...

    def feed(self, line: bytes) -> Outcome:
        """Answer one line from the client (without its newline), at :attr:`now`."""
        ...

    def quit(self) -> Outcome:
        """End the session as ``quit`` does: the vm as it stood, ``done:true``."""
        ...

    def deliver(self, trigger: str, **payload: Any) -> Outcome:
        """Fire an internal trigger now (a runner's answer to an effect); its event."""
        ...

    def resolve(self, effect: object, result: object) -> Outcome:
        """Hand the result of an effect back: no event by itself, but what it does may
        arm a timer or ask for more effects."""
        ...

    def advance(self, now: float, *, limit: int = 0) -> Outcome:
        """Move the clock to ``now`` and fire every timer due by then, in order.

        With ``limit``, stop after that many events; the clock then stays at the last
        timer fired, and the next call goes on where this one stopped. A runner uses it
        to write events as they come rather than all at once.
        """
        ...

    def idle_until(self, now: float) -> bool:
        """Move the clock to ``now`` when that fires nothing: no timer is due by then
        and the session is not done (True); else False, and nothing changes. What
        :meth:`advance` does then, without an :class:`~simulator.core.outcome.Outcome`
        to make and hand over: a real-time runner calls it after every firing, and
        :meth:`advance` only when it returns False."""
        ...

    def step(self) -> Outcome:
        """Fire the next timer, whenever it is due, and only that one (with whatever
        events it writes); the clock moves to its deadline. Nothing pending: nothing
        happens. A real-time runner calls it for each timer that is due, so that it can
        read its input between firings."""
        ...

    def next_deadline(self) -> float | None:
        """When the next timer is due, or None when nothing is pending."""
        ...

    def next_timer(self) -> Timer | None:
        """The timer that fires next, or None when nothing is pending."""
        ...

    def pending(self) -> list[Timer]:
        """The timers still to fire, soonest first."""
        ...

    def set_speed(self, speed: float) -> None:
        """Change ``--speed`` now; pending timers keep the share of their wait done."""
        ...

    def inject(self, failure: Failure) -> None:
        """Add a domain failure ahead of the scenario's (the first match wins)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The session as a control peer sees it: plain data, JSON-ready."""
        ...
