"""Tests for simulator.tools.load.cli: ``zread-sim load`` on Locust.

Bad arguments are checked by ``main`` in this process (it fails before starting
anything); every run is a real ``zread-sim load`` process running Locust in a child
process, its CSV statistics read back.
"""

from __future__ import annotations

import csv
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.tools.load import PROG, LoadRun, locust_argv, locustfile, main, parse_args

pytestmark = pytest.mark.timeout(60)

BAD = [
    ([], "command"),
    (["nope", "--sessions", "1"], "unknown command"),
    (["generate"], "--sessions"),
    (["generate", "--sessions", "0"], "integer from 1 to"),
    (["generate", "--sessions", "2", "--speed", "-1"], "number >= 0"),
    (["generate", "--sessions", "2", "--duration", "0"], "number > 0"),
    (["generate", "--sessions", "1", "--scenario", "no-such-scenario"], "no-such-scenario"),
    (["generate", "--sessions", "1", "--mode", "thread"], "thread"),
    (["generate", "--sessions", "1", "--", "--bogus"], "--bogus"),
    (["generate", "--worker"], "--master-host"),
    (["generate", "--sessions", "1", "--master-host", "h"], "--worker"),
    (["generate", "--sessions", "1", "--expect-workers", "2"], "--master"),
    (["generate", "--sessions", "1", "--master", "--processes", "2"], "--processes"),
    (["generate", "--sessions", "1", "--csv", "/no/such/dir/x"], "no such directory"),
]


@pytest.mark.parametrize(("argv", "says"), BAD)
def test_a_bad_argument_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{PROG}: ") and captured.err.count("\n") == 1
    assert says in captured.err and "Traceback" not in captured.err
    assert "locust" not in sys.modules


def test_the_options_map_to_locusts() -> None:
    run = parse_args(["generate", "--sessions", "10", "--ramp", "5", "--duration", "30", "-y"])
    argv = locust_argv(run, "f.py")
    assert argv[1:5] == ["-m", "locust", "-f", "f.py"]
    assert argv[5:] == ["--users", "10", "--spawn-rate", "2.0", "--headless", "--run-time", "30s"]
    worker = locust_argv(LoadRun("generate", worker=True, master_host="h", master_port=6000), "f")
    assert worker[5:] == ["--worker", "--master-host", "h", "--master-port", "6000"]
    text = locustfile(run)
    assert "args = ('-y',)" in text and "sessions_per_user = None" in text
    compile(text, "locustfile", "exec")


def _load(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "simulator", "load", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _sessions(prefix: Path) -> tuple[int, int]:
    with open(f"{prefix}_stats.csv", newline="") as f:
        for row in csv.DictReader(f):
            if (row["Type"], row["Name"]) == ("session", "generate"):
                return int(row["Request Count"]), int(row["Failure Count"])
    return 0, 0


def test_a_headless_run_completes_with_its_memory_figure(tmp_path: Path) -> None:
    prefix = tmp_path / "run"
    run = _load("generate", "--sessions", "3", "--speed", "0.02", "--csv", str(prefix), "-y")
    out, _ = run.communicate(timeout=50)
    assert run.returncode == 0, out
    assert _sessions(prefix) == (3, 0)
    assert "Response time percentiles" in out
    assert out.rstrip().splitlines()[-1].startswith("memory: ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_master_and_two_workers_merge_their_figures(tmp_path: Path) -> None:
    prefix, port = tmp_path / "master", str(_free_port())
    common = ["generate", "--speed", "0.02", "--master-port", port, "-y"]
    master = _load(
        *common, "--sessions", "4", "--master", "--expect-workers", "2", "--csv", str(prefix)
    )
    workers = [_load(*common, "--worker", "--master-host", "127.0.0.1") for _ in range(2)]
    out, _ = master.communicate(timeout=50)
    for worker in workers:
        worker.communicate(timeout=20)
    assert master.returncode == 0, out
    # The four sessions ran on the two workers; the master's CSV holds them all.
    assert _sessions(prefix) == (4, 0)
    assert all(worker.returncode == 0 for worker in workers)
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("memory: ") and "KB per live session" in last
