"""docs/record.md's example runs as written: record the simulator itself, check the
cassette, replay it (in a fresh directory, with this interpreter as ``python``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "record.md"


def example() -> str:
    text = DOC.read_text()
    section = text[text.index("## Example: record the simulator itself") :]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the example's shell block"
    return match.group(1)


def test_the_example_records_checks_and_replays(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp_path)
    script = example() + '\necho "dir $PWD"\n'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, env=env, timeout=60, check=False
    )
    out = done.stdout.decode()
    assert "check: exit 0" in out and "replay: the same bytes" in out, (out, done.stderr)
    where = Path(out.split("dir ", 1)[1].strip())
    events = [json.loads(line) for line in (where / "events.jsonl").read_text().splitlines()]
    assert events[-1]["done"] is True and events[-1]["vm"]["state"] == "done"
    cassette = json.loads((where / "update.json").read_text())
    sent = [line["line"] for line in cassette["lines"] if line["dir"] == "in"]
    assert [json.loads(line)["type"] for line in sent] == ["download", "skip_restart"]
