"""The six zread drivers, each declared as a chart in a module of its own.

Owns: the list of commands and the loading of their compiled charts. A module here
says WHAT its command does (states, gates, transitions, timers, vm fields) as data plus
a small model class whose methods the data names; ``simulator.core.chart`` says HOW it runs.

Charts are imported on first use, so a command pays only for its own.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.core.chart import Chart

__all__ = ["COMMANDS", "load_chart"]

COMMANDS: dict[str, str] = {
    "browse": "serve the generated wiki on a local URL",
    "generate": "generate the wiki of the current repository",
    "config": "edit zread's configuration",
    "login": "log in and choose a model",
    "update": "update zread to the latest release",
    "version": "print the version",
}
"""Every zread command the simulator stands in for, with what it does."""


@functools.cache
def load_chart(command: str) -> Chart:
    """The compiled chart of ``command``, shared by every session in this process."""
    if command not in COMMANDS:
        raise KeyError(command)
    from simulator.core.chart import compile_chart

    return compile_chart(importlib.import_module(f"statecharts.{command}"))
