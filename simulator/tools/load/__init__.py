"""The load test: ``zread-sim load COMMAND ...``, many sessions on Locust, measured.

Locust runs the load: its users (:class:`simulator.locust.ZreadUser`, each running its
zread sessions one after another, in-process up to ten side by side), its runners (one
process, ``--processes`` on this machine, a master and workers on several), its
statistics, CSV and HTML reports and web UI. What is left here is what Locust does not
do: the command line that builds a user class from its options and runs Locust on it
(:mod:`simulator.tools.load.cli`), and reading a process's resident set
(:mod:`simulator.tools.load.memory`), from which the memory per live session is figured.

This module owns only the package's public face: it re-exports, and must not define
anything. It must not import Locust (the command line runs it in a child process).
"""

from __future__ import annotations

from simulator.tools.load.cli import (
    PROG,
    LoadRun,
    locust_argv,
    locustfile,
    main,
    parse_args,
    side_by_side,
)
from simulator.tools.load.common import LoadError
from simulator.tools.load.memory import rss_kb, status_kb

__all__ = [
    "PROG",
    "LoadError",
    "LoadRun",
    "locust_argv",
    "locustfile",
    "main",
    "parse_args",
    "rss_kb",
    "side_by_side",
    "status_kb",
]
