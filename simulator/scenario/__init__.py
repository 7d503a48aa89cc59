"""Scenarios: the only source of behaviour variation.

Owns: the catalogue (:mod:`~simulator.scenario.catalogue`: built-in TOML files in
``builtin/``, loading and merging them), and what a scenario is made of: the world
(:mod:`~simulator.scenario.world`) and the wiki data drawn from it
(:mod:`~simulator.scenario.wiki`), delays (:mod:`~simulator.scenario.timing`),
domain failures (:mod:`~simulator.scenario.failures`) and transport faults
(:mod:`~simulator.scenario.faults`).

Must not: do I/O beyond reading a scenario file, nor import from ``runners``,
``hosts`` or ``tools``.
"""

from simulator.scenario.catalogue import (
    Scenario,
    ScenarioError,
    builtin_names,
    builtin_text,
    load_scenario,
)

__all__ = ["Scenario", "ScenarioError", "builtin_names", "builtin_text", "load_scenario"]
