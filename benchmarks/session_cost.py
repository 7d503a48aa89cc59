"""What a session costs to create, and what an event costs in the load loop, beside another tree.

Two figures, each measured in a fresh process of each tree (its folder first on
``sys.path``), the trees taking turns round after round, and the median of the rounds
given for each:

- **per session created**: CPU time of making M ``generate -y`` sessions as a load test
  makes them (the :class:`~simulator.core.session.Session`, its output stage, its
  :class:`~simulator.runners.live.LiveSession` on an endpoint that keeps nothing) and
  writing each one's first event (``start``), idle, seeds 0..M-1; apart, the bare
  ``Session`` alone (constructed, not started);
- **per event**: CPU time of N ``generate -y`` sessions at ``--speed 0`` driven to
  ``done:true`` on one asyncio loop by one :class:`~simulator.runners.aio.Hub` (a
  :class:`~simulator.runners.aio.Channel` each, all N started at once, an endpoint that
  counts the events and answers any gate as the reference client does), divided by
  the events they wrote: what an event costs where thousands of sessions share a
  loop, the sessions' creation included.

The scenario is the default one with ``[world.project] pages = P`` (written to a
temporary folder). CPU time, not wall time: another process taking the core does not
count, though it still evicts caches, so compare the two trees of one run only.

    python benchmarks/session_cost.py [--against DIR] [--rounds 5] [--create 2000]
                                      [--sessions 500] [--pages 50]

Without ``--against`` only this tree is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _common import ROOT, pages_scenario, python

RUN = r"""
import asyncio, gc, json, sys, time
tree, scenario_path = sys.argv[1], sys.argv[2]
creates, sessions = int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, tree)
import simulator
assert simulator.__file__.startswith(tree), (simulator.__file__, tree)
from simulator.core.session import Session
from simulator.launch import parse_flags
from simulator.runners.aio import Channel, Hub
from simulator.runners.hooks import Observer
from simulator.runners.live import LiveSession
from simulator.runners.output import OutputStage
from simulator.scenario import load_scenario
from simulator.tools.client import ReferenceClient
from statecharts import load_chart

GATES_AND_QUIT = {"quit", "cancel"}


class Nowhere:
    def write(self, data):
        return True

    def stderr(self, line):
        pass

    def close_stdout(self):
        pass


class Client(Nowhere):
    # Counts the events, answers a gate as the reference client does, on the loop.
    def __init__(self, loop):
        self.loop, self.events, self.channel, self.client = loop, 0, None, None

    def write(self, data):
        self.events += 1
        waiting = self.channel.session.waiting_for
        if set(waiting) - GATES_AND_QUIT or waiting == ("quit",):
            self.client = self.client or ReferenceClient()
            answer = self.client.answer(json.loads(data))
            if answer is not None:
                self.loop.call_soon(self.channel.feed, answer[:-1])
        return True


class Ends(Observer):
    def __init__(self, count, finished):
        self.left, self.finished, self.codes = count, finished, []

    def ended(self, live, code, how):
        self.codes.append(code)
        self.left -= 1
        if not self.left:
            self.finished.set()


scenario = load_scenario(scenario_path)
chart, flags = load_chart("generate"), parse_flags("generate", ("-y",))
endpoint = Nowhere()
clock = lambda: 0.0


def session(seed, speed):
    return Session(chart, scenario, flags=flags, seed=seed, speed=speed)


def create(first, count):
    keep = []
    for seed in range(first, first + count):
        made = session(seed, 1.0)
        stage = OutputStage.for_scenario(scenario, seed=seed, speed=made.speed)
        live = LiveSession(made, stage, endpoint, clock=clock)
        live.start()
        keep.append(live)  # live till the end, as in a load test
    return keep


async def run(count):
    loop = asyncio.get_running_loop()
    ends = Ends(count, asyncio.Event())
    hub = Hub(loop, observer=ends)
    clients = []
    began = time.process_time()
    for seed in range(count):
        made = session(seed, 0.0)
        client = Client(loop)
        stage = OutputStage.for_scenario(scenario, seed=seed, speed=made.speed)
        client.channel = Channel(hub, made, stage, client, owner=seed)
        clients.append(client)
        client.channel.start()
    await ends.finished.wait()
    cpu = time.process_time() - began
    assert ends.codes == [0] * count, ends.codes
    assert all(c.channel.session.done for c in clients)
    return cpu, sum(c.events for c in clients)


create(10**9, 50), asyncio.run(run(5))  # lazy imports and caches first
gc.collect()
gc.freeze()  # what exists now is never scanned again, as a long-running host does
began = time.process_time_ns()
kept = create(0, creates)
created = (time.process_time_ns() - began) / creates / 1e3
del kept
began = time.process_time_ns()
kept = [session(seed, 1.0) for seed in range(creates)]
constructed = (time.process_time_ns() - began) / creates / 1e3
del kept
gc.collect()
cpu, events = asyncio.run(run(sessions))
print(json.dumps({
    "created_us": created,
    "constructed_us": constructed,
    "event_us": cpu * 1e6 / events,
    "events": events,
}))
"""


def measure(tree: str, scenario: str, creates: int, sessions: int) -> dict[str, float]:
    """One round in a fresh process of ``tree``."""
    done = subprocess.run(
        [python(), "-c", RUN, tree, scenario, str(creates), str(sessions)],
        cwd=tree,
        env=os.environ | {"PYTHONHASHSEED": "0"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"session_cost.py: {tree}: the round failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def report(rounds: dict[str, list[dict[str, float]]]) -> None:
    """The median of each figure per tree; the ratios of this tree to the other."""
    first: dict[str, float] = {}
    for name, figures in rounds.items():
        median = {key: statistics.median(f[key] for f in figures) for key in figures[0]}
        print(
            f"{name}: {median['created_us']:.1f} us a session created and started "
            f"({median['constructed_us']:.1f} us the bare Session), "
            f"{median['event_us']:.1f} us of CPU an event ({median['events']:,.0f} events)"
        )
        if first:
            ratios = (
                first[key] / median[key] for key in ("created_us", "constructed_us", "event_us")
            )
            print(
                "  this tree / it: {:.2f}x created, {:.2f}x bare, {:.2f}x an event".format(*ratios)
            )
        first = first or median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="DIR", help="another checkout, measured beside")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--create", type=int, default=2000, help="sessions created a round")
    parser.add_argument("--sessions", type=int, default=500, help="sessions run a round")
    parser.add_argument("--pages", type=int, default=50)
    args = parser.parse_args()
    if args.rounds < 1 or args.create < 1 or args.sessions < 1:
        parser.error("--rounds, --create and --sessions must be at least 1")
    trees = {"this tree": ROOT}
    if args.against:
        if not os.path.isdir(os.path.join(args.against, "simulator")):
            parser.error(f"--against {args.against}: not a checkout (no simulator/ in it)")
        trees[args.against] = os.path.abspath(args.against)
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="session-cost-") as folder:
        scenario = pages_scenario(folder, args.pages)
        for _ in range(args.rounds):
            for name, tree in trees.items():  # taking turns: a slow minute hits both
                rounds[name].append(measure(tree, scenario, args.create, args.sessions))
    print(
        f"generate -y, {args.pages} pages; CPU time, medians of {args.rounds} interleaved rounds; "
        f"{args.create:,} sessions created, {args.sessions:,} run to done at speed 0 a round"
    )
    report(rounds)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
