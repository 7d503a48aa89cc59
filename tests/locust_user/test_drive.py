"""simulator.locust_user.drive: one session on gevent, its figures, its verdict.

Runs here on gevent's hub without Locust (nothing is monkey-patched): real sessions in
this process, and real ``zread`` processes over their pipes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simulator.locust_user.drive import (
    PROCESS_TIMERS,
    Plan,
    Prepared,
    Report,
    read_lateness,
    run_inprocess,
    run_process,
    zread_argv,
)
from simulator.tools.client import ReferenceClient

pytestmark = pytest.mark.timeout(60)

Figure = tuple[str, str, float, str]


def _plan(answer: Any = None, **kw: Any) -> Plan:
    client = ReferenceClient()
    fields: dict[str, Any] = {"command": "generate", "args": (), "scenario": "flaky-pages"}
    fields.update(speed=0.02, timeout=30.0, answer=answer or client.answer)
    fields.update(kw)
    return Plan(**fields)


def _report(figures: list[Figure]) -> Report:
    return Report("generate", lambda *figure: figures.append(figure))


def test_an_in_process_session_reports_each_timer_command_and_itself() -> None:
    figures: list[Figure] = []
    plan = _plan()
    report = _report(figures)
    run_inprocess(plan, Prepared.of("generate", (), "flaky-pages"), 3, report)
    report.session("generate")
    kinds = {(kind, name) for kind, name, _, _ in figures}
    assert ("lateness", "_page_done") in kinds and ("command", "select_action") in kinds
    assert figures[-1][:2] == ("session", "generate") and figures[-1][3] == ""
    assert all(ms >= 0 for _, _, ms, _ in figures)


def test_a_bad_command_fails_the_session_and_its_command() -> None:
    figures: list[Figure] = []
    sent: list[bytes] = []

    def careless(event: dict[str, Any]) -> bytes | None:
        if not sent and not event["done"]:
            sent.append(b'{"type":"bogus"}\n')
            return sent[0]
        return None if event["waiting_for"] != ["quit"] else b'{"type":"quit"}\n'

    plan = _plan(careless, args=("-y",), scenario="default")
    report = _report(figures)
    run_inprocess(plan, Prepared.of("generate", ("-y",), "default"), 0, report)
    report.session("generate")
    command = next(f for f in figures if f[0] == "command")
    assert command[1] == "bogus" and "not allowed" in command[3]
    assert figures[-1][0] == "session" and "client mistake" in figures[-1][3]


def test_a_process_session_is_answered_over_its_pipes() -> None:
    figures: list[Figure] = []
    report = _report(figures)
    plan = _plan()
    run_process(plan, 3, report)
    report.session("generate")
    assert figures[-1][:2] == ("session", "generate") and figures[-1][3] == ""
    assert any(f[:2] == ("lateness", PROCESS_TIMERS) for f in figures)
    assert any(f[:2] == ("command", "select_action") for f in figures)
    assert not plan.children


def test_the_argv_and_the_lateness_file(tmp_path: Path) -> None:
    argv = zread_argv(_plan(), 7)
    tail = ["generate", "--stdio", "--scenario", "flaky-pages", "--seed", "7", "--speed", "0.02"]
    assert argv[-len(tail) :] == tail
    path = tmp_path / "late.json"
    path.write_text(json.dumps({"lateness_s": [0.5, "x", 1]}))
    assert read_lateness(str(path)) == [0.5, 1.0]
    assert read_lateness(str(tmp_path / "none")) == []
