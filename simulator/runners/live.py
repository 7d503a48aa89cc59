"""One session in real time, whatever loop runs it: its clock, its output, its lifecycle.

Owns: :class:`LiveSession`, the one place the lifecycle of FIDELITY section 4 is
written, for every real-time runner (the process with or without ``--control``, pipes
on a thread, thousands of sessions on one asyncio loop):

1. the first event is written before anything is read (:meth:`LiveSession.start`);
2. a line is answered after the timers due before it have fired;
3. a signal is ``quit``; end of input is not: zread keeps running, its timers go on
   firing, and once it waits for an answer nobody can give, it says so in one line on
   stderr and waits (a client that spawns it with a null stdin gets a whole run);
4. a reader that went away (stdout closed) ends the run quietly, code 0;
5. once ``done:true`` is written (after whatever a split event still had to write)
   the run is over, code 0;
6. transport faults: ``exit`` ends the run with its code, ``hang`` stops everything
   for good, ``close_stdout`` and ``stop_reading`` do what they say.

With a :attr:`LiveSession.journal` (``--journal FILE``), what happened goes to it from
here, the one place that knows: each line the session journaled (handed over as the
session records it: the session itself keeps only a bounded few,
:mod:`simulator.core.transcript`), each event it produced, and how the run ended
(:data:`simulator.hosts.journal.HOWS`). Without one, nothing is done for it.

Each session call's :class:`~simulator.core.session.Outcome` goes the same way: its
effects are performed (:meth:`~simulator.hosts.effects.EffectHost.perform_all`, a
control peer first offered those it answers), any result goes back to the session as
a new input, and its events go through the
:class:`~simulator.runners.output.OutputStage` to actions carried out on an
:class:`Endpoint`. A split event's pauses are waits, not sleeps: the rest of its
actions wait in a backlog, and :meth:`LiveSession.next_wakeup` says when to go on.

Must not: sleep, block or read anything. The loop around it reads input, waits until
:meth:`LiveSession.next_wakeup`, and calls in; the clock it is given is its only
sense of time.
"""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import msgspec

from simulator.core.envelope import RejectedLine, decode_command
from simulator.core.lines import LineBuffer
from simulator.core.session import Outcome, Session
from simulator.hosts.effects import EffectHost
from simulator.runners.output import OutputStage
from simulator.scenario import faults

if TYPE_CHECKING:
    from simulator.hosts.journal import JournalWriter

__all__ = ["READ_SIZE", "SIGNALS", "Endpoint", "LiveSession"]

READ_SIZE = 1 << 16
"""How much of the client's stream a loop reads at a time."""

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""The signals a loop answers with :meth:`LiveSession.quit` (rule 3)."""

NOBODY_ANSWERS = "zread: stdin is closed: nothing can answer; waiting for {waiting} (SIGTERM quits)"
"""The stderr line of a session left waiting after the end of its input."""


class Endpoint(Protocol):
    """Where a session's actions go: a process's pipes, a socket, a counter."""

    def write(self, data: bytes) -> bool:
        """Hand ``data`` over; False when the reader has gone away."""
        ...

    def stderr(self, line: str) -> None: ...

    def close_output(self) -> None: ...


class LiveSession:
    """One session in real time on ``clock``, writing through ``endpoint``."""

    __slots__ = (
        "_backlog",
        "_clock",
        "_covered",
        "_done",
        "_ending",
        "_lines",
        "_paused_at",
        "_resume_at",
        "_stopped",
        "_told",
        "_waiting",
        "code",
        "control",
        "endpoint",
        "host",
        "hung",
        "input_closed",
        "intercept",
        "journal",
        "on_finish",
        "on_fire",
        "on_hang",
        "origin",
        "owner",
        "reading",
        "session",
        "stage",
    )

    def __init__(
        self,
        session: Session,
        stage: OutputStage,
        endpoint: Endpoint,
        *,
        clock: Callable[[], float],
        host: EffectHost | None = None,
        owner: int = 0,
    ) -> None:
        self.session = session
        self.stage = stage
        self.endpoint = endpoint
        self.host = host or EffectHost()
        self.owner = owner
        """Who this session is to the host (whose server to stop)."""
        self._clock = clock
        self.origin = clock()
        """The clock's reading at session time 0 (moved on by the time spent paused)."""
        self.code: int | None = None
        """The run's exit code once it is over; None while it runs (and in a hang)."""
        self.hung = False
        self.reading = True
        """False once a ``stop_reading`` fault fired or the run is over: read no more."""
        self.intercept: Callable[[object], bool] | None = None
        """Offered each effect first; True means it took care of it (a control peer)."""
        self.control: Callable[[bytes], bool] | None = None
        """Offered each input line first; True means it was a control frame."""
        self.on_finish: Callable[[int], None] | None = None
        self.on_hang: Callable[[], None] | None = None
        self.on_fire: Callable[[LiveSession, float], None] | None = None
        """Told of each timer as it fires, with when it was due on the clock: how late
        it fired is the clock now minus that (load-test statistics)."""
        self.journal: JournalWriter | None = None
        """Where what happens is journaled (``--journal``); set before :meth:`start`."""
        self._covered: tuple[tuple[int, ...], frozenset[str]] = ((0, 0, 0, 0), frozenset())
        """What the journal's ``cover`` records said so far (the session's marks, the
        faults fired)."""
        self._ending = ""
        """What is ending the run (a ``how`` of the journal), once something is."""
        self._lines = LineBuffer()
        self._paused_at: float | None = None
        self._backlog: deque[faults.Action] = deque()
        self._waiting = False
        self._resume_at = 0.0
        self._stopped = False
        self._done = False
        """The session's ``done:true`` event came out (as its outcomes said)."""
        self.input_closed = False
        """The client's stream ended: nothing more will be read."""
        self._told = False

    # -- the clock -------------------------------------------------------------------

    def now(self) -> float:
        """Session time: seconds since start, less the time spent paused."""
        if self._paused_at is not None:
            return self._paused_at - self.origin
        return self._clock() - self.origin

    def next_wakeup(self) -> float | None:
        """When, on the clock, the loop must call :meth:`tick` next; None: only input
        (or nothing) can move this session on."""
        if self._stopped:
            return None
        wakeup = self._resume_at if self._waiting else None
        if self._paused_at is None and not self._done:
            deadline = self.session.next_deadline()
            if deadline is not None:
                timer = self.origin + deadline
                wakeup = timer if wakeup is None else min(wakeup, timer)
        return wakeup

    @property
    def held(self) -> int:
        """How many actions (lines, a control peer's among them) wait behind a split
        event's pause; a reader of the client's stream may wait while there are many."""
        return len(self._backlog)

    @property
    def resume_at(self) -> float | None:
        """When, on the clock, a split event's pause ends; None when none holds."""
        return self._resume_at if self._waiting else None

    @property
    def finished(self) -> bool:
        """The run is over (done, an exit, or the reader gone); a hang never is."""
        return self.code is not None

    # -- what moves it -----------------------------------------------------------------

    def start(self) -> None:
        """(1) The first event, before anything is read."""
        if self.journal is not None:  # each line as the session records it
            self.session.transcript.listener = self.journal.line
        self._take(self.session.start())
        self._settle()

    def received(self, data: bytes) -> None:
        """Bytes read from the client's stream; ``b""`` is the end of input (3)."""
        if not self.reading:
            return
        for line in self._lines.push(data) if data else self._lines.finish():
            if self.control is not None and self.control(line):
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
            if self.journal is not None and outcome.done and not self._ending:
                self._ending = "quit" if _is_quit(line) else "done"
            self._take(outcome)
        self._settle()

    def _due_before(self, moment: float) -> bool:
        deadline = self.session.next_deadline()
        return (
            not self._stopped
            and not self._done
            and self._paused_at is None
            and deadline is not None
            and self.origin + deadline < moment
        )

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
        """Go on writing a split event whose pause is over, and fire every timer due.

        Only the timers armed before this call: one that a firing arms and that is due
        at once (every timer at ``--speed 0``) waits for the next call, so the loop
        reads what is waiting on input between firings, and ``quit`` holds at any time.
        """
        now = self._clock()
        if self._waiting and now >= self._resume_at:
            self._waiting = False
            actions = list(self._backlog)
            self._backlog.clear()
            self._carry_out(actions)
        if self._paused_at is None:
            session, origin, on_fire = self.session, self.origin, self.on_fire
            armed = session.armed
            while not self._stopped:
                timer = session.next_timer()
                # Compared on the clock, as next_wakeup() promised it: origin + deadline
                # minus origin may come out a hair below the deadline.
                if timer is None or timer.seq > armed or origin + timer.deadline > now:
                    break
                outcome = session.step()
                if on_fire is not None:
                    on_fire(self, origin + timer.deadline)
                self._take(outcome)
            deadline = session.next_deadline()
            nothing_due = deadline is None or origin + deadline > now
            if not self._stopped and not self._done and nothing_due:
                # The clock moves. A timer armed by this tick and due already (at speed
                # 0, all of them) is left to the next tick: advance() would fire it now.
                self._take(session.advance(now - origin))
        self._settle()

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
        """Write a whole line of the runner's own (a control frame), between events:
        after whatever a split event still has to write."""
        self._carry_out([faults.Write(line)])

    def close(self) -> None:
        """Stop for good and release what the effects hold (servers, the home)."""
        if self.journal is not None and not self.hung:
            self.journal.exit(self.now(), self.code, self._ending or "aborted")
        self._stopped = True
        self.reading = False
        self._backlog.clear()
        self.host.close()

    # -- inside ------------------------------------------------------------------------

    def _take(self, outcome: Outcome) -> None:
        """Perform the effects of one session call, then write its events."""
        self._done = self._done or outcome.done
        if outcome.effects:
            effects = outcome.effects
            if self.intercept is not None:
                effects = [effect for effect in effects if not self.intercept(effect)]
            for effect, result in self.host.perform_all(self.owner, effects):
                self._take(self.session.resolve(effect, result))
        if outcome:
            plain = self.stage.plain and not self._waiting
            actions = None if plain else self.stage.actions(outcome)
            if self.journal is not None:
                self._journal_cover()
                for event, state in zip(outcome, outcome.states, strict=False):
                    self.journal.event(self.session.now, event, state)
            if actions is not None:
                self._carry_out(actions)
                return
            # The fast path: no fault, no framing, nothing held back: each event is one
            # write of the whole line, as the output stage would say.
            self.stage.count(outcome)
            for event in outcome:
                if self._stopped:
                    return
                self._write(event)

    def _write(self, data: bytes) -> None:
        if not self.endpoint.write(data):
            self._ending = "reader-gone"
            self._end(0)  # (4) the reader went away: a quiet end

    def _carry_out(self, actions: list[faults.Action]) -> None:
        if self._waiting:
            self._backlog.extend(actions)
            return
        for index, action in enumerate(actions):
            if self._stopped:
                return
            if isinstance(action, faults.Pause):
                if action.seconds > 0:
                    self._waiting = True
                    self._resume_at = self._clock() + action.seconds
                    self._backlog.extend(actions[index + 1 :])
                    return
            elif isinstance(action, faults.Write):
                self._write(action.data)
            elif isinstance(action, faults.Stderr):
                self.endpoint.stderr(action.line)
            elif isinstance(action, faults.CloseStdout):
                self.endpoint.close_output()
            elif isinstance(action, faults.StopReading):
                self.reading = False
            elif isinstance(action, faults.Exit):
                self._ending = "fault-exit"
                self._end(action.code)
            elif isinstance(action, faults.Hang):
                self._stopped, self.hung, self.reading = True, True, False
                self._backlog.clear()
                if self.journal is not None:
                    self.journal.exit(self.now(), None, "hang")
                if self.on_hang is not None:
                    self.on_hang()

    def _settle(self) -> None:
        """(5) Done and everything written: the run is over (a control peer's frames
        may still be written). (3) Left waiting with its input closed: say so, once."""
        if self._stopped or self._waiting:
            return
        if self._done:
            self._finish(0)
        elif self.input_closed and not self._told and self.next_wakeup() is None:
            self._told = True
            waiting = ", ".join(self.session.waiting_for) or "nothing"
            self.endpoint.stderr(NOBODY_ANSWERS.format(waiting=waiting))

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
            if self.journal is not None:
                self.journal.exit(self.now(), code, self._ending or "done")
            if self.on_finish is not None:
                self.on_finish(code)

    def _journal_cover(self) -> None:
        """Tell the journal what the session reached since it was last told."""
        assert self.journal is not None
        marks, faults_fired = self.session.coverage_marks, self.stage.faults.fired
        old_marks, old_faults = self._covered
        if marks == old_marks and faults_fired == old_faults:
            return
        self._covered = marks, faults_fired
        new = self.session.chart.reached(*(m & ~o for m, o in zip(marks, old_marks, strict=True)))
        new = msgspec.structs.replace(new, faults=faults_fired - old_faults)
        self.journal.cover(self.session.now, new)


def _is_quit(line: bytes) -> bool:
    try:
        return decode_command(line).type == "quit"
    except RejectedLine:
        return False
