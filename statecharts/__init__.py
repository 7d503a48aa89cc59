"""The six zread drivers, each declared in a module of its own.

Owns: :data:`COMMANDS`, the one list of commands (name -> module), and the loading of
their modules and compiled charts. Everything else discovers commands here: adding a
command is adding its module and one line to :data:`COMMANDS`.

A command's module says everything WHAT is true of it (``simulator.core.chart`` says
HOW it runs):

- ``CHART``: states, gates, transitions, timers with their default timing, failure
  points, vm fields, the flags type, whether it uses the project (``core/chart.py``
  documents the keys), and the model class whose methods the chart names;
- ``SUMMARY``, the line ``zread --help`` lists it with, and ``HELP``, what
  ``zread <command> --help`` says before the usage;
- ``ABOUT``: how its chart runs, in a sentence (``zread-sim charts``);
- ``EXAMPLES``: the flags and extra scenarios ``zread-sim paths`` tries
  (:class:`~simulator.core.command.Examples`);
- ``answer``: the command a sensible client sends at its gates (the reference client).

Modules are imported on first use, so a command pays only for its own.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import types

    from simulator.core.chart_specs import Chart

__all__ = ["COMMANDS", "command_module", "failure_points", "load_chart"]

COMMANDS: dict[str, str] = {
    "browse": "statecharts.browse",
    "generate": "statecharts.generate",
    "config": "statecharts.config",
    "login": "statecharts.login",
    "update": "statecharts.update",
    "version": "statecharts.version",
}
"""Every zread command the simulator stands in for, and the module that declares it."""


def command_module(command: str) -> types.ModuleType:
    """The module that declares ``command``; KeyError for a command not in the list."""
    return importlib.import_module(COMMANDS[command])


def load_chart(command: str) -> Chart:
    """The compiled chart of ``command``, shared by every session in this process."""
    return _compiled(COMMANDS[command])


def failure_points() -> dict[str, str]:
    """Every failure point a scenario may name, with the command that declares it."""
    return {
        point: command
        for command in COMMANDS
        for point in command_module(command).CHART.get("failures", ())
    }


@functools.cache
def _compiled(module: str) -> Chart:
    from simulator.core.chart import compile_chart

    return compile_chart(importlib.import_module(module))
