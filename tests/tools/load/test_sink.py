"""simulator.tools.load.sink: the endpoint of one in-process session, on a real hub."""

from __future__ import annotations

import asyncio
import json

import pytest

from simulator.launch import build_session
from simulator.runners.aio import Channel, Hub
from simulator.runners.output import OutputStage
from simulator.scenario import load_scenario
from simulator.tools.load.sink import Sink
from simulator.tools.load.stats import Stats

pytestmark = pytest.mark.timeout(60)


class Run:
    """What a sink needs of its run: counters, the hub, and which gates to answer."""

    def __init__(self, hub: Hub, *, plain: bool) -> None:
        self.hub = hub
        self.plain = plain
        self.stats = Stats(hub.time)
        self.gates: dict[tuple[str, ...], bool] = {}
        self.asked: list[tuple[str, ...]] = []

    def needs_answer(self, waiting_for: tuple[str, ...]) -> bool:
        self.asked.append(waiting_for)
        known = waiting_for not in ((), ("cancel", "quit"))
        self.gates[waiting_for] = known
        return known


def run_generate(*, plain: bool, scenario: str = "default") -> tuple[Sink, Run, Channel]:
    async def main() -> tuple[Sink, Run, Channel]:
        hub = Hub()
        run = Run(hub, plain=plain)
        session = build_session("generate", (), scenario=scenario, speed=0.0)
        sink = Sink(run, 0, hub.time(), timeout=30.0)
        stage = OutputStage.for_scenario(load_scenario(scenario), speed=session.speed)
        channel = Channel(hub, session, stage, sink)
        sink.channel = channel
        channel.start()
        await asyncio.wait_for(asyncio.shield(channel.done), 30)
        return sink, run, channel

    return asyncio.run(main())


def test_a_plain_run_counts_each_write_as_an_event_and_answers_its_gates() -> None:
    sink, run, channel = run_generate(plain=True)
    assert channel.session.done and channel.code == 0
    assert sink.answers >= 1 and not sink.problem and sink.pending == b""
    assert sink.events == run.stats.events > len(channel.session.journal) > 0
    assert run.stats.bytes == sink.bytes > 0
    assert run.asked and len(run.asked) == len(set(run.asked))  # each waiting_for asked once
    assert channel.session.violations == []


def test_with_faults_the_writes_are_cut_into_lines_first() -> None:
    sink, run, channel = run_generate(plain=False, scenario="noisy")
    assert channel.session.done and channel.code == 0
    assert sink.events == run.stats.events > len(channel.session.journal)
    assert sink.pending == b"" and sink.answers >= 1  # gates answered between the noise
    assert sink.problem.startswith("not a JSON line: b'")  # the first diagnostic


def test_a_line_that_is_not_an_event_is_a_problem_once() -> None:
    async def main() -> None:
        hub = Hub()
        sink = Sink(Run(hub, plain=False), 0, hub.time(), timeout=1.0)
        assert sink.write(b'{"vm":{}}\nnot json\n[1]\n')
        assert sink.events == 3 and sink.problem == "not an event: b'{\"vm\":{}}'"
        assert sink.write(b'{"vm":{},"wait')  # half a line: kept until its end comes
        assert sink.pending == b'{"vm":{},"wait' and sink.events == 3

    asyncio.run(main())


def test_closed_stdout_is_a_problem_and_later_writes_vanish() -> None:
    async def main() -> None:
        hub = Hub()
        run = Run(hub, plain=True)
        sink = Sink(run, 0, hub.time(), timeout=1.0)
        sink.stderr("ignored")
        sink.close_stdout()
        assert sink.write(json.dumps({"vm": {}}).encode() + b"\n")
        assert sink.problem == "stdout closed before done:true"
        assert sink.bytes == sink.events == run.stats.bytes == 0

    asyncio.run(main())
