"""Tests for simulator.warmup: what the server loads and rehearses, and nothing written
outside its scratch folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_warm_up_runs_every_command_in_its_scratch_folder(tmp_path: Path) -> None:
    code = (
        "import gc, sys\n"
        "from simulator import warmup\n"
        f"warmup.warm_up({str(tmp_path)!r})\n"
        "warmup.rehearse()\n"
        "print(gc.get_freeze_count() > 10000, 'simulator.cli.session' in sys.modules)\n"
    )
    home = tmp_path / "home-of-the-process"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "ZREAD_SIM_JOURNAL": str(tmp_path / "leak.jsonl")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert (done.stdout.split(), done.stderr) == (["True", "True"], "")
    journal = (tmp_path / "journal.jsonl").read_text()
    for command in ("version", "generate", "config", "login", "update"):
        assert f'"command":"{command}"' in journal
    assert '"how":"done"' in journal or '"kind":"exit"' in journal
    assert list(home.iterdir()) == []  # the process's HOME and variables are not used
    assert not (tmp_path / "leak.jsonl").exists()
    assert (tmp_path / "project" / ".zread" / "wiki").is_dir()  # generate wrote there
