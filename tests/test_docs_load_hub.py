"""docs/load.md, "A hub's load test": its blocks run as the recipe says, against a tiny
HTTP hub started here, and the figures they print are the hub's.

The hub (http.server on 127.0.0.1) runs the installed ``zread generate --stdio -y`` of
its machines in turn, one per request, and answers when it is over: 200 when the
session ended done, 502 when it ended in its error state or died. Locust runs in a
process of its own (this process never imports it), then ``zread-sim coverage`` and
``zread-sim journal --summary`` read the machines' journals.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import subprocess
import sysconfig
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.docblocks import ROOT, Block, parse

DOC = ROOT / "docs" / "load.md"
HEADING = "## A hub's load test"
BIN = Path(sysconfig.get_path("scripts"))
MACHINES = ("machine-a", "machine-b")


def section_blocks() -> list[Block]:
    """The fenced blocks of the section, in order."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADING) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [block for block in parse(DOC) if start < block.line <= end]


class Hub(ThreadingHTTPServer):
    """A user's hub: ``POST /generate`` runs zread on the next machine, to its end."""

    daemon_threads = False  # server_close() waits for the sessions under way
    block_on_close = True

    def __init__(self, work: Path) -> None:
        super().__init__(("127.0.0.1", 0), HubHandler)
        self.work = work
        self.lock = threading.Lock()
        self.turn = 0
        self.ran: Counter[str] = Counter()
        """Sessions run per machine."""
        self.answers: Counter[int] = Counter()

    def next_machine(self) -> str:
        with self.lock:
            machine = MACHINES[self.turn % len(MACHINES)]
            self.turn += 1
            self.ran[machine] += 1
        return machine


class HubHandler(BaseHTTPRequestHandler):
    server: Hub

    def do_POST(self) -> None:
        machine = self.server.next_machine()
        zread = self.server.work / machine / "bin" / "zread"
        result = subprocess.run(
            [str(zread), "generate", "--stdio", "-y"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=self.server.work,
            timeout=30,
            check=False,
        )
        events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith(b"{")]
        done = events and events[-1]["done"] and events[-1]["vm"]["state"] == "done"
        status = 200 if done else 502
        with self.server.lock:
            self.server.answers[status] += 1
        body = f"{machine}: {'done' if done else 'failed'}\n".encode()
        with contextlib.suppress(OSError):  # Locust stopped and went away before the answer
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def bash(script: str, work: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for block in section_blocks():
        if block.file is not None:
            (tmp_path / block.file).write_text(block.text, encoding="utf-8")
    return tmp_path


def test_the_section_has_the_recipe_s_blocks() -> None:
    blocks = section_blocks()
    assert [(b.info, b.file) for b in blocks] == [
        ("toml", "hub.toml"),
        ("sh", None),
        ("python", "hubload.py"),
        ("sh", None),
        ("console", None),
    ]
    for block in blocks[1:]:
        assert block.not_run and "tests/test_docs_load_hub.py" in block.not_run
    assert "HttpUser" in blocks[2].text and "import locust" not in blocks[2].text.replace(
        "from locust import", ""
    )


def run_locust_against_a_hub(work: Path, command: str) -> Hub:
    """Start the hub, run Locust's block against it, and stop the hub once every
    session under way has run to its end."""
    hub = Hub(work)
    serving = threading.Thread(target=hub.serve_forever, daemon=True)
    serving.start()
    try:
        aimed = command.replace("127.0.0.1:8000", f"127.0.0.1:{hub.server_port}")
        assert aimed != command
        locust = bash(aimed, work, timeout=90)
    finally:
        hub.shutdown()
        hub.server_close()
    assert locust.returncode in (0, 1), locust.stderr[-3000:]  # 1: Locust saw failures
    assert "Traceback" not in locust.stderr
    return hub


def check_locust_saw_the_hub(work: Path, hub: Hub) -> None:
    """Locust's CSV counts no more requests than the hub ran sessions, and no more
    failures than the hub answered 502."""
    with open(work / "hub_stats.csv", newline="") as file:
        (row,) = [r for r in csv.DictReader(file) if r["Name"] == "generate"]
    requests, failures = int(row["Request Count"]), int(row["Failure Count"])
    assert 1 <= requests <= sum(hub.ran.values())
    assert failures <= hub.answers[502]
    assert requests - failures <= hub.answers[200]


def check_the_summary(out: str, hub: Hub) -> None:
    """machine-a's seed ends every session done, machine-b's in the error state."""
    sessions = sum(hub.ran.values())
    done, failed = hub.ran["machine-a"], hub.ran["machine-b"]
    assert out.startswith(f"{sessions} sessions in 2 journals\n"), out
    row = f"  generate  {sessions:>8}  {done:>7}  {failed:>7}        0        0\n"
    assert row in out, out
    assert f"ended: done {sessions}\n" in out
    assert f"exit codes: 0 {sessions}\n" in out
    lateness = re.search(r"^timer lateness: p50 [\d.]+ ms, .* \(of (\d+)\)$", out, re.MULTILINE)
    assert lateness is not None, out
    assert int(lateness[1]) >= done * 10  # each done session fires a dozen timers or more
    assert out.endswith("client mistakes: none\n")


def test_a_hub_s_load_test_as_the_doc_says(work: Path) -> None:
    _, install, _, run_locust, reports = section_blocks()
    installed = bash(install.text, work)
    assert installed.returncode == 0, installed.stderr
    assert all((work / machine / "bin" / "zread").is_file() for machine in MACHINES)

    hub = run_locust_against_a_hub(work, run_locust.text)
    assert hub.ran["machine-a"] >= 1 and hub.ran["machine-b"] >= 1
    check_locust_saw_the_hub(work, hub)

    commands = [line[2:] for line in reports.text.splitlines() if line.startswith("$ ")]
    assert len(commands) == 2
    coverage, summary = (bash(command, work) for command in commands)
    assert coverage.returncode == 0, coverage.stderr
    assert f"zread coverage: {sum(hub.ran.values())} sessions;" in coverage.stdout
    assert re.search(r"^generate +\d+ ", coverage.stdout, re.MULTILINE), coverage.stdout
    assert summary.returncode == 0, summary.stdout + summary.stderr
    check_the_summary(summary.stdout, hub)
