"""What the tests of simulator.locust_user run: a plan, and a report that keeps its figures."""

from __future__ import annotations

from typing import Any

from simulator.locust_user.drive import Plan, Report
from simulator.tools.client import ReferenceClient

Figure = tuple[str, str, float, str]


def plan(answer: Any = None, **kw: Any) -> Plan:
    """A generate plan (flaky-pages, speed 0.02, 30 s), answered by the reference client
    unless ``answer`` is given; ``kw`` changes any field."""
    fields: dict[str, Any] = {"command": "generate", "args": (), "scenario": "flaky-pages"}
    fields.update(speed=0.02, timeout=30.0, answer=answer or ReferenceClient().answer)
    fields.update(kw)
    return Plan(**fields)


def report(figures: list[Figure], **kw: Any) -> Report:
    """A generate report whose figures are appended to ``figures``."""
    return Report("generate", lambda *figure: figures.append(figure), **kw)
