"""One zread session, sans-I/O: a chart instance, its vm, its timers.

Owns: the rules that move every session (:class:`BaseSession`, which a cassette's
:class:`~simulator.core.replay.ReplaySession` plays by too): lines in, event lines out;
``quit`` in every state; rejected lines answered with the previous vm and waiting_for
byte for byte; nothing answered after ``done:true``; timers fired in order on a clock
only the caller moves. And :class:`Session`, a chart run by those rules: internal
``_`` triggers never taken from a client; one event per accepted command and per
internal transition; a terminal state ends the session.

The session never reads, writes, sleeps or looks at the wall clock (the h11 model)::

    session = Session(chart, scenario, seed=0, speed=1.0)
    out = session.start()              # the first event, before anything is read
    out = session.feed(line)           # a command line, at the time of the last advance
    deadline = session.next_deadline() # when a timer wants to fire, or None
    out = session.advance(deadline)    # fire every timer due by then, in order

Every call returns an :class:`~simulator.core.outcome.Outcome`: the event lines it
produced, the vm state each one shows, whether the session is over, and the effects
the driver asked for meanwhile. A runner that performs an effect with a result hands
it back with :meth:`Session.resolve`, a new input like a line. Runners drive any
session through :class:`~simulator.core.interface.SessionLike`; the state a session
shows and keeps is :class:`~simulator.core.view.SessionView`'s.

A timer fires *at its deadline* (:mod:`simulator.core.timers`): timers it schedules
count from that deadline, not from the time ``advance`` was called, so a late runner
does not stretch a run. What the driver may use (the scenario, the random streams,
timers, failures, effects) is its :class:`~simulator.core.runtime.ChartRuntime`.

Must not: read, write, sleep or look at the wall clock.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from simulator.core.driver import Flags, InvalidParams
from simulator.core.envelope import (
    JSON_WHITESPACE,
    MAX_LINE_BYTES,
    RejectedLine,
    decode_command,
    decode_params,
    not_allowed,
)
from simulator.core.eventbytes import encode_event, vm_pieces
from simulator.core.interface import SessionError
from simulator.core.outcome import Outcome
from simulator.core.runtime import ChartRuntime
from simulator.core.secrets import Secrets
from simulator.core.timers import Timer
from simulator.core.view import SessionView

if TYPE_CHECKING:
    from simulator.core.chart_specs import Chart, TransitionSpec
    from simulator.core.coverage import Reached
    from simulator.scenario import Scenario
    from simulator.scenario.failures import Failure


_OVERSIZED: Final = f"invalid JSON: line exceeds {MAX_LINE_BYTES} bytes"


class _NoParams(msgspec.Struct):
    """Params of a command that takes none: any object, its keys ignored."""


class BaseSession(SessionView):
    """The rules that move every session, whatever plays it: lines, quit and time. A
    subclass says how a line is answered (:meth:`_answer`), what a due timer does
    (:meth:`_fire_timer`) and what a quit releases (:meth:`_on_quit`). What each
    member means is :class:`~simulator.core.interface.SessionLike`'s."""

    __slots__ = ()

    @property
    def speed(self) -> float:
        return self._timers.speed

    @property
    def armed(self) -> int:
        return self._timers.armed

    def next_deadline(self) -> float | None:
        timer = self._timers.next()
        return None if timer is None or self._done else timer.deadline

    def next_timer(self) -> Timer | None:
        return None if self._done else self._timers.next()

    def feed(self, line: bytes) -> Outcome:
        self._require_started()
        out = Outcome()
        if not line.strip(JSON_WHITESPACE):
            return out
        if self._done:
            self._record(line, "the session is already done (done:true was written)")
            return out
        return self._answer(line, out)

    def quit(self) -> Outcome:
        self._require_started()
        if self._done:
            raise SessionError("the session is already done")
        self._on_quit()
        out = Outcome()
        out.quit = True
        self._finish(out, self._last_vm_pieces, self._shown_state)
        return self._close(out)

    def advance(self, now: float, *, limit: int = 0) -> Outcome:
        if not self._started:
            self._require_started()  # raises
        out = Outcome()
        timers = self._timers
        while timers.due(now) and not self._done:
            if limit and len(out) >= limit:
                return self._close(out)
            timer = timers.pop()
            if timer is not None:  # else cancelled
                self._due(timer, out)
        timers.now = max(timers.now, now)
        return self._close(out)

    def idle_until(self, now: float) -> bool:
        if not self._started:
            self._require_started()  # raises
        timers = self._timers
        if self._done or timers.due(now):
            return False
        if now > timers.now:
            timers.now = now
        return True

    def step(self) -> Outcome:
        if not self._started:
            self._require_started()  # raises
        out = Outcome()
        timer = None if self._done else self._timers.take()
        if timer is not None:
            self._due(timer, out)
        return self._close(out)

    def set_speed(self, speed: float) -> None:
        if not 0 <= speed < float("inf"):
            raise SessionError("speed must be a number >= 0")
        self._timers.rescale(speed * self._factor)

    @abstractmethod
    def _answer(self, line: bytes, out: Outcome) -> Outcome:
        """A line that is not blank, before done: recorded, and answered in ``out``."""

    @abstractmethod
    def _fire_timer(self, timer: Timer, out: Outcome) -> None:
        """What ``timer`` does, due now (the clock is at its deadline)."""

    @abstractmethod
    def _on_quit(self) -> None:
        """Told before a quit ends the session."""

    def _due(self, timer: Timer, out: Outcome) -> None:
        if timer.deadline > self._timers.now:
            self._timers.now = timer.deadline
        self._fire_timer(timer, out)


class Session(BaseSession):
    """A chart instance driven by lines and by time; see the module docstring."""

    __slots__ = ("_answered", "_seen", "_took", "chart", "driver", "runtime")

    def __init__(
        self,
        chart: Chart,
        scenario: Scenario,
        *,
        flags: Flags | None = None,
        seed: int = 0,
        speed: float = 1.0,
        now: float = 0.0,
    ) -> None:
        if not 0 <= speed < float("inf"):  # NaN too: a NaN deadline is never reached
            raise SessionError("speed must be a number >= 0")
        secrets = Secrets((scenario.world.config.llm_api_key,))
        super().__init__(
            speed=speed * scenario.speed, factor=scenario.speed, now=now, secrets=secrets
        )
        self.chart = chart
        timers = self._timers
        self.runtime = ChartRuntime(chart, scenario, flags or chart.flags_type(), seed, timers)
        """What the driver uses of its session (:class:`~simulator.core.driver.Runtime`)."""
        # What the session reached of its chart, as bit masks (Chart.reached names them;
        # the failures met are the runtime's):
        self._seen = self._took = self._answered = 0
        self.driver = chart.model(self.runtime)
        self.driver.state = chart.initial

    # -- what a runner uses ---------------------------------------------------------------

    @property
    def command(self) -> str:
        return self.chart.name

    @property
    def state(self) -> str:
        return self.driver.state

    @property
    def peer_attached(self) -> bool:
        return self.runtime.peer_attached

    @peer_attached.setter
    def peer_attached(self, attached: bool) -> None:
        self.runtime.peer_attached = attached

    @property
    def reached(self) -> Reached:
        return self.chart.reached(*self.coverage_marks)

    @property
    def coverage_marks(self) -> tuple[int, int, int, int]:
        return self._seen, self._took, self._answered, self.runtime.met

    def inject(self, failure: Failure) -> None:
        self.runtime.inject(failure)

    def start(self) -> Outcome:
        self._starting()
        before = self.driver.state
        self._seen |= self.chart.state_bits[before]
        if self.chart.has_start:
            self._took_one(self.chart.fire(self.driver, "_start"))
        self._entered(before, force=True)
        out = Outcome()
        self._emit(out)
        return self._close(out)

    def deliver(self, trigger: str, **payload: Any) -> Outcome:
        self._require_started()
        out = Outcome()
        if not self._done and trigger.startswith("_") and self._fire(trigger, payload):
            self._emit(out)
        return self._close(out)

    def resolve(self, effect: object, result: object) -> Outcome:
        self.driver.on_effect(effect, result)
        return self._close(Outcome())

    # -- the rules' chart half ------------------------------------------------------------

    def _answer(self, line: bytes, out: Outcome) -> Outcome:
        if len(line.removesuffix(b"\r")) > MAX_LINE_BYTES:
            self._record(line[:MAX_LINE_BYTES], _OVERSIZED)
            return self._reject(out, _OVERSIZED)
        try:
            command = decode_command(line)
            if command.type == "quit":
                decode_params(command.params, _NoParams)  # params, if any, an object
                self._record(line, "")
                self._answered |= self.chart.gate_bits.get((self.driver.state, "quit"), 0)
                return self.quit()
            spec = self.chart.states[self.driver.state]
            if command.type not in spec.waiting_for:
                raise RejectedLine(not_allowed(command.type, spec.vm_state))
            params = self._params(command.type, command.params)
        except RejectedLine as rejected:
            self._record(line, rejected.text)
            return self._reject(out, rejected.text)
        self._record(line, "")
        self._answered |= self.chart.gate_bits[(self.driver.state, command.type)]
        self._fire(command.type, {"params": params})
        self._emit(out)
        return self._close(out)

    def _fire_timer(self, timer: Timer, out: Outcome) -> None:
        fired = self._fire(timer.trigger, timer.payload)
        if timer.repeat_after and self.driver.state == timer.state and not self._done:
            self._arm(timer.trigger, timer.repeat_after, timer.state, repeat=True)
        if fired:
            self._emit(out)

    def _on_quit(self) -> None:
        self.driver.on_quit()

    def _close(self, out: Outcome) -> Outcome:
        """Hand ``out`` the effects asked for since the last call, and the done flag."""
        runtime = self.runtime
        if runtime.effects:  # runtime.take_effects(), without a call for the common case
            out.effects, runtime.effects = runtime.effects, []
        out.done = self._done
        return out

    def _arm(self, trigger: str, after: str, state: str, *, repeat: bool) -> None:
        seconds = self.runtime.draw(after)
        self._timers.arm(trigger, seconds, {}, state=state, repeat_after=after if repeat else "")

    def _params(self, command_type: str, raw: bytes) -> Any:
        spec = self.chart.commands[command_type]
        params = decode_params(raw, spec.params or _NoParams)
        if spec.check is not None:
            check: Callable[[Any], None] = getattr(self.driver, spec.check)
            try:
                check(params)
            except InvalidParams as err:
                raise RejectedLine(f"invalid params: {err}") from None
        return params

    def _fire(self, trigger: str, payload: dict[str, Any]) -> bool:
        driver = self.driver
        before = driver.state
        fired = self.chart.fire(driver, trigger, **payload)
        if fired is None:
            return False
        self._took |= 1 << fired.index
        if driver.state != before:
            self._entered(before)
        return True

    def _took_one(self, transition: TransitionSpec | None) -> None:
        if transition is not None:
            self._took |= 1 << transition.index

    def _entered(self, before: str, *, force: bool = False) -> None:
        state = self.driver.state
        if state == before and not force:
            return
        self._seen |= self.chart.state_bits[state]
        spec = self.chart.states[state]
        if spec.terminal:
            self._timers.clear()
            return
        self._timers.keep_state(state)
        for timer_spec in spec.timers:
            self._arm(timer_spec.trigger, timer_spec.after, state, repeat=timer_spec.repeat)

    def _emit(self, out: Outcome) -> None:
        spec = self.chart.states[self.driver.state]
        self._shown_state = spec.vm_state
        if self.chart.shows_state:
            self.driver.vm.state = spec.vm_state
        vm = vm_pieces(self.driver.vm)
        if spec.terminal:
            self._finish(out, vm, spec.vm_state)
            return
        waiting_for = spec.waiting_for
        out.append(encode_event(vm, waiting_for, False, ""))
        self._last_vm_pieces, self._last_waiting_for = vm, waiting_for  # self._keep()
        out.states.append(spec.vm_state)
