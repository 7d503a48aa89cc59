"""What a live session calls out to: where its output goes, who hears what happens,
who may take its input.

Owns: :class:`Endpoint`, where the output goes (a process's pipes, a socket, a
counter), with one method per transport action that reaches the outside; :func:`carrier`,
the method an action is (adding a transport action is adding its type in
:mod:`simulator.scenario.faults` and its method here); :class:`Observer`, one object that
hears what happens to the run; :class:`Peer`, a control peer offered input and effects
first; and :class:`Live`, what an observer or a peer may use of the
:class:`~simulator.runners.live.LiveSession` that calls it.

Must not: decide anything about a session's lifecycle (the live session does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, get_args

from simulator.errors import SimulatorBug
from simulator.scenario import faults

if TYPE_CHECKING:
    from simulator.core.interface import SessionLike
    from simulator.core.outcome import Outcome
    from simulator.runners.output import OutputStage


class Live(Protocol):
    """What an observer or a peer may use of the live session that calls it."""

    @property
    def session(self) -> SessionLike: ...

    @property
    def stage(self) -> OutputStage: ...

    @property
    def owner(self) -> int:
        """Who the session is to its host (a load test's index)."""
        ...

    @property
    def code(self) -> int | None:
        """The run's exit code once it is over."""
        ...

    @property
    def hung(self) -> bool: ...

    def now(self) -> float:
        """Session time: seconds since start, less the time spent paused."""
        ...

    def next_wakeup(self) -> float | None:
        """When, on the clock, :meth:`tick` is due next; None: only input can move it."""
        ...

    def tick(self) -> None:
        """Go on: fire what is due, write what a pause held back."""
        ...

    def deliver(self, trigger: str, **payload: object) -> None:
        """Fire an internal trigger now: the answer to an effect."""
        ...


class Endpoint(Protocol):
    """Where a session's output goes: a process's pipes, a socket, a counter. Each
    transport action that reaches the outside is a call of the method named after it,
    with the action's fields (:func:`carrier`)."""

    def write(self, data: bytes) -> bool:
        """Hand ``data`` over; False when the reader has gone away."""
        ...

    def stderr(self, line: str) -> None:
        """One line on stderr (a ``stderr`` fault, or the simulator's own)."""
        ...

    def close_stdout(self) -> None:
        """Close the output: its reader sees the end; later writes vanish."""
        ...


class Observer:
    """What a live session tells of its run. Each method does nothing here: an observer
    overrides what it needs. One observer may watch many live sessions (each call says
    which)."""

    __slots__ = ()

    def produced(self, live: Live, outcome: Outcome) -> None:
        """The events of one session call, before they go out (and after the output
        stage chose their actions: the transport faults that fire are known)."""

    def fired(self, live: Live, due: float) -> None:
        """A timer fired; ``due`` is when, on the clock, it was due."""

    def settled(self, live: Live) -> None:
        """A call into ``live`` is over: its next wake-up may have moved."""

    def ended(self, live: Live, code: int | None, how: str) -> None:
        """The run is over with exit ``code``; or (``code`` None) it hangs, or it was
        stopped before its end. ``how`` says which (a ``how`` of the journal)."""


class Observers(Observer):
    """Several observers as one, each told in turn."""

    __slots__ = ("_each",)

    def __init__(self, *each: Observer) -> None:
        self._each = each

    def produced(self, live: Live, outcome: Outcome) -> None:
        for observer in self._each:
            observer.produced(live, outcome)

    def fired(self, live: Live, due: float) -> None:
        for observer in self._each:
            observer.fired(live, due)

    def settled(self, live: Live) -> None:
        for observer in self._each:
            observer.settled(live)

    def ended(self, live: Live, code: int | None, how: str) -> None:
        for observer in self._each:
            observer.ended(live, code, how)


def observers(*each: Observer | None) -> Observer | None:
    """One observer for those given (None ones left out; None when none is left)."""
    given = tuple(observer for observer in each if observer is not None)
    if len(given) > 1:
        return Observers(*given)
    return given[0] if given else None


class Peer(Protocol):
    """A control peer, offered first what it may take: lines read (control frames on
    the client's stream) and effects (an approval it answers)."""

    def frame(self, live: Live, line: bytes) -> bool:
        """True when ``line`` was a control frame, and taken."""
        ...

    def effect(self, live: Live, effect: object) -> bool:
        """True when the peer takes care of ``effect``."""
        ...


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def carrier(action_type: type, lifecycle: type) -> Callable[..., None]:
    """What carries out an action of ``action_type``, called with the live session and
    the action's fields in order. For a type named ``CloseStdout`` (``close_stdout``),
    the ``lifecycle`` class's own ``_act_close_stdout`` where one changes the run (the
    live session's ``write``, ``pause``, ``exit``, ``hang``, ``stop_reading``), else the
    endpoint's ``close_stdout``; SimulatorBug when neither exists."""
    name = _snake(action_type.__name__)
    own: Callable[..., None] | None = getattr(lifecycle, f"_act_{name}", None)
    if own is not None:
        return own
    if not callable(getattr(Endpoint, name, None)):
        raise SimulatorBug(f"no method carries out {action_type.__name__}: Endpoint has no {name}")

    def on_endpoint(live: Any, *fields: Any) -> None:
        getattr(live.endpoint, name)(*fields)

    return on_endpoint


def carriers(lifecycle: type) -> dict[type, Callable[..., None]]:
    """What carries out each action of :data:`simulator.scenario.faults.Action`."""
    return {action_type: carrier(action_type, lifecycle) for action_type in get_args(faults.Action)}
