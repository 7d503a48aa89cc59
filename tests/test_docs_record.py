"""docs/record.md's example runs as written: record the simulator itself, then check
the cassette (in a fresh directory, with this interpreter as ``python``)."""

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


def test_the_example_records_and_checks_clean(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp_path)
    script = example() + '\necho "dir $PWD"\n'
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, env=env, timeout=60, check=False
    )
    out = done.stdout.decode()
    assert "exit 0" in out, (out, done.stderr.decode())
    where = Path(out.split("dir ", 1)[1].strip())
    events = [json.loads(line) for line in (where / "events.jsonl").read_text().splitlines()]
    assert events[-1]["done"] is True
    assert [f["value"] for f in events[1]["vm"]["fields"][:1]] == ["zh"]
    cassette = json.loads((where / "config.json").read_text())
    assert [line["dir"] for line in cassette["lines"]] == ["out", "in", "out", "in", "out"]
