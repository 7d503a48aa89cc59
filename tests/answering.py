"""A run answered to its end by the reference client, in virtual time: shared by the tests."""

from __future__ import annotations

from simulator.runners.virtual import SimSession, SimulationError
from simulator.tools.client import ReferenceClient


def drive(sim: SimSession, client: ReferenceClient | None = None) -> list[bytes]:
    """Answer each event as it comes, until done (or stalled); the lines sent."""
    client = client or ReferenceClient()
    sent: list[bytes] = []
    while True:
        try:
            current = sim.wait_for(lambda _: True)
        except SimulationError:
            return sent
        answer = client.answer(current)
        if answer is not None and current is sim.last:
            sim.send_line(answer[:-1])
            sent.append(answer)
