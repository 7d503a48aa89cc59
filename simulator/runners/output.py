"""From a session's event lines to what a runner writes: one pipeline for every runner.

Owns: :class:`Wire`, the step between the session and the bytes, shared by the process
runners: carry out the effects the driver asked for (before the client hears of them),
wrap each event in clijson framing when asked (``--frame``: a chunk line per event,
and the final one also framed), and pass the result through the scenario's transport
faults. What comes out is a list of :mod:`simulator.scenario.faults` actions.

Must not: write, sleep or read the clock: a runner carries the actions out.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator import clijson
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.scenario import faults

__all__ = ["Wire"]


class Wire:
    """The output side of one session."""

    def __init__(
        self,
        session: Session,
        *,
        effects: EffectHost | None = None,
        frame: bool = False,
        owner: int = 0,
    ) -> None:
        self.session = session
        self.effects = effects or EffectHost()
        self.frame = frame
        self.faults = faults.FaultPlan(
            session.scenario.faults,
            f"zread-sim:{session.seed}:transport",
            speed=session.speed,
        )
        self._owner = owner
        self.intercept: Callable[[object], bool] | None = None
        """Offered each effect first; True means it took care of it (a control peer)."""

    def perform_effects(self) -> None:
        """Carry out what the driver asked for, handing results back to the session."""
        for effect in self.session.take_effects():
            if self.intercept is not None and self.intercept(effect):
                continue
            result = self.effects.perform(self._owner, effect)
            if result is not None:
                self.session.resolve(effect, result)

    def render(self, events: list[bytes]) -> list[faults.Action]:
        """The actions that write ``events`` (each produced by the last session call)."""
        self.perform_effects()
        actions: list[faults.Action] = []
        last = len(events) - 1
        for index, event in enumerate(events):
            data = self._framed(event, final=self.session.done and index == last)
            # Every event is counted, so a fault added later still finds its event.
            actions.extend(self.faults.actions(data, self.session.shown_state))
        return actions

    def _framed(self, event: bytes, *, final: bool) -> bytes:
        if not self.frame:
            return event
        payload = event[:-1]
        data = clijson.chunk_line(payload)
        return data + clijson.framed(payload) if final else data

    def close(self) -> None:
        """Release what the effects hold (servers, the home)."""
        self.effects.close()
