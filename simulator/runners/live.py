"""One session in real time, whatever loop runs it: its clock, its output, its lifecycle.

Owns: :class:`LiveSession`, the one place the lifecycle of FIDELITY section 4 is
written, for every real-time runner (the process with or without ``--control``, pipes
on a thread, thousands of sessions on one asyncio loop):

1. the first event is written before anything is read (:meth:`LiveSession.start`);
2. a line is answered after the timers due before it have fired;
3. a signal is ``quit``; end of input is not: zread keeps running, its timers go on
   firing, and once it waits for an answer nobody can give, it says so in one line on
   stderr and waits (a client that spawns it with a null stdin gets a whole run); with
   ``quit_at_eof`` (``--eof quit``, for scripts) it quits at that moment instead;
4. a reader that went away (stdout closed) ends the run quietly, code 0;
5. once ``done:true`` is written (after whatever a split event still had to write)
   the run is over, code 0;
6. transport faults: ``exit`` ends the run with its code, ``hang`` stops everything
   for good, ``close_stdout`` and ``stop_reading`` do what they say.

Each session call's :class:`~simulator.core.outcome.Outcome` goes one way: its effects
are performed (a control peer first offered those it answers), any result goes back
to the session as a new input, and its events go through the
:class:`~simulator.runners.output.OutputStage` to actions, each a method
(:mod:`simulator.runners.hooks`): ``Write(data)`` is ``_act_write(data)``,
``Stderr(line)`` is ``endpoint.stderr(line)``. A split event's pauses are waits, not
sleeps: the rest of its actions wait in a backlog until :meth:`LiveSession.next_wakeup`.
What happens is told to one observer given at construction (``--journal``'s, a hub's).

Over 400 lines, for a reason: it is the one place the lifecycle above is written; split,
one rule would have to be read in two modules.

Must not: sleep, block or read anything. The loop around it reads input, waits until
:meth:`LiveSession.next_wakeup`, and calls in; the clock it is given is its only
sense of time.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Final

import msgspec

from simulator.core.interface import SessionLike
from simulator.core.lines import LineBuffer
from simulator.core.outcome import Outcome
from simulator.hosts.effects import EffectHost
from simulator.runners.hooks import Endpoint, Observer, Peer, carrier, carriers
from simulator.runners.output import OutputStage
from simulator.scenario import faults

READ_SIZE = 1 << 16
"""How much of the client's stream a loop reads at a time."""

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals a loop answers with :meth:`LiveSession.quit` (rule 3)."""

NOBODY_ANSWERS = (
    "zread: stdin is closed: nothing can answer; waiting for {waiting} "
    "(SIGTERM quits; --eof quit makes the end of stdin a quit)"
)
"""The stderr line of a session left waiting after the end of its input."""


class LiveSession:
    """One session in real time on ``clock``, writing through ``endpoint``."""

    __slots__ = (
        "_backlog",
        "_clock",
        "_done",
        "_ending",
        "_lines",
        "_paused_at",
        "_resume_at",
        "_stopped",
        "_told",
        "code",
        "endpoint",
        "host",
        "hung",
        "input_closed",
        "observer",
        "origin",
        "owner",
        "peer",
        "quit_at_eof",
        "reading",
        "session",
        "stage",
    )

    def __init__(
        self,
        session: SessionLike,
        stage: OutputStage,
        endpoint: Endpoint,
        *,
        clock: Callable[[], float],
        host: EffectHost | None = None,
        owner: int = 0,
        observer: Observer | None = None,
        peer: Peer | None = None,
        quit_at_eof: bool = False,
    ) -> None:
        self.session = session
        self.quit_at_eof = quit_at_eof
        """``--eof quit``: once the input has ended and an answer is awaited, quit (3)."""
        self.stage = stage
        self.endpoint = endpoint
        self.host = host or EffectHost()
        self.owner = owner  # who this session is to the host (whose server to stop)
        self.observer = observer  # told what happens (None: nobody is)
        self.peer = peer
        self._clock = clock
        self.origin = clock()
        """The clock's reading at session time 0 (moved on by the time spent paused)."""
        self.code: int | None = None  # the exit code once over; None till then, in a hang
        self.hung = False
        self.reading = True  # False once a stop_reading fault fired or the run is over
        self._ending = ""  # what is ending the run (a ``how`` of the journal), once known
        self._lines: LineBuffer | None = None  # made when the first bytes are read
        self._paused_at: float | None = None
        self._backlog: list[faults.Action] = []  # a list: 56 bytes, a deque 632
        self._resume_at: float | None = None  # when a split event's pause ends; None: none
        self._stopped = False
        self._done = False  # the session's done:true event came out
        self.input_closed = False  # the client's stream ended: nothing more will be read
        self._told = False

    # -- the clock -------------------------------------------------------------------

    def now(self) -> float:
        """Session time: seconds since start, less the time spent paused."""
        if self._paused_at is not None:
            return self._paused_at - self.origin
        return self._clock() - self.origin

    def next_wakeup(self) -> float | None:
        """When, on the clock, :meth:`tick` is due next; None: only input can move it."""
        if self._stopped:
            return None
        wakeup = self._resume_at
        if self._paused_at is None and not self._done:
            deadline = self.session.next_deadline()
            if deadline is not None:
                timer = self.origin + deadline
                wakeup = timer if wakeup is None else min(wakeup, timer)
        return wakeup

    @property
    def held(self) -> int:
        """How many actions wait behind a split event's pause (a reader may wait)."""
        return len(self._backlog)

    @property
    def resume_at(self) -> float | None:
        """When, on the clock, a split event's pause ends; None when none holds."""
        return self._resume_at

    @property
    def finished(self) -> bool:
        """The run is over (done, an exit, or the reader gone); a hang never is."""
        return self.code is not None

    # -- what moves it -----------------------------------------------------------------

    def start(self) -> None:
        """(1) The first event, before anything is read."""
        self._take(self.session.start())
        self._settle()

    def received(self, data: bytes) -> None:
        """Bytes read from the client's stream; ``b""`` is the end of input (3)."""
        if not self.reading:
            return
        peer, lines = self.peer, self._lines
        if lines is None:
            lines = self._lines = LineBuffer()
        for line in lines.push(data) if data else lines.finish():
            if peer is not None and peer.frame(self, line):
                continue
            self.feed(line)
            if self._done:
                return
        if not data:
            self.input_closed = True
            self.reading = False
            self._settle()

    def feed(self, line: bytes) -> None:
        """(2) One command line, answered after the timers due before it."""
        if self._done:
            self.session.feed(line)  # recorded in the journal as sent after done
            return
        if self._stopped:  # a hang or an exit: nothing is read any more
            return
        arrival = self._clock()
        self.tick()
        # Timers armed by those firings and due before the line fire first too; at speed
        # 0 every timer is due at once, and the line goes in between (quit at any time).
        while self.session.speed > 0 and self._due_before(arrival):
            self.tick()
        if not self._stopped and not self._done:
            outcome = self.session.feed(line)
            if outcome.done and not self._ending:
                self._ending = "quit" if outcome.quit else "done"
            self._take(outcome)
        self._settle()

    def _due_before(self, moment: float) -> bool:
        deadline = self.session.next_deadline()
        due = deadline is not None and self.origin + deadline < moment
        return due and not self._stopped and not self._done and self._paused_at is None

    def quit(self, how: str = "signal") -> None:
        """(3) A signal, or a runner ending the session: it quits, as with ``quit``.
        ``how`` is what the journal says ended the run (a signal unless told)."""
        if self._stopped or self._done:
            return
        self.tick()
        if not self._stopped and not self._done:
            if how == "signal" and self._told:
                how = "stdin-closed-left-waiting"
            self._ending = self._ending or how
            self._take(self.session.quit())
        self._settle()

    def deliver(self, trigger: str, **payload: object) -> None:
        """Fire an internal trigger now: a runner's answer to an effect."""
        if not self._stopped and not self._done:
            self.tick()
            self._take(self.session.deliver(trigger, **payload))
            self._settle()

    def tick(self) -> None:
        """Go on writing a split event whose pause is over; fire the timers due that were
        armed before this call (one a firing arms due at once, every one at ``--speed
        0``, waits: the loop reads its input between firings; ``quit`` holds any time)."""
        now = self._clock()
        if self._resume_at is not None and now >= self._resume_at:
            self._resume_at = None
            actions, self._backlog = self._backlog, []
            self._carry_out(actions)
        if self._paused_at is None:
            self._fire_due(now)
        self._settle()

    def _fire_due(self, now: float) -> None:
        session, origin, observer = self.session, self.origin, self.observer
        armed = session.armed
        timer = None
        while not self._stopped:
            timer = session.next_timer()
            # Compared on the clock, as next_wakeup() promised it: origin + deadline
            # minus origin may come out a hair below the deadline.
            if timer is None or timer.seq > armed or origin + timer.deadline > now:
                break
            outcome = session.step()
            if observer is not None:
                observer.fired(self, origin + timer.deadline)
            self._take(outcome)
        if self._stopped or self._done:
            return
        if timer is None or origin + timer.deadline > now:  # (timer: the session's next)
            # The clock moves (none due by then: the common case, idle_until; one due
            # after all, the hair above: advance). A timer armed by this tick and due
            # already (at speed 0, all of them) is left to the next tick.
            moment = now - origin
            if not session.idle_until(moment):
                self._take(session.advance(moment))

    # -- admin -------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def pause(self) -> None:
        """Freeze the session's timers (a split event still finishes writing)."""
        if self._paused_at is None:
            self.tick()
            self._paused_at = self._clock()
            self._settle()

    def resume(self) -> None:
        """Release the timers; each keeps the time it had left."""
        if self._paused_at is not None:
            self.origin += self._clock() - self._paused_at
            self._paused_at = None
            self._settle()

    def set_speed(self, speed: float) -> None:
        """Change ``--speed`` now; pending timers keep the share of their wait done."""
        self.tick()
        self.session.set_speed(speed)
        self.stage.faults.set_speed(self.session.speed)
        self._settle()

    def send(self, line: bytes) -> None:
        """A whole line of the runner's own (a control frame), after a split event."""
        self._carry_out([faults.Write(line)])

    def close(self) -> None:
        """Stop for good and release what the effects hold (servers, the home)."""
        if self.code is None and not self._stopped:
            self._told_end(None, self._ending or "aborted")
        self._stopped = True
        self.reading = False
        self._backlog.clear()
        self.host.close()

    # -- inside ------------------------------------------------------------------------

    def _take(self, outcome: Outcome) -> None:
        """Perform the effects of one session call, then write its events."""
        if outcome.done:
            self._done = True
        if outcome.effects:
            self._perform(outcome.effects)
        if not outcome:
            return
        stage, observer = self.stage, self.observer
        if self._resume_at is None and stage.passes(outcome):
            # The fast path: no fault, no framing, nothing held back: each event is one
            # write of the whole line, as the output stage would say (and counted so).
            if observer is not None:
                observer.produced(self, outcome)
            for event in outcome:
                if self._stopped:
                    return
                self._act_write(event)
            return
        actions = stage.actions(outcome)
        if observer is not None:
            observer.produced(self, outcome)
        self._carry_out(actions)

    def _perform(self, effects: list[object]) -> None:
        peer = self.peer
        if peer is not None:
            effects = [effect for effect in effects if not peer.effect(self, effect)]
        for effect, result in self.host.perform_all(self.owner, effects):
            self._take(self.session.resolve(effect, result))

    def _carry_out(self, actions: list[faults.Action]) -> None:
        if self._resume_at is not None:
            self._backlog.extend(actions)
            return
        for index, action in enumerate(actions):
            if self._stopped:
                return
            act = _CARRIERS.get(type(action)) or carrier(type(action), LiveSession)
            act(self, *msgspec.structs.astuple(action))
            if self._resume_at is not None:  # a pause: the rest waits
                self._backlog.extend(actions[index + 1 :])
                return

    def _act_write(self, data: bytes) -> None:  # the actions that change the run
        if not self.endpoint.write(data):
            self._ending = "reader-gone"
            self._end(0)  # (4) the reader went away: a quiet end

    def _act_pause(self, seconds: float) -> None:
        if seconds > 0:
            self._resume_at = self._clock() + seconds

    def _act_stop_reading(self) -> None:
        self.reading = False

    def _act_exit(self, code: int) -> None:
        self._ending = "fault-exit"
        self._end(code)

    def _act_hang(self) -> None:
        self._stopped, self.hung, self.reading = True, True, False
        self._backlog.clear()
        self._told_end(None, "hang")

    def _settle(self) -> None:
        """(5) Done and all written: the run is over. (3) Left waiting with its input
        closed: say so, once. Then the observer hears that the call is over."""
        if not self._stopped and self._resume_at is None:
            if self._done:
                self._finish(0)
            elif self.input_closed and not self._told and self._waits_for_an_answer():
                self._told = True
                if self.quit_at_eof:
                    self.quit(how="eof-quit")
                    return
                waiting = ", ".join(self.session.waiting_for) or "nothing"
                self.endpoint.stderr(NOBODY_ANSWERS.format(waiting=waiting))
        if self.observer is not None:
            self.observer.settled(self)

    def _waits_for_an_answer(self) -> bool:
        """Nothing is due and nothing can come but an answer (a paused run is not
        waiting for one: a control peer may resume it)."""
        return self._paused_at is None and self.next_wakeup() is None

    def _end(self, code: int) -> None:
        """An exit, or the reader gone: nothing more is written or read."""
        if not self._stopped:
            self._stopped = True
            self._backlog.clear()
            self._finish(code)

    def _finish(self, code: int) -> None:
        self.reading = False
        if self.code is None:
            self.code = code
            self._told_end(code, self._ending or "done")

    def _told_end(self, code: int | None, how: str) -> None:
        if self.observer is not None:
            self.observer.ended(self, code, how)


_CARRIERS: Final = carriers(LiveSession)
"""Each action of :data:`simulator.scenario.faults.Action` and what carries it out
(looked up when the module is imported: an action without a method fails then)."""
