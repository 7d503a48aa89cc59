"""The load test: ``python -m simulator load COMMAND ...``, many sessions, measured.

Runs N sessions of one command and scenario with C at a time (for a count, or for a
duration), in one of two modes, and ends with a summary:

- **in-process** (:mod:`simulator.tools.load.inprocess`): asyncio loops, each with one
  :class:`~simulator.runners.aio.Hub`, the reference client answering gates; lateness of
  every session's start against its schedule and of every timer event, the RSS the
  sessions added per live session, the cyclic collector's pauses. One loop per core by
  default, each in a worker process (:mod:`simulator.tools.load.workers`).
- **process** (:mod:`simulator.tools.load.processes`): N real ``zread`` processes over real
  pipes; every transcript checked, each process's peak RSS sampled, lateness when the
  children report it.

The summary (:mod:`simulator.tools.load.stats`; RSS read by
:mod:`simulator.tools.load.memory`) is printed as a table and written as JSON
(``--json``), with a time series per half second that ``--plot`` draws
(:mod:`simulator.tools.plot`); summaries of several hosts merge into one (``--merge``,
:mod:`simulator.tools.load.merge`); the command line is :mod:`simulator.tools.load.cli`,
its progress bar :mod:`simulator.tools.load.progress`, what they all share
:mod:`simulator.tools.load.common`.

This module owns only the package's public face: it re-exports, and must not define
anything. The load test as a whole must not change a session's behaviour: it drives
sessions as a client would; timers, bytes and faults are the runner's and the session's.
"""

from __future__ import annotations

from simulator.tools.load.cli import PROG, format_summary, main, parse_args, run
from simulator.tools.load.common import LoadConfig, LoadError
from simulator.tools.load.memory import RssSampler, rss_kb, status_kb
from simulator.tools.load.stats import MAX_MESSAGES, TICK, GcPauses, Histogram, Stats

__all__ = [
    "MAX_MESSAGES",
    "PROG",
    "TICK",
    "GcPauses",
    "Histogram",
    "LoadConfig",
    "LoadError",
    "RssSampler",
    "Stats",
    "format_summary",
    "main",
    "parse_args",
    "rss_kb",
    "run",
    "status_kb",
]
