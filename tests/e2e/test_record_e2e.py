"""``zread-sim record`` and ``check`` over real processes, pipes and files.

A client here is this test: it reads one event at a time from the recorder's stdout
(a selector and a deadline, so a missing event fails instead of hanging) and answers
on its stdin, as a real client does; the program behind the recorder is the simulator
itself, or a fake zread written into tmp_path.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.core.secrets import redact_line

RECORD = [sys.executable, "-m", "simulator.tools.record"]
SIM = [sys.executable, "-m", "simulator"]
QUIT = {"type": "quit"}

Step = tuple[Callable[[dict[str, Any]], bool], dict[str, Any]]


def drive(
    argv: Sequence[str], steps: Sequence[Step], env: Mapping[str, str] | None = None
) -> tuple[bytes, bytes, int]:
    """Run ``argv``; for each step read events until its predicate holds, then send its
    command; then read to the end. The stdout bytes, the stderr bytes, the exit code."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    err = bytearray()
    drain = threading.Thread(target=lambda: err.extend(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    drain.start()
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    out, pending = bytearray(), bytearray()
    deadline = time.monotonic() + 15

    def read_line() -> bytes:
        while b"\n" not in pending:
            assert selector.select(max(0.0, deadline - time.monotonic())), "no event in time"
            data = os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            assert data, "end of output before the next event"
            out.extend(data)
            pending.extend(data)
        end = pending.index(b"\n") + 1
        raw = bytes(pending[:end])
        del pending[:end]
        return raw

    try:
        for predicate, command in steps:
            while not predicate(json.loads(read_line())):
                pass
            proc.stdin.write(json.dumps(command).encode() + b"\n")
            proc.stdin.flush()
        while data := proc.stdout.read():
            out.extend(data)
        code = proc.wait(timeout=10)
        drain.join(5)
        return bytes(out), bytes(err), code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def always(_: dict[str, Any]) -> bool:
    return True


def state(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["vm"].get("state") == name


CONFIG_STEPS: list[Step] = [
    (always, {"type": "update_fields", "params": {"fields": {"language": "zh"}}}),
    (always, {"type": "reload_llm"}),
    (always, {"type": "update_fields", "params": {"fields": {"max_retries": "99"}}}),  # rejected
    (always, QUIT),
]


def test_the_client_sees_the_same_bytes_and_the_cassette_holds_every_line(tmp_path: Path) -> None:
    program = [*SIM, "config", "--stdio", "--no-files"]
    direct_out, _, direct_code = drive(program, CONFIG_STEPS)
    cassette_path = tmp_path / "config.json"
    out, err, code = drive(
        [*RECORD, "record", "--out", str(cassette_path), "--", *program], CONFIG_STEPS
    )
    assert out == direct_out
    assert code == direct_code == 0

    cassette = json.loads(cassette_path.read_text())
    assert cassette["format"] == "zread-sim-cassette"
    assert cassette["version"] == 1
    assert cassette["argv"] == program
    assert cassette["command"] == "config"
    assert cassette["cwd"] == os.getcwd()
    assert cassette["exit_code"] == 0
    assert "HOME" in cassette["env"] and "PATH" in cassette["env"]
    assert cassette["started"].endswith("Z")
    lines = cassette["lines"]
    events = [e for e in lines if e["dir"] == "out"]
    commands = [e for e in lines if e["dir"] == "in"]
    # Every event, as written (the config's API key redacted: the cassette's only change).
    assert [e["line"].encode() for e in events] == [redact_line(raw) for raw in out.splitlines()]
    assert b"sk-sim-" in out and "sk-sim-" not in cassette_path.read_text()
    assert [json.loads(e["line"]) for e in commands] == [command for _, command in CONFIG_STEPS]
    assert [e["n"] for e in events] == list(range(1, len(events) + 1))
    times = [e["t"] for e in lines]
    assert times == sorted(times) and 0 < times[0] < times[-1] <= cassette["duration"]
    # Each command follows the event it answers.
    assert [e["dir"] for e in lines] == ["out", "in"] * 4 + ["out"]

    # The live check's report is on stderr, and check agrees.
    assert err.decode().endswith(
        "5 events, 4 commands, 0 stderr lines; checked against the config chart: clean\n"
    )
    checked = subprocess.run(
        [*RECORD, "check", str(cassette_path)], capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.endswith(b"clean\n")


FAKE = r"""
import json, sys
vm = {"fields": [], "dirty": False, "saved": False, "error": "", "colour": "red"}
def emit(waiting_for, done):
    event = {"vm": vm, "waiting_for": waiting_for, "done": done, "error": ""}
    print(json.dumps(event, separators=(",", ":")), flush=True)
emit(["save", "quit"], False)
sys.stdin.readline()
del vm["colour"]
emit([], True)
print("zread: bye", file=sys.stderr, flush=True)
sys.exit(3)
"""


def test_a_deviating_zread_is_reported_with_its_line(tmp_path: Path) -> None:
    fake = tmp_path / "fake_zread.py"
    fake.write_text(FAKE)
    cassette_path = tmp_path / "fake.json"
    argv = [
        *RECORD,
        "record",
        "--out",
        str(cassette_path),
        "--",
        sys.executable,
        str(fake),
        "config",
        "--stdio",
    ]
    out, err, code = drive(argv, [(always, {"type": "reload_llm"})])
    assert code == 3  # the program's
    assert out.count(b"\n") == 2
    report = err.decode()
    assert report.startswith("zread: bye\n")  # the program's stderr passed through first
    first_line = out.splitlines()[0].decode()
    assert (
        "stdout line 1 (t=" in report
        and 'zread did show the vm field "colour" where the chart expects only the fields of '
        "ConfigVM (fields, dirty, saved, error)"
        in report
        and 'zread did offer waiting_for ["save","quit"] where the chart expects '
        '["update_fields","save","reload_llm","quit"]: '
        + first_line
        in report
    ), report
    assert (
        "stdin line 1 (t=" in report
        and 'the client sent "reload_llm" where zread waits for one of "save", "quit"' in report
    )
    assert report.endswith("3 deviations\n")
    cassette = json.loads(cassette_path.read_text())
    assert cassette["exit_code"] == 3
    assert [e["line"] for e in cassette["lines"] if e["dir"] == "err"] == ["zread: bye"]
    checked = subprocess.run(
        [*RECORD, "check", str(cassette_path)], capture_output=True, check=False
    )
    assert checked.returncode == 1
    assert b'the vm field "colour"' in checked.stdout


def test_no_secret_and_no_environment_value_is_written(tmp_path: Path) -> None:
    cassette_path = tmp_path / "login.json"
    env = {**os.environ, "ZREAD_TEST_SECRET_VALUE": "env-value-4f1c9e"}
    key = "sk-live-7d2b91aa"
    steps: list[Step] = [
        (state("select_region"), {"type": "select_region", "params": {"region": "cn"}}),
        (state("select_model"), {"type": "select_model", "params": {"model": "glm-4.6"}}),
    ]
    program = [*SIM, "login", "--stdio", "--no-files", "--speed", "0"]
    argv = [
        *RECORD,
        "record",
        "--out",
        str(cassette_path),
        "--redact",
        "cn-region-[a-z]+",
        "--",
        *program,
    ]
    out, err, code = drive(argv, steps, env=env)
    assert code == 0
    url = next(
        json.loads(raw)["vm"]["authorize_url"]
        for raw in out.splitlines()
        if b"authorize_url" in raw
    )
    token = url.split("state=")[1].split("&")[0]
    assert len(token) >= 8

    config = tmp_path / "config.json"
    config_steps: list[Step] = [
        (always, {"type": "update_fields", "params": {"fields": {"llm_api_key": key}}}),
        (
            always,
            {"type": "update_fields", "params": {"fields": {"llm_model": "cn-region-secret"}}},
        ),
        (always, QUIT),
    ]
    argv = [
        *RECORD,
        "record",
        "--out",
        str(config),
        "--redact",
        "cn-region-[a-z]+",
        "--",
        *SIM,
        "config",
        "--stdio",
        "--no-files",
    ]
    config_out, config_err, _ = drive(argv, config_steps, env=env)
    assert key.encode() in config_out  # the client sees zread's bytes unchanged

    written = cassette_path.read_bytes() + config.read_bytes()
    for secret in (token, key, "env-value-4f1c9e", "cn-region-secret"):
        assert secret.encode() not in written, secret
        assert secret.encode() not in err + config_err, secret
    assert b"state=***" in cassette_path.read_bytes()
    assert "ZREAD_TEST_SECRET_VALUE" in json.loads(config.read_text())["env"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "login.json"]
    assert b"clean" in err and b"clean" in config_err


def test_files_the_run_changes_are_listed_with_their_sha256(tmp_path: Path) -> None:
    cassette_path = tmp_path / "save.json"
    steps: list[Step] = [
        (always, {"type": "update_fields", "params": {"fields": {"language": "zh"}}}),
        (always, {"type": "save"}),
    ]
    _, err, code = drive(
        [*RECORD, "record", "--out", str(cassette_path), "--", *SIM, "config", "--stdio"], steps
    )
    assert code == 0, err
    files = json.loads(cassette_path.read_text())["files"]
    assert files, "saving the config writes zread's config under HOME"
    import hashlib

    for entry in files:
        root = Path(os.environ["HOME"]) if entry["root"] == "home" else Path.cwd()
        assert entry["path"].startswith(".zread/")
        assert entry["change"] in ("created", "changed")
        assert entry["sha256"] == hashlib.sha256((root / entry["path"]).read_bytes()).hexdigest()


def test_the_dropin_records_the_real_binary(tmp_path: Path) -> None:
    cassette_path = tmp_path / "dropin.json"
    real = tmp_path / "zread"
    real.write_text(f'#!/bin/sh\nexec {sys.executable} -m simulator "$@"\n')
    real.chmod(0o755)
    env = {**os.environ, "ZREAD_SIM_RECORD": str(cassette_path), "ZREAD_SIM_REAL": str(real)}
    code = (
        "import os, sys; from simulator.tools.record import record_as_dropin; "
        "sys.exit(record_as_dropin(sys.argv[1:], os.environ))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "version", "--stdio"],
        env=env,
        capture_output=True,
        timeout=20,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert b'"done":true' in proc.stdout
    cassette = json.loads(cassette_path.read_text())
    assert cassette["argv"] == [str(real), "version", "--stdio"]
    assert "ZREAD_SIM_RECORD" not in cassette["env"] and "ZREAD_SIM_REAL" not in cassette["env"]
    assert proc.stderr.endswith(b"checked against the version chart: clean\n")
