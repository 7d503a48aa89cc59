"""Tests for simulator.hosts.executable: the ``zread`` script, run for real.

The script is written to a fresh directory and executed as a user's client would run
``zread`` (by path, and found on PATH), from a directory where the package cannot be
imported unless the script says where it is, and with an environment stripped to the
few variables a sandboxing client passes on.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simulator.hosts.executable import script_text, write_zread_executable

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without PYTHONPATH and the simulator's own variables."""
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("ZREAD_SIM")
    }
    env.update(extra)
    return env


def stripped_env(home: Path, **extra: str) -> dict[str, str]:
    """Only what a sandboxed client hands its child."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"}
    env["TMPDIR"] = str(home)
    env.update(extra)
    return env


def version_of(script: Path, env: dict[str, str], *args: str) -> Any:
    done = subprocess.run(
        [str(script), "version", "--stdio", *args],
        env=env,
        cwd=env.get("HOME"),
        capture_output=True,
        timeout=30,
        check=True,
    )
    (line,) = done.stdout.splitlines()
    return json.loads(line)["vm"]


def release(tmp_path: Path, version: str) -> str:
    path = tmp_path / f"{version}.toml"
    path.write_text(f'[world.release]\ncurrent_version = "{version}"\n')
    return str(path)


def test_the_script_is_an_executable_zread_in_the_folder(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    assert script == tmp_path / "zread"
    assert list(tmp_path.iterdir()) == [script]
    mode = script.stat().st_mode
    assert mode & stat.S_IXUSR and mode & stat.S_IXGRP and mode & stat.S_IXOTH
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n'''exec' ")
    assert f'{sys.executable} "$0" "$@"\n' in text
    assert repr(str(PACKAGE_ROOT)) in text
    assert "from simulator.__main__ import main" in text


def test_the_script_is_valid_python_and_sh() -> None:
    text = script_text({"ZREAD_SIM_SEED": "3"})
    compile(text, "zread", "exec")
    trampoline = "".join(text.splitlines(keepends=True)[:2])  # sh never reads past exec
    assert subprocess.run(["sh", "-n"], input=trampoline.encode(), timeout=10).returncode == 0


def test_only_simulator_variables_can_be_baked() -> None:
    with pytest.raises(ValueError, match="PATH"):
        script_text({"PATH": "/tmp"})


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
    assert event["done"] is True and event["vm"]["version"] == "0.2.13"
    assert list(elsewhere.iterdir()) == []  # it wrote nothing where it ran


def test_it_calls_itself_zread(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    bad = subprocess.run([str(script), "nope"], env=clean_env(), capture_output=True, timeout=30)
    assert bad.returncode == 2
    assert bad.stderr.decode() == 'zread: unknown command "nope" for "zread" (see: zread --help)\n'


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


def test_it_runs_with_a_stripped_environment(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    script = write_zread_executable(tmp_path / "bin")
    home = tmp_path / "home"
    home.mkdir()
    assert version_of(script, stripped_env(home))["version"] == "0.2.13"
    assert list(home.iterdir()) == []


def test_baked_defaults_steer_a_stripped_environment(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path, {"ZREAD_SIM_SCENARIO": release(tmp_path, "1.0.0")})
    assert version_of(script, stripped_env(tmp_path))["version"] == "1.0.0"


def test_a_variable_beats_a_baked_default_and_a_flag_beats_both(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path, {"ZREAD_SIM_SCENARIO": release(tmp_path, "1.0.0")})
    env = stripped_env(tmp_path, ZREAD_SIM_SCENARIO=release(tmp_path, "2.0.0"))
    assert version_of(script, env)["version"] == "2.0.0"
    flag = ["--scenario", release(tmp_path, "3.0.0")]
    assert version_of(script, env, *flag)["version"] == "3.0.0"


def test_a_value_that_needs_quoting_is_baked_exactly(tmp_path: Path) -> None:
    odd = tmp_path / 'it\'s "odd" $HOME `x`'
    odd.mkdir()
    path = release(odd, "4.0.0")
    script = write_zread_executable(tmp_path, {"ZREAD_SIM_SCENARIO": path})
    assert version_of(script, stripped_env(tmp_path))["version"] == "4.0.0"


def test_a_pythonpath_cannot_shadow_the_package(tmp_path: Path) -> None:
    script = write_zread_executable(tmp_path)
    decoy = tmp_path / "decoy" / "simulator"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise SystemExit('the wrong simulator')\n")
    env = clean_env(PYTHONPATH=str(decoy.parent))
    assert version_of(script, env)["version"] == "0.2.13"


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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zread"]  # no temporary file left


def test_an_interpreter_path_with_backslashes_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This venv again (its pyvenv.cfg and lib/), so the interpreter keeps its packages.
    odd = tmp_path / "we\\Nird\\x{\\u 'q'\\"
    (odd / "bin").mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", odd / "pyvenv.cfg")
    (odd / "lib").symlink_to(Path(sys.prefix) / "lib")
    (odd / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(odd / "bin" / "python"))
    script = write_zread_executable(tmp_path)
    compile(script.read_text(), "zread", "exec")
    assert version_of(script, clean_env(HOME=str(tmp_path)))["version"] == "0.2.13"
