"""Tests for simulator.hosts.executable: the ``zread`` script, run for real.

The script is written to a fresh directory and executed as a user's client would run
``zread`` (by path, and found on PATH), from a directory where the package cannot be
imported unless the script says where it is.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from simulator.hosts.executable import write_zread_executable

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without PYTHONPATH and the simulator's own variables."""
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZREAD_SIM")
    }
    env.update(extra)
    return env


def test_the_script_is_an_executable_zread_in_the_folder(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    assert script == tmp_path / "zread"
    assert list(tmp_path.iterdir()) == [script]
    mode = script.stat().st_mode
    assert mode & stat.S_IXUSR and mode & stat.S_IXGRP and mode & stat.S_IXOTH
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert f'exec "{sys.executable}" -m simulator "$@"' in text
    assert str(PACKAGE_ROOT) in text


def test_the_script_runs_this_simulator_from_anywhere(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [str(script), "version", "--stdio"],
        cwd=elsewhere,
        env=clean_env(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    (line,) = done.stdout.splitlines()
    event = json.loads(line)
    assert event["done"] is True and event["vm"]["version"]
    assert list(elsewhere.iterdir()) == []  # it wrote nothing where it ran


def test_arguments_reach_the_simulator_unchanged(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    # Quoting matters: a value with a space stays one argument.
    scenario = tmp_path / "with space.toml"
    scenario.write_text('extends = "empty"\n')
    done = subprocess.run(
        [str(script), "browse", "--stdio", "--scenario", str(scenario), "--speed", "0"],
        env=clean_env(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[0])["vm"]["state"] == "no_wiki"
    bad = subprocess.run([str(script), "nope"], env=clean_env(), capture_output=True, timeout=30)
    assert bad.returncode == 2 and b"nope" in bad.stderr


def test_an_existing_pythonpath_is_kept_after_the_package(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "sitecustomize.py").write_text(
        "import os, sys\n"
        "with open(os.environ['PATH_LOG'], 'w') as f:\n"
        "    f.write('\\n'.join(sys.path))\n"
    )
    log = tmp_path / "path.log"
    subprocess.run(
        [str(script), "version", "--stdio"],
        env=clean_env(PYTHONPATH=str(extra), PATH_LOG=str(log)),
        capture_output=True,
        timeout=30,
        check=True,
    )
    path = log.read_text().splitlines()
    assert path.index(str(PACKAGE_ROOT)) < path.index(str(extra))


def test_found_on_path_once_its_folder_is_put_there(tmp_path: Path) -> None:
    write_zread_executable(tmp_path)
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"
    assert shutil.which("zread", path=path) == str(tmp_path / "zread")
    done = subprocess.run(
        ["zread", "version", "--stdio"],
        env=clean_env(PATH=path),
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert json.loads(done.stdout)["done"] is True


def test_writing_it_again_replaces_it(tmp_path: Path) -> None:
    (tmp_path / "zread").write_text("#!/bin/sh\nexit 9\n")
    script = write_zread_executable(tmp_path)
    assert subprocess.run([str(script), "version", "--stdio"], timeout=30).returncode == 0
