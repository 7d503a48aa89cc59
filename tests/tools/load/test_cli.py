"""Tests for simulator.tools.load.cli: ``zread-sim load`` on Locust.

Bad arguments are checked by ``main`` in this process (it fails before starting
anything); every run is a real ``zread-sim load`` process running Locust in a child
process, its CSV statistics read back.
"""

from __future__ import annotations

import csv
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from simulator.tools.load import (
    PROG,
    LoadRun,
    locust_argv,
    locustfile,
    main,
    parse_args,
    side_by_side,
)

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")

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
    (["generate", "--sessions", "1", "--html", "/"], "is a directory"),
    (["generate", "--worker", "--master-host", "h", "--master-port", "70000"], "1 to 65,535"),
    (["generate", "--sessions", "1", "--master", "--master-port", "0"], "1 to 65,535"),
    (["generate", "--sessions", "1", "--master-port", "6000"], "--master or --worker"),
    (["generate", "--sessions", "1", "--processes", "2", "--master-port", "6000"], "--master"),
    (["generate", "--sessions", "1", "--ramp", "1e-320"], "--ramp"),
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
    # 10 sessions: 10 users of one (a small run keeps a user a session), over the ramp.
    assert argv[5:] == ["--users", "10", "--spawn-rate", "2.0", "--zread-side-by-side", "1"] + [
        "--headless",
        "--run-time",
        "30s",
    ]
    worker = locust_argv(LoadRun("generate", worker=True, master_host="h", master_port=6000), "f")
    assert worker[5:] == ["--worker", "--master-host", "h", "--master-port", "6000"]
    text = locustfile(run)
    # The master's options decide how many sessions a user runs, not the locustfile.
    assert "args = ('-y',)" in text and "sessions_per_user" not in text
    compile(text, "locustfile", "exec")
    once = locust_argv(parse_args(["generate", "--sessions", "2"]), "f")
    assert once[-2:] == ["--zread-sessions-per-user", "1"]  # each user's one, once


@pytest.mark.parametrize(
    ("sessions", "extra", "users", "each"),
    [
        (10_000, [], 1000, 10),
        (10_000, ["--processes", "2"], 1000, 10),
        (200, [], 100, 2),  # at least 100 users
        (210, [], 105, 2),
        (1001, [], 143, 7),
        (997, [], 997, 1),  # a prime: a user a session
        (21, [], 21, 1),  # fewer than 100: a user a session
        (2000, ["--processes", "400"], 400, 5),  # a user for every process
        (10, ["--mode", "process"], 10, 1),
    ],
)
def test_sessions_are_run_by_users_of_up_to_ten_side_by_side(
    sessions: int, extra: list[str], users: int, each: int
) -> None:
    run = parse_args(["generate", "--sessions", str(sessions), "--ramp", "2", *extra])
    assert side_by_side(run) == each
    argv = locust_argv(run, "f")
    assert _after(argv, "--users") == str(users)
    assert _after(argv, "--zread-side-by-side") == str(each)
    assert float(_after(argv, "--spawn-rate")) == users / 2
    assert users * each == sessions


def _after(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def test_the_web_ui_and_a_local_master_listen_on_loopback_only() -> None:
    web = locust_argv(parse_args(["generate", "--sessions", "2", "--web"]), "f")
    assert _after(web, "--web-host") == "127.0.0.1"
    local = locust_argv(parse_args(["generate", "--sessions", "2", "--processes", "2"]), "f")
    assert _after(local, "--master-bind-host") == "127.0.0.1"
    # A master's workers are on other machines: Locust's own default, all interfaces.
    master = locust_argv(parse_args(["generate", "--sessions", "2", "--master"]), "f")
    assert "--master-bind-host" not in master and "--web-host" not in master


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
    # The workers' --duration is not theirs to give: the master's one session per user
    # holds, and the run ends with the fourth session.
    worker = ["--worker", "--master-host", "127.0.0.1", "--duration", "300"]
    workers = [_load(*common, *worker) for _ in range(2)]
    out, _ = master.communicate(timeout=50)
    for worker in workers:
        worker.communicate(timeout=20)
    assert master.returncode == 0, out
    # The four sessions ran on the two workers; the master's CSV holds them all.
    assert _sessions(prefix) == (4, 0)
    assert all(worker.returncode == 0 for worker in workers)
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("memory: ") and "KB per live session" in last


def test_a_masters_duration_holds_for_workers_started_without_one(tmp_path: Path) -> None:
    prefix, port = tmp_path / "master", str(_free_port())
    common = ["generate", "--speed", "0.02", "--master-port", port, "-y"]
    options = ["--sessions", "2", "--master", "--expect-workers", "2", "--duration", "2"]
    master = _load(*common, *options, "--csv", str(prefix))
    started = time.monotonic()
    workers = [_load(*common, "--worker", "--master-host", "127.0.0.1") for _ in range(2)]
    out, _ = master.communicate(timeout=50)
    for worker in workers:
        worker.communicate(timeout=20)
    assert master.returncode == 0, out
    # Each user ran one session after another for the master's 2 s, not one and done.
    assert time.monotonic() - started >= 2
    sessions, failed = _sessions(prefix)
    assert sessions > 2 and failed == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_ends_locust_and_removes_the_run_folder(tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("ZREAD_SIM_SERVER", None)  # this process's child is the command itself
    run = subprocess.Popen(
        [sys.executable, "-m", "simulator", "load", "generate", "--sessions", "1", "-y"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    folder = _wait_for(lambda: next(tmp_path.glob("zread-load-*"), None))
    locust_pid = _wait_for(lambda: _child_of(run.pid))
    time.sleep(1)  # Locust is up and its session runs (speed 1: longer than the test)
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=20)
    assert run.returncode == 128 + signal.SIGTERM
    assert not folder.exists()
    assert not Path(f"/proc/{locust_pid}").exists()  # ended, and reaped by the command


def _wait_for(find: Callable[[], T | None], seconds: float = 20) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = find()
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError("not found in time")


def _child_of(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None
