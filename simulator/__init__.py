"""zread-sim: a stand-in for zread's ``--stdio`` mode.

The public names are imported on first use, so ``python -m simulator version --stdio``
pays only for what that command needs. The error tree is here too: every error the
simulator raises on purpose is a :class:`SimulatorError`, in the branch that says
whose fault it is (``simulator.errors``).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing itself is not imported: the entry point starts here
if TYPE_CHECKING:
    from typing import Any

    from simulator.core.session import Session
    from simulator.errors import (
        ConfigurationError,
        MisuseError,
        ProtocolError,
        SimulatorBug,
        SimulatorError,
    )
    from simulator.scenario import Scenario, ScenarioError, load_scenario

__all__ = [
    "ConfigurationError",
    "MisuseError",
    "ProtocolError",
    "Scenario",
    "ScenarioError",
    "Session",
    "SimulatorBug",
    "SimulatorError",
    "load_scenario",
]

_HOMES = {
    "Scenario": "simulator.scenario",
    "ScenarioError": "simulator.scenario",
    "load_scenario": "simulator.scenario",
    "Session": "simulator.core.session",
    **dict.fromkeys(
        ("ConfigurationError", "MisuseError", "ProtocolError", "SimulatorBug", "SimulatorError"),
        "simulator.errors",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
