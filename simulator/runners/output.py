"""The output stage: a pure step from a session's events to the actions a runner
carries out.

Owns: :class:`OutputStage`, shared by every real-time runner. It wraps each event in
clijson framing when asked (``--frame``: a chunk line per event, and the final one
also framed) and passes the result through the scenario's transport faults. What
comes out is a list of :mod:`simulator.scenario.faults` actions (write these bytes,
pause, a line on stderr, exit, hang, close stdout, stop reading); without faults or
framing it is one write per event.

Must not: write, sleep, read the clock, perform effects, or ask the session anything:
everything it needs is in the :class:`~simulator.core.outcome.Outcome` it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from simulator.core.outcome import Outcome
from simulator.scenario import faults

if TYPE_CHECKING:
    from simulator.scenario import Scenario


class OutputStage:
    """Events in, actions out, for one session."""

    __slots__ = ("_chunk_line", "_framed_doc", "faults", "frame")

    def __init__(self, plan: faults.FaultPlan, *, frame: bool = False) -> None:
        self.faults = plan
        """The transport faults still to come; the admin API adds to them."""
        self.frame = frame
        self._chunk_line: Callable[[bytes], bytes] | None = None
        self._framed_doc: Callable[[bytes], bytes] | None = None
        if frame:  # clijson is imported only with --frame
            from simulator import clijson

            self._chunk_line, self._framed_doc = clijson.chunk_line, clijson.framed

    @classmethod
    def for_scenario(
        cls, scenario: Scenario | None, *, seed: int = 0, speed: float = 1.0, frame: bool = False
    ) -> OutputStage:
        """The stage of a run of ``scenario`` (None: one without transport faults, a
        replay's): its transport faults, drawn from ``seed``; ``speed`` (the session's)
        multiplies their pauses."""
        planned = [] if scenario is None else scenario.faults
        plan = faults.FaultPlan(planned, f"zread-sim:{seed}:transport", speed=speed)
        return cls(plan, frame=frame)

    @property
    def plain(self) -> bool:
        """No transport fault and no framing: each event is one write of its line."""
        return not (self.faults or self.frame)

    def passes(self, outcome: Outcome) -> bool:
        """True when the events of ``outcome`` go out as they are, one write each (no
        fault, no framing), and then counted as :meth:`count` counts them; False, and
        nothing counted, when they need :meth:`actions`. What a runner's fast path asks
        once a session call, in place of :attr:`plain` and :meth:`count`."""
        return not self.frame and self.faults.passed_if_none(len(outcome), outcome.states[-1])

    def count(self, outcome: Outcome) -> None:
        """The events of ``outcome`` went out as they are (a runner that writes a plain
        stage's lines itself says so, so a fault added later finds its event)."""
        self.faults.passed(len(outcome), outcome.states[-1])

    def actions(self, outcome: Outcome) -> list[faults.Action]:
        """The actions that write the events of ``outcome``, in order."""
        actions: list[faults.Action] = []
        last = len(outcome) - 1
        for index, event in enumerate(outcome):
            data = self._framed(event, final=outcome.done and index == last)
            # Every event is counted, so a fault added later still finds its event.
            actions.extend(self.faults.actions(data, outcome.states[index]))
        return actions

    def _framed(self, event: bytes, *, final: bool) -> bytes:
        if self._chunk_line is None or self._framed_doc is None:
            return event
        payload = event[:-1]
        data = self._chunk_line(payload)
        return data + self._framed_doc(payload) if final else data
