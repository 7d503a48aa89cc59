"""The memory figure of a load test: RSS added per live session, sampled by the process.

Owns: :class:`Memory` (one process's samples, or a master's sums of its workers'),
:func:`memory_of` (an environment's), :func:`memory_figure` and :func:`memory_line` (the
run's figure, and its line in the summary), :data:`CHILDREN` and
:func:`rss_with_children` (the RSS of this process and of the ``zread`` processes it
runs in process mode). :mod:`simulator.locust` samples and sends the figures.

Must not: import Locust (an environment is only a key here).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simulator.tools.load.memory import rss_kb

if TYPE_CHECKING:
    from locust.env import Environment


@dataclass
class Memory:
    """One process's memory samples (kB), or the master's sums of its workers'."""

    before: int | None = None
    peak: int = 0
    live_at_peak: int = 0
    live: int = 0
    told: tuple[int, int] | None = None
    """What the master (or this runner) was last told."""
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Master: each worker's (kB added at its peak, sessions live then)."""

    def sample(self, rss: int | None) -> None:
        if rss is not None and self.before is not None and self.live and rss > self.peak:
            self.peak, self.live_at_peak = rss, self.live

    def figure(self) -> tuple[int, int] | None:
        """(kB added at the peak, sessions live then), summed over the workers."""
        if self.parts:
            return sum(a for a, _ in self.parts.values()), sum(n for _, n in self.parts.values())
        return self.own()

    def own(self) -> tuple[int, int] | None:
        """This process's (kB added at the peak, sessions live then)."""
        if self.before is None or not self.live_at_peak:
            return None
        return self.peak - self.before, self.live_at_peak


_MEMORY: weakref.WeakKeyDictionary[Environment, Memory] = weakref.WeakKeyDictionary()


def memory_of(environment: Environment) -> Memory:
    """The memory samples of ``environment`` (made at the first look)."""
    memory = _MEMORY.get(environment)
    if memory is None:
        memory = _MEMORY[environment] = Memory()
    return memory


def memory_figure(environment: Environment) -> float | None:
    """KB per live session: (RSS at the peak - RSS before the first session) / sessions
    live at the peak, summed over the workers; None when nothing was measured."""
    figure = memory_of(environment).figure()
    return None if figure is None or not figure[1] else figure[0] / figure[1]


def memory_line(environment: Environment) -> str:
    """The memory figure as one line of the run's summary."""
    figure = memory_of(environment).figure()
    if figure is None or not figure[1]:
        return "memory: not measured (no RSS sample with a session live)"
    added, live = figure
    return (
        f"memory: {added / live:.1f} KB per live session "
        f"({added:,} KB added over the RSS before the first session, {live:,} live at the peak)"
    )


CHILDREN: set[int] = set()
"""The pids of the zread processes this process runs now (process mode)."""


def rss_with_children() -> int | None:
    """This process's RSS in kB, with its :data:`CHILDREN`' (None: not readable)."""
    own = rss_kb()
    if own is None:
        return None
    return own + sum(rss_kb(pid) or 0 for pid in list(CHILDREN))
