"""simulator.runners.aio: many sessions on one loop and one timer heap, in real time.

Each channel writes to an in-memory endpoint that records what it gets and, where the
test wants a whole run, answers each gate with the reference client (fed back on the
loop, as a client process would answer after reading the event).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from simulator.launch import build_session
from simulator.runners import aio
from simulator.runners.aio import Channel, Hub
from simulator.runners.hooks import Live, Observer
from simulator.runners.virtual import start as virtual_start
from simulator.scenario import faults
from simulator.tools.client import ReferenceClient
from tests.runners.helpers import stage_of


class Recorder:
    """An endpoint that keeps everything; with ``answer``, plays the reference client."""

    def __init__(self, *, answer: bool = False) -> None:
        self.writes: list[bytes] = []
        self.stderr_lines: list[str] = []
        self.output_closed = False
        self.channel: Channel | None = None
        self.client = ReferenceClient() if answer else None

    def write(self, data: bytes) -> bool:
        self.writes.append(data)
        if self.client is not None:
            assert self.channel is not None
            reply = self.client.answer(json.loads(data))
            if reply is not None:
                self.channel.hub.loop.call_soon(self.channel.feed, reply[:-1])
        return True

    def stderr(self, line: str) -> None:
        self.stderr_lines.append(line)

    def close_stdout(self) -> None:
        self.output_closed = True

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in b"".join(self.writes).splitlines()]


class Told(Observer):
    """Keeps each timer fired (the session, when it was due) and each run's end."""

    def __init__(self) -> None:
        self.fired_due: list[tuple[Live, float]] = []
        self.ends: list[tuple[int | None, str]] = []

    def fired(self, live: Live, due: float) -> None:
        self.fired_due.append((live, due))

    def ended(self, live: Live, code: int | None, how: str) -> None:
        self.ends.append((code, how))


def channel_for(
    hub: Hub,
    command: str,
    *args: str,
    speed: float = 1.0,
    seed: int = 0,
    answer: bool = False,
    scenario: str = "default",
    observer: Observer | None = None,
) -> tuple[Channel, Recorder]:
    session = build_session(command, args, scenario=scenario, seed=seed, speed=speed)
    recorder = Recorder(answer=answer)
    channel = Channel(hub, session, stage_of(session), recorder, observer=observer)
    recorder.channel = channel
    return channel, recorder


def run(main: Callable[[], Awaitable[None]], timeout: float = 20.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(main(), timeout)

    asyncio.run(bounded())


def virtual_lines(command: str, *args: str, seed: int, speed: float) -> list[bytes]:
    """The event lines of the same run in virtual time, answered by the reference client."""
    sim = virtual_start(command, *args, seed=seed, speed=speed)
    client = ReferenceClient()
    seen = 0
    while True:
        while seen < len(sim.events):
            event = sim.events[seen]
            seen += 1
            reply = client.answer(event)
            if reply is not None:
                sim.send_line(reply[:-1])
        if sim.done:
            break
        deadline = sim.session.next_deadline()
        assert deadline is not None, "stalled"
        sim.advance(deadline - sim.now)
    sim.close()
    return [line.data for line in sim.transcript if line.direction == "out"]


# -- one heap for many channels --------------------------------------------------------


def test_many_channels_share_one_hub_and_match_the_virtual_runs() -> None:
    count = 200
    told = Told()

    async def main() -> None:
        hub = Hub(observer=told)
        pairs = [
            channel_for(hub, "update", seed=seed, speed=0.01, answer=True) for seed in range(count)
        ]
        for channel, _ in pairs:
            channel.start()
        codes = await asyncio.gather(*(channel.done for channel, _ in pairs))
        assert codes == [0] * count
        for seed, (channel, recorder) in enumerate(pairs):
            assert channel.session.done
            assert recorder.writes == virtual_lines("update", seed=seed, speed=0.01), seed
            assert recorder.events[-1]["vm"]["state"] == "done"
            channel.close()
        assert {id(live) for live, _ in told.fired_due} == {id(c) for c, _ in pairs}
        assert told.ends == [(0, "done")] * count

    run(main)
    assert told.fired_due and all(due >= 0 for _, due in told.fired_due)


def test_channels_of_different_commands_and_speeds_on_one_hub() -> None:
    async def main() -> None:
        hub = Hub()
        generate, gen_out = channel_for(hub, "generate", "-y", speed=0.005, answer=True, seed=3)
        update, up_out = channel_for(hub, "update", speed=0.02, answer=True, seed=4)
        version, ver_out = channel_for(hub, "version", answer=True)
        for channel in (generate, update, version):
            channel.start()
        await asyncio.gather(generate.done, update.done, version.done)
        assert gen_out.writes == virtual_lines("generate", "-y", seed=3, speed=0.005)
        assert up_out.writes == virtual_lines("update", seed=4, speed=0.02)
        assert len(ver_out.writes) == 1 and ver_out.events[0]["done"] is True

    run(main)


# -- pause, resume, set_speed ---------------------------------------------------------


def test_pause_freezes_the_session_clock_and_its_timers() -> None:
    async def main() -> None:
        hub = Hub()
        channel, recorder = channel_for(hub, "generate", "-y", speed=1.0)
        channel.start()  # the next timer (a catalog step) is 0.15-0.28 s away
        channel.pause()
        assert channel.paused and hub.wakeup(channel) is None
        frozen = channel.now()
        await asyncio.sleep(0.35)
        assert channel.now() == frozen
        assert len(recorder.writes) == 1  # the timer did not fire while paused
        channel.resume()
        assert not channel.paused
        assert channel.now() - frozen < 0.05  # the clock goes on from where it stopped
        deadline = channel.session.next_deadline()
        assert deadline is not None and deadline > channel.now()
        while len(recorder.writes) == 1:
            await asyncio.sleep(0.01)
        assert channel.now() >= deadline
        channel.close()

    run(main)


def test_pause_twice_and_resume_twice_are_harmless() -> None:
    async def main() -> None:
        hub = Hub()
        channel, _ = channel_for(hub, "generate", "-y", speed=0.01)
        channel.start()
        channel.pause()
        first = channel.now()
        channel.pause()
        assert channel.now() == first
        channel.resume()
        channel.resume()
        assert await channel.done == 0
        assert channel.session.done

    run(main)


def test_set_speed_at_the_start_rescales_the_pending_timer() -> None:
    async def main() -> None:
        hub = Hub()
        channel, _ = channel_for(hub, "generate", "-y", speed=1.0)
        channel.start()
        (before,) = channel.session.pending()
        old = before.deadline
        channel.set_speed(3.0)
        (after,) = channel.session.pending()
        assert after.deadline == pytest.approx(3.0 * old, abs=0.01)
        assert channel.session.speed == 3.0
        channel.close()

    run(main)


def test_set_speed_keeps_the_share_of_the_wait_already_done() -> None:
    """A timer part way through its wait keeps that part; the rest is rescaled."""

    async def main() -> None:
        hub = Hub()
        channel, _ = channel_for(hub, "generate", "-y", speed=2.0)
        channel.start()
        (timer,) = channel.session.pending()  # the first catalog step: 0.3-0.56 s
        deadline = timer.deadline
        await asyncio.sleep(0.1)
        now = channel.now()
        assert now < deadline
        channel.set_speed(8.0)
        (after,) = channel.session.pending()
        assert after.deadline == pytest.approx(now + 4.0 * (deadline - now), abs=0.02)
        channel.close()

    run(main)


def test_set_speed_zero_runs_the_rest_at_once() -> None:
    async def main() -> None:
        hub = Hub()
        channel, recorder = channel_for(hub, "generate", "-y", speed=10.0)  # minutes
        channel.start()
        channel.set_speed(0.0)
        assert await asyncio.wait_for(channel.done, 5) == 0
        assert recorder.events[-1]["vm"]["done_total"] == 16

    run(main)


def test_set_speed_while_paused_waits_for_resume() -> None:
    async def main() -> None:
        hub = Hub()
        channel, recorder = channel_for(hub, "generate", "-y", speed=1.0)
        channel.start()
        channel.pause()
        channel.set_speed(0.0)
        await asyncio.sleep(0.05)
        assert len(recorder.writes) == 1 and channel.paused
        channel.resume()
        assert await asyncio.wait_for(channel.done, 5) == 0

    run(main)


def test_a_command_starts_its_delay_when_it_arrives() -> None:
    """The session clock follows real time between timers: a command fed 0.5 s after
    the gate schedules its step from then, as the stdio runner does."""

    async def main() -> None:
        hub = Hub()
        channel, recorder = channel_for(hub, "login", speed=1.0)
        channel.start()
        await asyncio.sleep(0.5)
        arrived = channel.now()
        channel.feed(b'{"type":"select_region","params":{"region":"global"}}')
        assert recorder.events[-1]["vm"]["state"] == "init_flow"
        (timer,) = channel.session.pending()
        assert timer.trigger == "_flow_ready"
        assert timer.deadline >= arrived + 0.2 - 0.01  # init_flow takes 0.2-0.4 s
        assert channel.session.now == pytest.approx(arrived, abs=0.05)
        channel.close()

    run(main)


# -- the wire's actions --------------------------------------------------------------


def test_faults_reach_the_endpoint() -> None:
    async def main() -> None:
        hub = Hub()
        channel, recorder = channel_for(hub, "generate", speed=0.0)  # waits at its gate
        channel.stage.faults.add(faults.Fault(kind="stderr", text="on stderr"), now=True)
        channel.stage.faults.add(faults.Fault(kind="split", pieces=2, pause=0.01), now=True)
        channel.start()
        assert len(recorder.writes) == 2  # at speed 0 the split's pause is no wait at all
        await asyncio.sleep(0.1)
        assert len(recorder.writes) == 2
        first = b"".join(recorder.writes)
        assert first.endswith(b"\n") and json.loads(first)["vm"]["state"] == "select_action"
        assert recorder.stderr_lines == ["on stderr"]
        channel.stage.faults.add(faults.Fault(kind="exit", code=5), now=True)
        channel.feed(b'{"type":"select_action","params":{"action":"generate"}}')
        assert await asyncio.wait_for(channel.done, 5) == 5
        assert channel.code == 5
        assert [e["vm"]["state"] for e in recorder.events] == ["select_action", "running"]
        assert not channel.session.done  # the process died; the session never ended

    run(main)


def test_close_stops_the_timers() -> None:
    async def main() -> None:
        hub = Hub()
        channel, recorder = channel_for(hub, "generate", "-y", speed=0.01)
        channel.start()
        channel.close()
        await asyncio.sleep(0.1)
        assert len(recorder.writes) == 1
        assert not channel.done.done()

    run(main)


def test_the_done_future_is_made_when_asked_for_and_knows_an_earlier_end() -> None:
    async def main() -> None:
        hub = Hub()
        told = Told()
        early, _ = channel_for(hub, "version", observer=told)
        early.start()  # version: one event, and the run is over
        assert told.ends == [(0, "done")]  # told without a future
        assert await early.done == 0  # asked for afterwards: already resolved
        late, _ = channel_for(hub, "generate", "-y", speed=0.0)
        waiting = late.done  # asked for first: resolved at the end
        late.start()
        while not late.finished:
            await asyncio.sleep(0.001)
        assert await waiting == 0

    run(main)


def test_a_hub_with_more_due_than_a_slice_lets_the_loop_run_between(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 300 sessions' timers come due together (the loop was held up for 0.4 s): more
    # ticks than one slice of the loop's time (a tenth of a slice here, so that a fast
    # machine cannot do them all in one). What the first tick queues (a client's answer,
    # a session to start) runs between slices, not after the last due timer.
    monkeypatch.setattr(aio, "SLICE", aio.SLICE / 10)

    async def main() -> None:
        hub = Hub()
        pairs = [channel_for(hub, "generate", "-y", seed=i) for i in range(300)]
        for channel, _ in pairs:
            channel.start()
        time.sleep(0.4)  # every session's first catalog step (0.15-0.28 s) is now due
        fired_before: list[int] = []
        first = pairs[0][1]
        write = first.write

        def probe_on_first_write(data: bytes) -> bool:
            first.write = write  # type: ignore[method-assign]
            sent = [len(r.writes) for _, r in pairs]
            hub.loop.call_soon(
                lambda: fired_before.append(sum(len(r.writes) for _, r in pairs) - sum(sent))
            )
            return write(data)

        first.write = probe_on_first_write  # type: ignore[method-assign]
        while not fired_before:
            await asyncio.sleep(0.01)
        due = len(pairs)  # at least one event each was due
        assert fired_before[0] < due  # the probe ran before every due tick was done

    run(main)


class OnFire(Observer):
    def __init__(self, told: Callable[[float], object]) -> None:
        self.told = told

    def fired(self, live: Live, due: float) -> None:
        self.told(due)


def test_a_hub_with_a_quantum_wakes_at_the_ends_of_quanta_only() -> None:
    fired: list[tuple[float, float]] = []  # (due, fired), on the loop's clock
    wakeups: list[float] = []

    class Recording(Hub):
        def _fire(self) -> None:
            wakeups.append(self.time())
            super()._fire()

    async def main() -> None:
        hub = Recording(quantum=0.25, observer=OnFire(lambda due: fired.append((due, hub.time()))))
        # A third of the pace: still several timers due in most quanta, in a third the time.
        pairs = [channel_for(hub, "generate", "-y", seed=i, speed=1 / 3) for i in range(3)]
        for channel, _ in pairs:
            channel.start()
        while not all(channel.finished for channel, _ in pairs):
            await asyncio.sleep(0.05)
        for _, recorder in pairs:
            assert recorder.events[-1]["done"] is True

    run(main)
    assert len(fired) > 10
    assert all(due <= when for due, when in fired)  # never before it is due
    # Every wake-up is at the end of a quantum (or a loop turn after it), never between.
    assert all(at % 0.25 < 0.1 for at in wakeups)
    assert len(wakeups) < len(fired)  # timers due in one quantum fire in one wake-up


class _ByHand:
    """A loop of the hub's three calls, turned by the test: not asyncio's."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[tuple[float, Callable[[], object]]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object], /) -> Any:
        self.calls.append((when, callback))
        return asyncio.Handle(lambda: None, (), asyncio.new_event_loop())

    def call_soon(self, callback: Callable[[], object], /) -> Any:
        return self.call_at(self.now, callback)


def test_a_hub_runs_on_any_loop_of_its_three_calls_and_its_futures_need_asyncio() -> None:
    loop = _ByHand()
    hub = Hub(loop)
    session = build_session("generate", ["-y"], scenario="default", seed=0)
    writes: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> bool:
            writes.append(data)
            return True

        def stderr(self, line: str) -> None:
            pass

        def close_stdout(self) -> None:
            pass

    channel = Channel(hub, session, stage_of(session), Sink())
    channel.start()
    assert len(writes) == 1 and loop.calls  # the first event, and a wake-up asked for
    while not channel.finished:
        when, callback = min(loop.calls, key=lambda call: call[0])
        loop.calls.clear()
        loop.now = max(loop.now, when)
        callback()
    assert json.loads(writes[-1])["done"] is True
    with pytest.raises(TypeError, match="asyncio"):
        hub.done(channel)
