"""Per-event CPU of a load test's in-process session, beside the bare session's.

Three figures, each the CPU time of M ``generate -y`` sessions (the default scenario
with ``[world.project] pages = P``) at ``--speed 0`` divided by the events they wrote,
each measured in a fresh process, the three taking turns round after round, the median
of the rounds given:

- **bare**: each :class:`~simulator.core.session.Session` driven to ``done:true`` by
  ``advance`` alone, one after another (no output stage, no client): the floor;
- **load**: the sessions as ``zread-sim load`` runs them in a Locust worker
  (:class:`simulator.locust_user.inprocess.Fleet`, users of ten side by side on the
  process's hub, every event read back and answered by the reference client, judged
  by the conformance check, one session in 50 in full), its figures handed to a
  callback that keeps nothing;
- **load + Locust**: the same, its figures fired as Locust requests
  (``environment.events.request``, counted by a local runner's statistics): what a
  worker pays an event.

Target: load + Locust <= 25 us an event. CPU time, not wall time: compare the figures of
one run only (the machine's speed moves between runs).

    python benchmarks/load_event.py [--rounds 5] [--sessions 500] [--pages 50]
                                    [--check-every 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

from _common import ROOT, pages_scenario

TARGET_US = 25.0

RUN = r"""
import json, sys, time
mode, scenario_path, sessions = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "locust":
    from locust import User, events
    from locust.env import Environment

    class _Nobody(User):
        abstract = True

    environment = Environment(user_classes=[_Nobody], events=events)
    environment.create_local_runner()
    request = environment.events.request.fire

    def fire(kind, name, ms, error):
        request(request_type=kind, name=name, response_time=ms, response_length=0,
                exception=None, context={})
else:
    def fire(kind, name, ms, error):
        pass
import gevent
from simulator.core.session import Session
from simulator.launch import parse_flags
from simulator.locust_user.drive import Plan, Prepared, Report
from simulator.locust_user.inprocess import Fleet, warm_up
from simulator.scenario import load_scenario
from simulator.tools.client import ReferenceClient
from statecharts import load_chart

EACH = 10
CHECK_EVERY = int(sys.argv[4])

def bare(first):
    chart, scenario = load_chart("generate"), load_scenario(scenario_path)
    flags = parse_flags("generate", ("-y",))
    events = 0
    for seed in range(first, first + sessions):
        session = Session(chart, scenario, flags=flags, seed=seed, speed=0.0)
        events += len(session.start())
        while (deadline := session.next_deadline()) is not None:
            events += len(session.advance(deadline, limit=1))
    return events

def load(first, prepared):
    counted = []
    def user(u):
        fleet = Fleet(prepared)
        try:
            for seed in range(first + u * EACH, first + (u + 1) * EACH):
                answer = ReferenceClient("generate").answer
                plan = Plan("generate", ("-y",), scenario_path, 0.0, 600.0, answer)
                fleet.start(plan, seed, Report("generate", fire, in_full=seed % CHECK_EVERY == 0))
            for _ in range(EACH):
                report = fleet.next_ended()
                report.session("generate")
                assert not report.problem, report.problem
                counted.append(report.lines_out)
        finally:
            fleet.close()
    gevent.joinall([gevent.spawn(user, u) for u in range(sessions // EACH)], raise_error=True)
    return sum(counted)

prepared = None
if mode != "bare":
    prepared = Prepared.of("generate", ("-y",), scenario_path)
    warm_up(prepared, "generate", ("-y",), scenario_path)
(bare(10**6) if mode == "bare" else load(10**6, prepared))  # warm: caches, imports
began = time.process_time()
events = bare(0) if mode == "bare" else load(0, prepared)
cpu = time.process_time() - began
print(json.dumps({"us": cpu / events * 1e6, "events": events}))
"""

MODES = ("bare", "load", "locust")
NAMES = {"bare": "bare session", "load": "load", "locust": "load + Locust"}


def measure(mode: str, scenario: str, sessions: int, check_every: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", RUN, mode, scenario, str(sessions), str(check_every)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode:
        sys.exit(f"{mode}: {done.stderr.strip()[-2000:]}")
    return float(json.loads(done.stdout.splitlines()[-1])["us"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--check-every", type=int, default=50)
    args = parser.parse_args()
    if args.sessions % 10:
        sys.exit("--sessions: a multiple of 10 (users of ten sessions each)")
    figures: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="load-event-") as folder:
        scenario = pages_scenario(folder, args.pages)
        for _ in range(args.rounds):
            for mode in MODES:
                figures[mode].append(measure(mode, scenario, args.sessions, args.check_every))
    print(f"{args.sessions} sessions of {args.pages} pages, speed 0, {args.rounds} rounds")
    for mode in MODES:
        values = figures[mode]
        low, high = min(values), max(values)
        print(
            f"{NAMES[mode]:>14}: {statistics.median(values):6.1f} us an event "
            f"(rounds {low:.1f} to {high:.1f})"
        )
    ours = statistics.median(figures["locust"])
    floor = statistics.median(figures["bare"])
    verdict = "met" if ours <= TARGET_US else f"MISSED by {ours / TARGET_US:.2f}x"
    print(f"load + Locust: {ours / floor:.2f}x the bare session")
    print(f"target: load + Locust <= {TARGET_US:g} us an event: {verdict}")


if __name__ == "__main__":
    main()
