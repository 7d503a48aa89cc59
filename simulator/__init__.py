"""zread-sim: a stand-in for zread's ``--stdio`` mode.

The public names are imported on first use, so ``python -m simulator version --stdio``
pays only for what that command needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.core.session import Session
    from simulator.scenario import Scenario, ScenarioError, load_scenario

__all__ = ["Scenario", "ScenarioError", "Session", "load_scenario"]

_HOMES = {
    "Scenario": "simulator.scenario",
    "ScenarioError": "simulator.scenario",
    "load_scenario": "simulator.scenario",
    "Session": "simulator.core.session",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'simulator' has no attribute {name!r}")
