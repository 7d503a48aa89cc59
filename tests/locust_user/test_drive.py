"""simulator.locust_user.drive: a session's report, in full or by its envelope, and a
session as a real ``zread`` process over its pipes (on gevent's hub without Locust:
nothing is monkey-patched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.locust_user.drive import (
    PROCESS_TIMERS,
    Report,
    read_lateness,
    run_process,
    zread_argv,
)
from tests.locust_user.plans import Figure
from tests.locust_user.plans import plan as _plan
from tests.locust_user.plans import report as _report

pytestmark = pytest.mark.timeout(60)


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


def _lines(scenario: str = "default", seed: int = 0) -> list[bytes]:
    """The event lines of a whole ``generate -y`` run, as the process writes them."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "simulator", "generate", "--stdio", "-y", "--no-files"]
    argv += ["--speed", "0", "--scenario", scenario, "--seed", str(seed)]
    out = subprocess.run(argv, input=b"", capture_output=True, check=True, timeout=30).stdout
    return out.splitlines()


def test_a_report_by_envelope_hands_on_events_and_judges_them_as_in_full() -> None:
    lines = _lines()
    figures: list[Figure] = []
    full, envelope = _report(figures), Report("generate", lambda *f: None, in_full=False)
    for n, line in enumerate(lines):
        a, b = full.event(line, float(n)), envelope.event(line, float(n))
        assert a is not None and b is not None
        assert {k: b[k] for k in ("waiting_for", "done", "error")} == {
            k: a[k] for k in ("waiting_for", "done", "error")
        }
        assert dict(b) == dict(a)  # the vm, decoded when looked at
    full.session("generate")
    envelope.session("generate")
    assert full.checker.clean and envelope.checker.clean
    assert full.done_at == envelope.done_at == float(len(lines) - 1)


def test_a_report_by_envelope_finds_what_the_envelope_shows() -> None:
    lines = _lines()
    report = Report("generate", lambda *f: None, in_full=False)
    bad = lines[1].replace(b'"waiting_for":["quit","cancel"]', b'"waiting_for":["nope"]')
    assert bad != lines[1]
    report.event(lines[0], 0.0)
    report.event(bad, 0.1)
    report.event(lines[-1], 0.2)
    report.event(lines[-1], 0.3)  # after done
    messages = [d.message for d in report.checker.deviations]
    assert any('waiting_for ["nope"]' in m for m in messages)
    assert any("after its done:true" in m for m in messages)


def test_a_line_not_laid_out_as_an_envelope_is_judged_in_full() -> None:
    report = Report("generate", lambda *f: None, in_full=False)
    assert report.event(b'{"waiting_for":[],"vm":{},"done":true,"error":""}', 0.0) is not None
    assert report.event(b"not json", 0.1) is None
    assert report.problem.startswith("not an event")
    assert any("keys" in d.message for d in report.checker.deviations)
