"""One zread session driven on gevent, as a Locust user runs it, and what it reports.

Owns: :class:`Plan` (what to run and how to answer), :class:`Report` (the figures one
session hands to a ``fire(kind, name, ms, error)`` callback: ``lateness`` per timer
trigger, ``command`` per command type, ``session`` per zread command, and why the
session failed), :func:`run_inprocess` (a :class:`~simulator.core.session.Session` on a
:class:`~simulator.runners.live.LiveSession`, sleeping with ``gevent.sleep`` until its
next wake-up, and yielding every :data:`YIELD_EVERY` answers sent in a row) and
:func:`run_process` (the real ``zread`` of this environment over its
pipes, ``gevent.subprocess``; without ``ZREAD_SIM_SERVER``, so each is a whole
``zread`` started cold, not a launcher handing its session to a warm server whose memory
it would not count). Every transcript is checked by the conformance check
(:class:`~simulator.tools.conformance.Checker`).

A command's time runs from sending it to the event that answers it: in-process, the
first event the session writes after taking the line; in a process, the first event read
after it was sent. A process reports how late its timers fired at exit, without their
names (:data:`PROCESS_TIMERS`).

Must not: import Locust (:mod:`simulator.locust` does, and calls in here), nor change a
session's behaviour (timers, bytes and faults are the session's).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import gevent.subprocess
import msgspec

from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.launcher import VARIABLE as SERVER_VARIABLE
from simulator.regularfile import NotRegularFile, read_regular
from simulator.runners.hooks import Live, Observer
from simulator.runners.live import LiveSession
from simulator.runners.output import OutputStage
from simulator.runners.stdio import LATENESS_FILE
from simulator.tools.conformance import Checker

if TYPE_CHECKING:
    from simulator.core.chart_specs import Chart
    from simulator.core.driver import Flags
    from simulator.core.outcome import Outcome
    from simulator.scenario import Scenario

MAX_LATENESS_FILE = 16 << 20
"""The most bytes of a child's lateness file read."""
YIELD_EVERY = 64
"""In-process: answers sent in a row before the session's greenlet yields to the others."""
PROCESS_TIMERS = "process timers"
"""The ``lateness`` name of a process's timers (it reports them without their names)."""

Fire = Callable[[str, str, float, str], None]
"""``fire(kind, name, milliseconds, error)``: one figure ("" error: none)."""
Answer = Callable[[dict[str, Any]], "bytes | None"]


@dataclass
class Plan:
    """What one session runs, and who answers it."""

    command: str
    args: tuple[str, ...]
    scenario: str
    speed: float
    timeout: float
    answer: Answer
    children: set[int] = field(default_factory=set)
    """Process mode: the pids running now (their RSS counts)."""


class TimedSession(Session):
    """A session that says which trigger its last timer fired and counts the lines it took."""

    __slots__ = ("fed", "last_trigger")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_trigger = ""
        self.fed = 0

    def step(self) -> Outcome:
        timer = self.next_timer()
        self.last_trigger = "" if timer is None else timer.trigger
        return super().step()

    def feed(self, line: bytes) -> Outcome:
        self.fed += 1
        return super().feed(line)


@dataclass
class Prepared:
    """What every in-process session of a plan shares: its chart, scenario and flags."""

    chart: Chart
    scenario: Scenario
    flags: Flags

    @classmethod
    def of(cls, command: str, args: tuple[str, ...], scenario: str) -> Prepared:
        from simulator.launch import parse_flags
        from simulator.scenario import load_scenario
        from statecharts import load_chart

        return cls(load_chart(command), load_scenario(scenario), parse_flags(command, args))

    def warm_up(self, command: str, args: tuple[str, ...], scenario: str) -> None:
        """One whole session through :func:`run_inprocess` at speed 0, its figures
        dropped: what a first session builds lazily (imports, the check's rules, caches)
        is built before the first measured one, whose timers it would make late, and is
        not counted as the sessions' memory."""
        from simulator.tools.client import ReferenceClient

        plan = Plan(command, args, scenario, 0.0, 60.0, ReferenceClient().answer)
        run_inprocess(plan, self, 0, Report(command, lambda *_: None))


class Report:
    """What one session tells, and what went wrong with it."""

    def __init__(self, command: str, fire: Fire) -> None:
        self.fire = fire
        self.started = time.monotonic()
        self.checker = Checker(command)
        self.problem = ""
        self.done_at: float | None = None
        self.command: tuple[str, float] | None = None
        self.lines_in = 0
        self.lines_out = 0

    def late(self, name: str, seconds: float) -> None:
        self.fire("lateness", name or "timer", max(0.0, seconds) * 1000, "")

    def event(self, line: bytes, now: float, *, answers: bool = True) -> dict[str, Any] | None:
        """Check and decode one event line; the command it answers (if ``answers``) is
        reported."""
        self.lines_out += 1
        try:
            event = msgspec.json.decode(line)  # once: the check takes it decoded
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            event = None
        self.checker.feed("out", self.lines_out, now - self.started, line, event)
        if not isinstance(event, dict):
            self.problem = self.problem or f"not an event: {line[:80]!r}"
            return None
        if self.command is not None and answers:
            kind, sent = self.command
            self.command = None
            self.fire("command", kind, (now - sent) * 1000, str(event.get("error") or ""))
        if event.get("done") and self.done_at is None:
            self.done_at = now
        return event

    def sent(self, line: bytes, now: float) -> None:
        self.lines_in += 1
        self.checker.feed("in", self.lines_in, now - self.started, line)
        try:
            kind = str(msgspec.json.decode(line).get("type"))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, AttributeError):
            kind = "?"
        self.command = (kind, now)

    def session(self, name: str) -> None:
        """The ``session`` figure: failed with the first problem met, if any."""
        end = self.done_at if self.done_at is not None else time.monotonic()
        self.checker.finish(None if self.done_at is None else 0, end - self.started)
        problem = self.problem
        if not problem and self.checker.deviations:
            problem = f"conformance: {self.checker.deviations[0]}"
        self.fire("session", name, (end - self.started) * 1000, problem)


# -- in-process ----------------------------------------------------------------------------


class _Client(Observer):
    """The endpoint and observer of one in-process session: it reads what the session
    writes as a client would, and queues the answers."""

    def __init__(self, plan: Plan, report: Report, session: TimedSession) -> None:
        self.plan = plan
        self.report = report
        self.session = session
        self.pending = b""
        self.answers: deque[bytes] = deque()
        self.fed_at_send = 0

    def write(self, data: bytes) -> bool:
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            # An event written before the session took the last command (a timer due
            # before it) does not answer it.
            answers = self.session.fed > self.fed_at_send
            self._answer(self.report.event(line, time.monotonic(), answers=answers))
        return True

    def _answer(self, event: dict[str, Any] | None) -> None:
        if event is not None:
            answer = self.plan.answer(event)
            if answer is not None:
                self.answers.append(answer if answer.endswith(b"\n") else answer + b"\n")

    def stderr(self, line: str) -> None:
        pass

    def close_stdout(self) -> None:
        self.report.problem = self.report.problem or "stdout closed before done:true"

    def fired(self, live: Live, due: float) -> None:
        self.report.late(self.session.last_trigger, time.monotonic() - due)


def run_inprocess(plan: Plan, prepared: Prepared, seed: int, report: Report) -> None:
    """One session in this greenlet, to its end (or its problem)."""
    session = TimedSession(
        prepared.chart, prepared.scenario, flags=prepared.flags, seed=seed, speed=plan.speed
    )
    stage = OutputStage.for_scenario(prepared.scenario, seed=seed, speed=session.speed)
    client = _Client(plan, report, session)
    host = EffectHost.for_scenario(prepared.scenario, seed=seed)
    live = LiveSession(session, stage, client, clock=time.monotonic, host=host, observer=client)
    deadline = report.started + plan.timeout
    try:
        live.start()
        answered = 0
        while not live.finished and not live.hung:
            if client.answers:
                # An answer policy whose every answer makes another event at once never
                # sleeps: the deadline holds here too, and the other greenlets (the
                # process's run, its -t, its SIGTERM) get their turn now and then.
                if time.monotonic() > deadline:
                    report.problem = f"no done:true within {plan.timeout:g} s"
                    break
                line = client.answers.popleft()
                client.fed_at_send = session.fed
                report.sent(line[:-1], time.monotonic())
                live.received(line)
                answered += 1
                if answered % YIELD_EVERY == 0:
                    gevent.sleep(0)
                continue
            wakeup = live.next_wakeup()
            if wakeup is None:
                waiting = ", ".join(session.waiting_for) or "nothing"
                report.problem = report.problem or f"left waiting for {waiting}: no answer came"
                break
            if wakeup > deadline:
                report.problem = f"no done:true within {plan.timeout:g} s"
                break
            gevent.sleep(max(0.0, wakeup - time.monotonic()))
            live.tick()
        report.problem = report.problem or _verdict(live, session)
    finally:
        live.close()


def _verdict(live: LiveSession, session: TimedSession) -> str:
    """What went wrong with an in-process session that stopped, or ''."""
    if live.hung:
        return "hung (a hang fault): no done:true will come"
    if live.code:
        return f"exit code {live.code}"
    if session.violations:
        return f"client mistake: {session.violations[0]}"
    if not session.done:
        return "ended without done:true"
    return ""


# -- process --------------------------------------------------------------------------------


def zread_argv(plan: Plan, seed: int) -> list[str]:
    """The argv of one process-mode session: this environment's ``zread`` script (else
    ``python -m simulator``) with ``COMMAND --stdio ARGS --scenario S --seed N --speed X``."""
    script = Path(sys.executable).with_name("zread")
    program = [str(script)] if script.is_file() else [sys.executable, "-m", "simulator"]
    scenario = os.path.abspath(plan.scenario) if os.path.isfile(plan.scenario) else plan.scenario
    tail = ["--scenario", scenario, "--seed", str(seed), "--speed", repr(plan.speed)]
    return [*program, plan.command, "--stdio", *plan.args, *tail]


def run_process(plan: Plan, seed: int, report: Report) -> None:
    """One ``zread`` process, answered to its end (or killed at the timeout)."""
    with tempfile.TemporaryDirectory(prefix="zread-locust-") as folder:
        lateness_file = os.path.join(folder, "lateness.json")
        env = dict(os.environ, **{LATENESS_FILE: lateness_file})
        env.pop(SERVER_VARIABLE, None)  # a load test measures its own processes
        env.setdefault("ZREAD_SIM_FILES", "0")  # a load test writes no zread files
        proc = gevent.subprocess.Popen(
            zread_argv(plan, seed),
            stdin=gevent.subprocess.PIPE,
            stdout=gevent.subprocess.PIPE,
            stderr=gevent.subprocess.DEVNULL,
            env=env,
        )
        plan.children.add(proc.pid)
        try:
            code = _converse(plan, proc, report)
        finally:
            plan.children.discard(proc.pid)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if code:
            report.problem = report.problem or f"exit code {code}"
        if report.done_at is None:
            report.problem = report.problem or "the transcript ended without done:true"
        for seconds in read_lateness(lateness_file):
            report.late(PROCESS_TIMERS, seconds)


def _converse(plan: Plan, proc: Any, report: Report) -> int | None:
    """Read the process's lines and answer them until it ends; its exit code (None:
    killed at the timeout)."""
    try:
        with gevent.Timeout(plan.timeout):
            for line in proc.stdout:
                if not line.endswith(b"\n"):
                    report.problem = report.problem or f"incomplete last line: {line[:80]!r}"
                event = report.event(line.rstrip(b"\n"), time.monotonic())
                answer = None if event is None else plan.answer(event)
                if answer is not None and proc.poll() is None:
                    answer = answer if answer.endswith(b"\n") else answer + b"\n"
                    report.sent(answer[:-1], time.monotonic())
                    try:
                        proc.stdin.write(answer)
                        proc.stdin.flush()
                    except OSError:
                        pass  # it ended meanwhile: its exit says how
            proc.stdin.close()
            return int(proc.wait())
    except gevent.Timeout:
        report.problem = f"no done:true within {plan.timeout:g} s"
        return None


def read_lateness(path: str) -> list[float]:
    """The lateness samples (seconds) a process wrote to ``path`` at exit
    (``{"lateness_s": [...]}``, :data:`~simulator.runners.stdio.LATENESS_FILE`); none
    from a file over :data:`MAX_LATENESS_FILE` bytes (no session writes that many)."""
    try:
        raw = read_regular(path, path, MAX_LATENESS_FILE)
        data = json.loads(raw) if len(raw) <= MAX_LATENESS_FILE else None
    except (OSError, ValueError, RecursionError, NotRegularFile):
        return []
    samples = data.get("lateness_s") if isinstance(data, dict) else None
    if not isinstance(samples, list):
        return []
    return [float(v) for v in samples if isinstance(v, int | float) and v == v]
