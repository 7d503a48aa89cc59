"""``--scenario replay:CASSETTE`` over real processes and pipes: the simulator recorded
by ``zread-sim record``, then the cassette played back to the same client."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.e2e.test_record_e2e import QUIT, SIM, Step, always, drive

NO_KEY = (
    'description = "no API key: nothing for the recorder to redact"\n\n'
    '[world.config]\nllm_api_key = ""\n'
)

STEPS: list[Step] = [
    (always, {"type": "update_fields", "params": {"fields": {"language": "zh"}}}),
    (always, {"type": "reload_llm"}),
    (always, {"type": "update_fields", "params": {"fields": {"max_retries": "99"}}}),  # rejected
    (always, QUIT),
]


def _record(tmp_path: Path, steps: list[Step]) -> tuple[Path, bytes]:
    scenario = tmp_path / "nokey.toml"
    scenario.write_text(NO_KEY)
    cassette = tmp_path / "config.json"
    program = [*SIM, "config", "--stdio", "--no-files", "--scenario", str(scenario)]
    out, _, code = drive([*SIM, "record", "--out", str(cassette), "--", *program], steps)
    assert code == 0
    return cassette, out


def _replay(cassette: Path) -> list[str]:
    return [*SIM, "config", "--stdio", "--scenario", f"replay:{cassette}", "--speed", "0"]


def test_the_replay_writes_what_the_recording_wrote_byte_for_byte(tmp_path: Path) -> None:
    cassette, recorded = _record(tmp_path, STEPS)
    out, err, code = drive(_replay(cassette), STEPS)
    assert out == recorded
    assert code == 0
    assert err == b""


def test_a_diverging_command_is_answered_with_the_divergence(tmp_path: Path) -> None:
    cassette, recorded = _record(tmp_path, STEPS)
    first = recorded.splitlines(keepends=True)[0]
    steps: list[Step] = [(always, {"type": "save"}), *STEPS]
    out, err, code = drive(_replay(cassette), steps)
    lines = out.splitlines(keepends=True)
    assert lines[0] == first
    diverged = json.loads(lines[1])
    expected = json.dumps(STEPS[0][1])
    assert diverged["error"] == f"replay diverged: expected {expected}"
    assert diverged["vm"] == json.loads(first)["vm"]
    assert diverged["waiting_for"] == json.loads(first)["waiting_for"]
    assert diverged["done"] is False
    assert b"".join([lines[0], *lines[2:]]) == recorded  # then it went on as recorded
    assert code == 0
    assert err.decode() == (
        f"zread-sim: replay diverged at line 1: the cassette expected {expected}, "
        'the client sent {"type": "save"}\n'
    )


def test_a_missing_cassette_or_control_is_exit_2(tmp_path: Path) -> None:
    missing = subprocess.run(
        _replay(tmp_path / "nope.json"), stdin=subprocess.DEVNULL, capture_output=True, timeout=30
    )
    assert missing.returncode == 2 and missing.stdout == b""
    assert missing.stderr.decode().startswith("zread-sim: replay: ")
    assert "nope.json: cannot read" in missing.stderr.decode()
    control = subprocess.run(
        [*_replay(tmp_path / "nope.json"), "--control", "stdio"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    assert control.returncode == 2
    refused = b"zread-sim: --control cannot be used with --scenario replay:CASSETTE\n"
    assert control.stderr == refused


def test_the_recorded_exit_code_is_the_replays(tmp_path: Path) -> None:
    line = '{"vm":{},"waiting_for":[],"done":true,"error":""}'
    doc = {
        "format": "zread-sim-cassette",
        "version": 1,
        "exit_code": 3,
        "lines": [{"t": 0.01, "dir": "out", "n": 1, "line": line}],
    }
    cassette = tmp_path / "crash.json"
    cassette.write_text(json.dumps(doc))
    run = subprocess.run(
        _replay(cassette), stdin=subprocess.DEVNULL, capture_output=True, timeout=30
    )
    assert (run.returncode, run.stdout) == (3, line.encode() + b"\n")
