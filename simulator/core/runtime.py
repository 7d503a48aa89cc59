"""What a chart's model may use of the session that runs it: :class:`ChartRuntime`.

Owns: the services of :class:`simulator.core.driver.Runtime` for one session: the
scenario and the flags, the random streams derived from the seed (timing, world data
and failures each have their own, so a scenario that changes a delay does not change
which page fails), timers armed on the session's :class:`~simulator.core.timers.Timers`,
the failure points met, the effects asked for until the session hands them to its
runner, and the delays a control peer replaced (:meth:`ChartRuntime.set_timing`). The
session holds it and gives it to its driver; it holds nothing of the session, so a
session and its driver make no reference cycle and a finished session is freed when its
last reference goes (without the cyclic collector, whose pauses grow with thousands of
live sessions).

Must not: read, write, sleep or look at the wall clock.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from simulator.core.chart_check import ChartError
from simulator.core.chart_specs import WORLD_DELAY
from simulator.scenario.failures import FailurePlan

if TYPE_CHECKING:
    from simulator.core.chart_specs import Chart
    from simulator.core.driver import Flags
    from simulator.core.timers import Timers
    from simulator.scenario import Scenario
    from simulator.scenario.failures import Failure
    from simulator.scenario.timing import Delay


class ChartRuntime:
    """The runtime one session gives its driver; see the module docstring."""

    __slots__ = (
        "_replaced",
        "_rng",
        "_timers",
        "_timing_rng",
        "chart",
        "effects",
        "failures",
        "flags",
        "met",
        "peer_attached",
        "scenario",
        "seed",
    )

    def __init__(
        self, chart: Chart, scenario: Scenario, flags: Flags, seed: int, timers: Timers
    ) -> None:
        self.chart = chart
        self.scenario = scenario
        self.flags = flags
        self.seed = seed
        self._timers = timers
        self._timing_rng = random.Random(f"zread-sim:{seed}:timing")
        self._rng: random.Random | None = None  # drawn from rarely: made on first use
        self.failures = FailurePlan(scenario.failures, f"zread-sim:{seed}:failures")
        """The domain failures still to come: the scenario's, then the injected ones."""
        self._replaced: dict[str, Delay] | None = None  # set_timing's, None until one
        self.met = 0
        """The failure points met so far, as a bit mask (``Chart.reached`` names them)."""
        self.effects: list[object] = []
        """What the driver asked of the outside world since the session last took them."""
        self.peer_attached = False
        """A control peer can answer requests (the session's, set by its runner)."""

    @property
    def rng(self) -> random.Random:
        """The world-data stream: fake names, ids, urls."""
        if self._rng is None:
            self._rng = random.Random(f"zread-sim:{self.seed}:world")
        return self._rng

    def schedule(self, trigger: str, delay: str | float, **payload: Any) -> int:
        """Fire ``trigger`` after the named scenario delay (or a number of seconds)."""
        seconds = self.draw(delay) if isinstance(delay, str) else float(delay)
        return self._timers.arm(trigger, seconds, payload)

    def cancel(self, timer_id: int) -> None:
        """Forget a timer that has not fired yet."""
        self._timers.cancel(timer_id)

    def failure(self, point: str, *, target: int = 0, attempt: int = 1) -> Failure | None:
        """The scenario's failure for this attempt at ``point``, or None if it succeeds."""
        bit = self.chart.failure_bits.get(point)
        if bit is None:
            raise ChartError(f"chart {self.chart.name}: failure point {point!r} is not declared")
        failure = self.failures.check(point, target=target, attempt=attempt)
        if failure is not None:
            self.met |= bit
        return failure

    def inject(self, failure: Failure) -> str:
        """Add a domain failure ahead of the scenario's (the first match wins); its id."""
        return self.failures.add(failure)

    def set_timing(self, name: str, delay: Delay) -> None:
        """Draw the delay ``name`` from ``delay`` from now on (timers already armed keep
        their deadline); ValueError when the chart has no delay of that name."""
        self.known_timing(name)
        if self._replaced is None:
            self._replaced = {}
        self._replaced[name] = delay

    def known_timing(self, name: str) -> None:
        """ValueError naming ``name`` and the chart's delays when it is not one of them."""
        if name not in self.chart.timing:
            known = ", ".join(sorted(self.chart.timing)) or "none"
            raise ValueError(f"{name!r} is not a timing of {self.chart.name} ({known})")

    def timing(self, name: str) -> Delay:
        """The delay ``name`` is drawn from now (KeyError when the chart has none)."""
        replaced = self._replaced.get(name) if self._replaced is not None else None
        return replaced or self.scenario.timing.get(name) or self.chart.timing[name]

    def effect(self, effect: object) -> None:
        """Ask the runner to do something outside the session (I/O)."""
        self.effects.append(effect)

    def take_effects(self) -> list[object] | None:
        """The effects asked for since the last call (None when there are none)."""
        effects = self.effects
        if not effects:
            return None
        self.effects = []
        return effects

    def draw(self, delay: str) -> float:
        """Seconds for the delay named ``delay``: a world value (``world.`` and its path)
        or a draw from the timing stream: of the delay :meth:`set_timing` put in its place,
        else the scenario's, else the chart's default."""
        if delay.startswith(WORLD_DELAY):
            value: Any = self.scenario.world
            for part in delay.removeprefix(WORLD_DELAY).split("."):
                value = getattr(value, part)
            return float(value)
        return self.timing(delay).draw(self._timing_rng)
