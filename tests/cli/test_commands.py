"""Tests for simulator.cli.commands: zread-sim's own commands, each beside its help."""

from __future__ import annotations

import argparse
import importlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.cli.commands import SUBCOMMANDS, run_tool, tool_help
from simulator.cli.options import UsageError, add_simulator_options
from statecharts import COMMANDS

TOOLS = [name for name, spec in SUBCOMMANDS.items() if spec.tool]


def test_the_table_has_every_command_of_zread_sim_and_none_of_zreads() -> None:
    assert set(SUBCOMMANDS) == {
        "install", "journal", "load", "record", "check", "coverage", "paths", "charts",
        "schema", "scenarios", "serve",
    }  # fmt: skip
    assert not set(SUBCOMMANDS) & set(COMMANDS)
    for name, spec in SUBCOMMANDS.items():
        assert spec.summary and not spec.summary.endswith(".")
        assert bool(spec.tool) != bool(spec.run), f"{name}: a tool or a run function"
        if spec.run:
            assert spec.help and spec.usage.startswith(name)


@pytest.mark.parametrize("command", TOOLS)
def test_a_tools_help_is_its_own_parsers_in_cobras_layout(command: str) -> None:
    module = importlib.import_module(SUBCOMMANDS[command].tool)
    assert callable(module.main)
    text = tool_help(command)
    assert "\nUsage:\n  zread-sim " in text and "\nFlags:\n" in text
    assert "  -h, --help " in text and "usage:" not in text and "options:" not in text


def test_run_tool_gives_the_words_after_its_name() -> None:
    assert run_tool("charts", ["no-such-command"]) == 2  # refused as the tool refuses it


def test_scenarios_lists_and_shows() -> None:
    spec = SUBCOMMANDS["scenarios"]
    parser = argparse.ArgumentParser()
    assert spec.arguments and spec.run
    spec.arguments(parser)
    out = io.BytesIO()
    assert spec.run(parser.parse_args([]), out) == 0
    assert out.getvalue().decode().splitlines()[0].startswith("default ")
    out = io.BytesIO()
    assert spec.run(parser.parse_args(["show", "empty"]), out) == 0
    assert b"[world" in out.getvalue()
    with pytest.raises(UsageError, match="scenarios show: name a scenario"):
        spec.run(parser.parse_args(["show"]), io.BytesIO())


def test_install_into_a_folder_that_does_not_exist_says_it_made_it(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "bin"
    argv = [sys.executable, "-m", "simulator", "install", str(folder)]
    made = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert made.stdout == f"{folder / 'zread'}\n"
    assert made.stderr == f"zread-sim install: created the folder {folder}\n"
    again = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert again.stderr == ""  # it was there: nothing to say


def test_install_writes_a_script_with_the_options_baked(tmp_path: Path) -> None:
    spec = SUBCOMMANDS["install"]
    parser = argparse.ArgumentParser()
    assert spec.arguments and spec.run and spec.bakes_options
    spec.arguments(parser)
    add_simulator_options(parser)
    out = io.BytesIO()
    args = parser.parse_args([str(tmp_path / "bin"), "--scenario", "empty", "--seed", "4"])
    assert spec.run(args, out) == 0
    script = Path(out.getvalue().decode().strip())
    assert script == tmp_path / "bin" / "zread" and os.access(script, os.X_OK)
    text = script.read_text()
    assert "ZREAD_SIM_SCENARIO" in text and "empty" in text and "ZREAD_SIM_SEED" in text


@pytest.mark.parametrize("server", ["/run/user/0/zread-sim-x/zread.sock", ""])
def test_install_bakes_the_warm_server_it_runs_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    monkeypatch.setenv("ZREAD_SIM_SERVER", server)
    spec = SUBCOMMANDS["install"]
    parser = argparse.ArgumentParser()
    assert spec.arguments and spec.run
    spec.arguments(parser)
    add_simulator_options(parser)
    assert spec.run(parser.parse_args([str(tmp_path)]), io.BytesIO()) == 0
    text = (tmp_path / "zread").read_text()
    assert ("ZREAD_SIM_SERVER" in text) is bool(server)
    assert (server in text) if server else True


def test_install_into_a_place_it_cannot_write_is_a_usage_error(tmp_path: Path) -> None:
    spec = SUBCOMMANDS["install"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    parser = argparse.ArgumentParser()
    assert spec.arguments and spec.run
    spec.arguments(parser)
    add_simulator_options(parser)
    with pytest.raises(UsageError, match=f"install: {blocker}/sub: "):
        spec.run(parser.parse_args([str(blocker / "sub")]), io.BytesIO())
