"""What the load tests share: a run of ``main`` read back from its JSON summary, and the
same session run in virtual time with the reference client, to compare against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.runners.virtual import start
from simulator.tools.client import ReferenceClient
from simulator.tools.load import main


def load(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    """``main`` with ``argv``: its exit code and the summary it wrote as JSON."""
    path = tmp_path / "summary.json"
    code = main(["--json", str(path), "--no-progress", *argv])
    return code, json.loads(path.read_text())


def virtual_transcript(
    scenario: str, seed: int, *args: str, command: str = "generate"
) -> tuple[int, int]:
    """(events, bytes) of one session run in virtual time with the reference client."""
    sim = start(command, *args, scenario=scenario, seed=seed, ignore_faults=True)
    client = ReferenceClient()
    seen = 0
    while True:
        while seen < len(sim.events):
            answer = client.answer(sim.events[seen])
            seen += 1
            if answer is not None:
                sim.send_line(answer[:-1])
        if sim.done:
            break
        sim.wait_for(lambda _: True)
    out = [line.data for line in sim.transcript if line.direction == "out"]
    sim.close()
    return len(out), sum(map(len, out))


def assert_sane_lateness(lateness: dict[str, float]) -> None:
    assert lateness["max"] >= lateness["p99"] >= lateness["p95"] >= lateness["p50"] >= 0
    assert lateness["timer_events"] > 0
