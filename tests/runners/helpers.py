"""What several runner tests share: a clock only the test moves, an endpoint and an
observer that keep everything, and a live session on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.hosts.journal import JournalWriter
from simulator.launch import build_session
from simulator.runners.hooks import Live, Observer, observers
from simulator.runners.journaling import Journaling
from simulator.runners.live import LiveSession
from simulator.runners.output import OutputStage
from simulator.scenario import load_scenario
from simulator.scenario.faults import Fault


def stage_of(session: Session, *, frame: bool = False) -> OutputStage:
    """The output stage a runner builds for ``session``: its scenario's transport faults,
    drawn from its seed."""
    runtime = session.runtime
    return OutputStage.for_scenario(
        runtime.scenario, seed=runtime.seed, speed=session.speed, frame=frame
    )


class Clock:
    """A clock only the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Keeper:
    """An endpoint that keeps every write; ``gone`` plays a reader that went away."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.stderr_lines: list[str] = []
        self.closed = False
        self.gone = False

    def write(self, data: bytes) -> bool:
        if self.gone:
            return False
        self.writes.append(data)
        return True

    def stderr(self, line: str) -> None:
        self.stderr_lines.append(line)

    def close_stdout(self) -> None:
        self.closed = True

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in b"".join(self.writes).splitlines()]


class Told(Observer):
    """An observer that keeps what it is told."""

    def __init__(self) -> None:
        self.produced_events: list[bytes] = []
        self.fired_due: list[float] = []
        self.settled_count = 0
        self.ends: list[tuple[int | None, str]] = []

    def produced(self, live: Live, outcome: Outcome) -> None:
        self.produced_events += outcome

    def fired(self, live: Live, due: float) -> None:
        self.fired_due.append(due)

    def settled(self, live: Live) -> None:
        self.settled_count += 1

    def ended(self, live: Live, code: int | None, how: str) -> None:
        self.ends.append((code, how))


def live(
    command: str,
    *args: str,
    faults: list[Fault] | None = None,
    speed: float = 1.0,
    scenario: str = "default",
    frame: bool = False,
    observer: Observer | None = None,
    journal: Path | None = None,
) -> tuple[LiveSession, Keeper, Clock]:
    loaded = load_scenario(scenario)
    if faults is not None:
        loaded = msgspec.structs.replace(loaded, faults=faults)
    session = build_session(command, args, scenario=loaded, speed=speed)
    if journal is not None:
        writer = JournalWriter.open(str(journal), warn=print, pid=1)
        observer = observers(observer, Journaling(writer, session))
    keeper, clock = Keeper(), Clock()
    stage = stage_of(session, frame=frame)
    runner = LiveSession(session, stage, keeper, clock=clock, observer=observer)
    return runner, keeper, clock


def run_out(runner: LiveSession, clock: Clock, limit: int = 10_000) -> None:
    """Move the clock from wake-up to wake-up until nothing is pending."""
    for _ in range(limit):
        wake = runner.next_wakeup()
        if wake is None:
            return
        clock.now = max(clock.now, wake)
        runner.tick()
    raise AssertionError("the run did not settle")


def records(path: Path) -> list[dict[str, Any]]:
    """The records of the journal at ``path``."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]
