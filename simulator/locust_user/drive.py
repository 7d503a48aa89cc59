"""What a zread session of a load test runs and reports, and one session as a process.

Owns: :class:`Plan` (what to run and how to answer), :class:`Prepared` (what the
in-process sessions of a plan share, :mod:`simulator.locust_user.inprocess` runs them),
:class:`TimedSession`, :class:`Report` (the figures one session hands to a
``fire(kind, name, ms, error)`` callback: ``lateness`` per timer trigger, ``command`` per
command type, ``session`` per zread command, and why the session failed; each event
judged by the conformance check, :class:`~simulator.tools.conformance.Checker`, in full
or by its envelope) and :func:`run_process` (the real ``zread`` of this environment over
its pipes, ``gevent.subprocess``; without ``ZREAD_SIM_SERVER``, so each is a whole
``zread`` started cold, not a launcher handing its session to a warm server whose memory
it would not count; every event in full).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import gevent.subprocess
import msgspec

from simulator.core.session import Session
from simulator.launcher import VARIABLE as SERVER_VARIABLE
from simulator.locust_user.event import Event, read_head
from simulator.regularfile import NotRegularFile, read_regular
from simulator.runners.stdio import LATENESS_FILE
from simulator.tools.conformance import Checker

if TYPE_CHECKING:
    from simulator.core.chart_specs import Chart
    from simulator.core.driver import Flags
    from simulator.core.outcome import Outcome
    from simulator.core.timers import Timer
    from simulator.scenario import Scenario

MAX_LATENESS_FILE = 16 << 20
"""The most bytes of a child's lateness file read."""
PROCESS_TIMERS = "process timers"
"""The ``lateness`` name of a process's timers (it reports them without their names)."""

Fire = Callable[[str, str, float, str], None]
"""``fire(kind, name, milliseconds, error)``: one figure ("" error: none)."""
Answer = Callable[[Mapping[str, Any]], "bytes | None"]


@dataclass(slots=True)
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

    def _due(self, timer: Timer, out: Outcome) -> None:
        self.last_trigger = timer.trigger
        super()._due(timer, out)

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


class Report:
    """What one session tells, and what went wrong with it. A report ``in_full`` decodes
    every event and judges it against the chart; else each event is judged by its
    envelope (:meth:`~simulator.tools.conformance.Checker.feed_envelope`) and handed on
    as an :class:`~simulator.locust_user.event.Event`, its vm decoded when looked at."""

    __slots__ = (
        "checker",
        "command",
        "done_at",
        "fire",
        "in_full",
        "lines_in",
        "lines_out",
        "problem",
        "started",
    )

    def __init__(self, command: str, fire: Fire, *, in_full: bool = True) -> None:
        self.fire = fire
        self.in_full = in_full
        self.started = time.monotonic()
        self.checker = Checker(command)
        self.problem = ""
        self.done_at: float | None = None
        self.command: tuple[str, float] | None = None
        self.lines_in = 0
        self.lines_out = 0

    def late(self, name: str, seconds: float) -> None:
        self.fire("lateness", name or "timer", max(0.0, seconds) * 1000, "")

    def event(self, line: bytes, now: float, *, answers: bool = True) -> Mapping[str, Any] | None:
        """Check and decode one event line (its newline may end it: judged by its
        envelope, a line is not copied without it); the command it answers (if
        ``answers``) is reported."""
        self.lines_out += 1
        head = None if self.in_full else read_head(line)
        event: Mapping[str, Any]
        if head is not None:
            self.checker.feed_envelope(self.lines_out, now - self.started, line, head)
            event = Event(line, head)
        else:
            line = line.removesuffix(b"\n")
            try:
                doc = msgspec.json.decode(line)  # once: the check takes it decoded
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                doc = None
            self.checker.feed("out", self.lines_out, now - self.started, line, doc)
            if not isinstance(doc, dict):
                self.problem = self.problem or f"not an event: {line[:80]!r}"
                return None
            event = doc
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
