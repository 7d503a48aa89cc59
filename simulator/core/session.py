"""One zread session, sans-I/O: a chart instance, its vm, its timers.

Owns: the rules every driver shares. Lines in, event lines out; ``quit`` in every
state; rejected lines answered with the previous vm and waiting_for byte for byte;
internal ``_`` triggers never taken from a client; one event per accepted command and
per internal transition; a terminal state ends the session.

The session never reads, writes, sleeps or looks at the wall clock (the h11 model)::

    session = Session(chart, scenario, seed=0, speed=1.0)
    out = session.start()              # the first event, before anything is read
    out = session.feed(line)           # a command line, at the time of the last advance
    deadline = session.next_deadline() # when a timer wants to fire, or None
    out = session.advance(deadline)    # fire every timer due by then, in order

Every call returns an :class:`Outcome`: the event lines it produced (the list
itself), the vm state each one shows, whether the last is ``done:true``, and the
effects the driver asked for meanwhile. That is all a runner needs: nothing it does
afterwards asks the session again. A runner that performs an effect with a result
hands it back with :meth:`Session.resolve`, a new input like a line.

Time is a float of seconds that only the caller moves. A timer fires *at its
deadline*: timers it schedules count from that deadline, not from the time ``advance``
was called, so a late runner does not stretch a run. Randomness comes from streams
derived from the seed: timing, world data and failures each have their own, so a
scenario that changes a delay does not change which page fails.
"""

from __future__ import annotations

import heapq
import random
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from simulator.core.chart import WORLD_DELAY, Chart, ChartError, TransitionSpec
from simulator.core.coverage import Reached
from simulator.core.driver import Flags, InvalidParams
from simulator.core.envelope import (
    JSON_WHITESPACE,
    MAX_LINE_BYTES,
    RejectedLine,
    decode_command,
    decode_params,
    encode_event,
    not_allowed,
    vm_pieces,
)
from simulator.core.secrets import Secrets, redact, redact_line
from simulator.core.transcript import Transcript
from simulator.errors import MisuseError
from simulator.scenario import Scenario, ScenarioError
from simulator.scenario.failures import Failure, FailurePlan

__all__ = ["JournalEntry", "Outcome", "Session", "SessionError", "Timer"]

_OVERSIZED: Final = f"invalid JSON: line exceeds {MAX_LINE_BYTES} bytes"


class SessionError(MisuseError):
    """The session was used out of order or given a bad value (a caller's bug, not the
    client's)."""


class JournalEntry(msgspec.Struct, frozen=True):
    """One line the client sent, and what the session expected when it arrived.

    ``line`` is the line as sent; printed (``str``, ``repr``, so in an assertion
    message) any API key's value in it is redacted (:mod:`simulator.core.secrets`).
    """

    time: float
    line: bytes
    state: str
    waiting_for: tuple[str, ...]
    after_done: bool
    error: str
    """Why the line was refused (the event's ``error``), or ``""`` when accepted."""

    def as_json(self) -> dict[str, Any]:
        """The entry as plain JSON-ready data, the API key redacted: ``t`` (session
        seconds), ``line`` (text; bytes that are not UTF-8 as ``\\xNN`` escapes,
        ``backslashreplace``), ``state``, ``waiting_for``, ``after_done``, ``error``."""
        return {
            "t": self.time,
            "line": redact_line(self.line).decode("utf-8", "backslashreplace"),
            "state": self.state,
            "waiting_for": list(self.waiting_for),
            "after_done": self.after_done,
            "error": self.error,
        }

    def __repr__(self) -> str:
        return (
            f"JournalEntry(time={self.time!r}, line={redact_line(self.line)!r}, "
            f"state={self.state!r}, waiting_for={self.waiting_for!r}, "
            f"after_done={self.after_done!r}, error={self.error!r})"
        )

    def __str__(self) -> str:
        sent = redact_line(self.line).decode("utf-8", "replace")
        if len(sent) > 200:
            sent = sent[:200] + "..."
        expected = ", ".join(self.waiting_for) or "nothing (wait for the next event)"
        if self.after_done:
            expected = "nothing: the session was done"
        return (
            f"at t={self.time:.3f}s in state {self.state}: sent {sent}; "
            f"expected {expected}: {self.error}"
        )


class Outcome(list[bytes]):
    """What one session call produced, as data: its event lines in order (the list
    itself, each with its newline) and what a runner needs beside them.

    ``states[i]`` is the vm state event ``i`` shows (what a transport fault's
    ``on_state`` matches); ``done`` is true once the session is over (then the last
    event, if the call produced any, is the ``done:true`` one); ``effects`` are what
    the driver asked of the outside world during the call, oldest first, to be
    performed before the events are written.
    """

    __slots__ = ("done", "effects", "states")

    def __init__(self) -> None:
        super().__init__()
        self.states: list[str] = []
        self.effects: list[object] = _NO_EFFECTS
        self.done = False


_NO_EFFECTS: Final[list[object]] = []
"""Shared by every outcome without effects (most of them); never appended to."""


class _NoParams(msgspec.Struct):
    """Params of a command that takes none: any object, its keys ignored."""


class Timer(msgspec.Struct, order=True):
    """A pending internal trigger."""

    deadline: float
    seq: int
    trigger: str
    payload: dict[str, Any]
    state: str = ""
    repeat_after: str = ""


class Session:
    """A chart instance driven by lines and by time; see the module docstring."""

    __slots__ = (
        "__weakref__",
        "_answered",
        "_done",
        "_effects",
        "_failures",
        "_flags",
        "_heap",
        "_last_vm_pieces",
        "_last_waiting_for",
        "_live",
        "_met",
        "_now",
        "_rng",
        "_scenario",
        "_seed",
        "_seen",
        "_seq",
        "_shown_state",
        "_speed",
        "_started",
        "_timing_rng",
        "_took",
        "chart",
        "driver",
        "peer_attached",
        "secrets",
        "transcript",
    )

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
        missing = sorted(chart.delays - scenario.timing.keys())
        if missing:
            raise ScenarioError(f"scenario {scenario.name} has no timing for {', '.join(missing)}")
        if speed < 0:
            raise SessionError("speed must be >= 0")
        self.chart = chart
        self._scenario = scenario
        self._flags = flags or Flags()
        self._speed = speed * scenario.speed
        self._seed = seed
        self._now = now
        self._timing_rng = random.Random(f"zread-sim:{seed}:timing")
        self._rng: random.Random | None = None  # drawn from rarely: made on first use
        self._failures = FailurePlan(scenario.failures, f"zread-sim:{seed}:failures")
        self._heap: list[tuple[float, int, Timer]] = []  # (deadline, seq, timer): C compares
        self._live: dict[int, Timer] = {}
        self._seq = 0
        self._effects: list[object] = []
        self._started = False
        self._done = False
        # The last vm, as the pieces its event was joined from (vm_pieces): a rejected
        # line and quit repeat it. A long task list is a piece its vm keeps anyway.
        self._last_vm_pieces: Sequence[bytes] = (b"{}",)
        self._last_waiting_for: tuple[str, ...] = ()
        self._shown_state = ""
        self.transcript: Transcript[JournalEntry] = Transcript()
        """What the session keeps of the lines it read: counts, and a bounded few whole."""
        # What the session reached of its chart, as bit masks (Chart.reached names them):
        self._seen = self._took = self._answered = self._met = 0
        self.peer_attached = False  # a control peer can answer requests (set by the runner)
        self.secrets = Secrets((scenario.world.config.llm_api_key,))
        """The API keys this session knows (the world's, each one a line named): what the
        simulator writes or answers of it is redacted with them."""
        # The driver sees the session through a weak proxy: no session <-> driver cycle,
        # so a finished session is freed when its last reference goes, without waiting
        # for the cyclic collector (whose pauses grow with thousands of live sessions).
        self.driver = chart.model(weakref.proxy(self))
        self.driver.state = chart.initial

    # -- what a driver may use (simulator.core.driver.Runtime) -------------------------

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    @property
    def rng(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random(f"zread-sim:{self._seed}:world")
        return self._rng

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def flags(self) -> Flags:
        return self._flags

    def schedule(self, trigger: str, delay: str | float, **payload: Any) -> int:
        seconds = self._draw(delay) if isinstance(delay, str) else float(delay)
        return self._push(trigger, seconds, payload)

    def cancel(self, timer_id: int) -> None:
        self._live.pop(timer_id, None)

    def failure(self, point: str, *, target: int = 0, attempt: int = 1) -> Failure | None:
        bit = self.chart.failure_bits.get(point)
        if bit is None:
            raise ChartError(f"chart {self.chart.name}: failure point {point!r} is not declared")
        failure = self._failures.check(point, target=target, attempt=attempt)
        if failure is not None:
            self._met |= bit
        return failure

    def effect(self, effect: object) -> None:
        self._effects.append(effect)

    # -- what a runner uses -------------------------------------------------------

    @property
    def done(self) -> bool:
        """True once the ``done:true`` event has been produced."""
        return self._done

    @property
    def now(self) -> float:
        """The session's clock: the latest time given to :meth:`advance`."""
        return self._now

    @property
    def state(self) -> str:
        """The chart state (finer than ``vm.state`` where one zread state has gates)."""
        return self.driver.state

    @property
    def speed(self) -> float:
        """The factor every delay is multiplied by (``--speed`` times the scenario's)."""
        return self._speed

    @property
    def shown_state(self) -> str:
        """The vm state the last event showed (config's is ``editing``)."""
        return self._shown_state

    @property
    def waiting_for(self) -> tuple[str, ...]:
        """The waiting_for of the last event."""
        return self._last_waiting_for

    @property
    def reached(self) -> Reached:
        """What of its chart the session reached so far: states entered, transitions
        taken, gates the client answered, failures met (:mod:`simulator.core.coverage`)."""
        return self.chart.reached(self._seen, self._took, self._answered, self._met)

    @property
    def coverage_marks(self) -> tuple[int, int, int, int]:
        """:attr:`reached` as the bit masks it is made from, (states, transitions,
        gates, failures): cheap to compare, for a runner that journals what is new."""
        return self._seen, self._took, self._answered, self._met

    def set_speed(self, speed: float) -> None:
        """Change ``--speed`` now; pending timers keep the share of their wait done."""
        if not 0 <= speed < float("inf"):
            raise SessionError("speed must be a number >= 0")
        old, self._speed = self._speed, speed * self._scenario.speed
        for timer in self._live.values():
            remaining = timer.deadline - self._now
            timer.deadline = self._now + (remaining * self._speed / old if old else 0.0)
        self._heap = [(timer.deadline, timer.seq, timer) for timer in self._live.values()]
        heapq.heapify(self._heap)

    def inject(self, failure: Failure) -> None:
        """Add a domain failure ahead of the scenario's (the first match wins)."""
        self._failures.add(failure)

    def deliver(self, trigger: str, **payload: Any) -> Outcome:
        """Fire an internal trigger now (a runner's answer to an effect); its event."""
        self._require_started()
        out = Outcome()
        if not self._done and trigger.startswith("_") and self._fire(trigger, payload):
            self._emit(out)
        return self._close(out)

    def snapshot(self) -> dict[str, Any]:
        """The session as a control peer sees it: plain data, JSON-ready."""
        return {
            "command": self.chart.name,
            "state": self._shown_state,
            "chart_state": self.driver.state,
            "vm": redact(msgspec.json.decode(self._last_vm())),
            "waiting_for": list(self._last_waiting_for),
            "done": self._done,
            "clock": self._now,
            "speed": self._speed,
            "timers": [
                {
                    "trigger": t.trigger,
                    "deadline": t.deadline,
                    "in": max(0.0, t.deadline - self._now),
                }
                for t in self.pending()
            ],
        }

    def resolve(self, effect: object, result: object) -> Outcome:
        """Hand the driver the result of an effect it asked for: no event by itself,
        but what it does may arm a timer or ask for more effects."""
        self.driver.on_effect(effect, result)
        return self._close(Outcome())

    def start(self) -> Outcome:
        """The first event. Call once, before anything else."""
        if self._started:
            raise SessionError("start() was already called")
        self._started = True
        before = self.driver.state
        self._seen |= self.chart.state_bits[before]
        if self.chart.has_start:
            self._took_one(self.chart.fire(self.driver, "_start"))
        self._entered(before, force=True)
        out = Outcome()
        self._emit(out)
        return self._close(out)

    def feed(self, line: bytes) -> Outcome:
        """Answer one line from the client (without its newline)."""
        self._require_started()
        out = Outcome()
        if not line.strip(JSON_WHITESPACE):
            return out
        if self._done:
            self._record(line, "the session is already done (done:true was written)")
            return out
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

    @property
    def journal(self) -> list[JournalEntry]:
        """The lines the client sent (blank ones aside), with what was expected then:
        the most recent 1,000, oldest first (:mod:`simulator.core.transcript`;
        ``transcript.total`` counts them all, and ``transcript.listener`` is given
        each one as it comes)."""
        return self.transcript.recent

    @property
    def violations(self) -> list[JournalEntry]:
        """The client's mistakes, rejected lines and anything sent after done, oldest
        first: the first 10 of the session and the most recent 100 after them
        (``transcript.total_violations`` counts them all)."""
        return self.transcript.violations

    def _record(self, line: bytes, error: str) -> None:
        self.secrets.learn(line)
        self.transcript.add(
            JournalEntry(
                self._now, line, self._shown_state, self._last_waiting_for, self._done, error
            )
        )

    def quit(self) -> Outcome:
        """End the session as ``quit`` does: the vm as it stood, ``done:true``."""
        self._require_started()
        if self._done:
            raise SessionError("the session is already done")
        self.driver.on_quit()
        out = Outcome()
        self._finish(out, self._last_vm_pieces, self._shown_state)
        return self._close(out)

    def advance(self, now: float, *, limit: int = 0) -> Outcome:
        """Move the clock to ``now`` and fire every timer due by then, in order.

        With ``limit``, stop after that many events; the clock then stays at the last
        timer fired, and the next call goes on where this one stopped. A runner uses it
        to write events as they come rather than all at once.
        """
        self._require_started()
        out = Outcome()
        while self._heap and self._heap[0][0] <= now and not self._done:
            if limit and len(out) >= limit:
                return self._close(out)
            self._fire_timer(heapq.heappop(self._heap)[2], out)
        self._now = max(self._now, now)
        return self._close(out)

    def step(self) -> Outcome:
        """Fire the next timer, whenever it is due, and only that one (with whatever
        events it writes); the clock moves to its deadline. Nothing pending: nothing
        happens. A real-time runner calls it for each timer that is due, so that it can
        read its input between firings."""
        if not self._started:
            self._require_started()
        out = Outcome()
        if self.next_deadline() is not None:
            self._fire_timer(heapq.heappop(self._heap)[2], out)
        return self._close(out)

    def _fire_timer(self, timer: Timer, out: Outcome) -> None:
        if self._live.pop(timer.seq, None) is None:
            return  # cancelled
        if timer.deadline > self._now:
            self._now = timer.deadline
        fired = self._fire(timer.trigger, timer.payload)
        if timer.repeat_after and self.driver.state == timer.state and not self._done:
            self._arm(timer.trigger, timer.repeat_after, timer.state, repeat=True)
        if fired:
            self._emit(out)

    def next_deadline(self) -> float | None:
        """When the next timer is due, or None when nothing is pending."""
        while self._heap and self._heap[0][1] not in self._live:
            heapq.heappop(self._heap)
        if self._done or not self._heap:
            return None
        return self._heap[0][0]

    def next_timer(self) -> Timer | None:
        """The timer that fires next, or None when nothing is pending."""
        if self.next_deadline() is None:
            return None
        return self._heap[0][2]

    @property
    def armed(self) -> int:
        """How many timers were ever armed: a timer whose ``seq`` is above a reading of
        this was armed after it."""
        return self._seq

    def pending(self) -> list[Timer]:
        """The timers still to fire, soonest first."""
        return sorted(self._live.values())

    # -- inside -------------------------------------------------------------------

    def _require_started(self) -> None:
        if not self._started:
            raise SessionError("call start() first")

    def _draw(self, delay: str) -> float:
        if delay.startswith(WORLD_DELAY):
            value: Any = self._scenario.world
            for part in delay.removeprefix(WORLD_DELAY).split("."):
                value = getattr(value, part)
            return float(value)
        return self._scenario.timing[delay].draw(self._timing_rng)

    def _push(self, trigger: str, seconds: float, payload: dict[str, Any], **extra: str) -> int:
        self._seq += 1
        timer = Timer(self._now + seconds * self._speed, self._seq, trigger, payload, **extra)
        heapq.heappush(self._heap, (timer.deadline, timer.seq, timer))
        self._live[timer.seq] = timer
        return timer.seq

    def _arm(self, trigger: str, after: str, state: str, *, repeat: bool) -> None:
        extra = {"repeat_after": after} if repeat else {}
        self._push(trigger, self._draw(after), {}, state=state, **extra)

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
        for seq, timer in list(self._live.items()):
            if timer.state and timer.state != state:
                del self._live[seq]
        spec = self.chart.states[state]
        if spec.terminal:
            self._live.clear()
            return
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
        out.append(encode_event(vm, spec.waiting_for, False, ""))
        self._keep(vm, spec.waiting_for)
        out.states.append(spec.vm_state)

    def _keep(self, vm: Sequence[bytes], waiting_for: tuple[str, ...]) -> None:
        self._last_vm_pieces, self._last_waiting_for = vm, waiting_for

    def _last_vm(self) -> bytes:
        return b"".join(self._last_vm_pieces)

    def _finish(self, out: Outcome, vm: Sequence[bytes], vm_state: str) -> None:
        self._done = True
        self._live.clear()
        self._heap.clear()
        out.append(encode_event(vm, (), True, ""))
        self._keep(vm, ())
        out.states.append(vm_state)

    def _reject(self, out: Outcome, text: str) -> Outcome:
        out.append(encode_event(self._last_vm_pieces, self._last_waiting_for, False, text))
        out.states.append(self._shown_state)
        return self._close(out)

    def _close(self, out: Outcome) -> Outcome:
        """Hand ``out`` the effects asked for since the last call, and the done flag."""
        if self._effects:
            out.effects, self._effects = self._effects, []
        out.done = self._done
        return out
