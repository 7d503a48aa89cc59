"""``python -m simulator`` and the ``zread-sim`` entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import statecharts

COMMANDS = list(statecharts.COMMANDS)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m simulator *argv``."""
    return python("-m", "simulator", *argv)


def python(*argv: str) -> subprocess.CompletedProcess[str]:
    """This interpreter with ``argv``, stdin /dev/null, no ZREAD_SIM_ variable set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    return subprocess.run(
        [sys.executable, *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
        env=env,
        check=False,
    )


def test_help_exits_0_and_lists_the_commands() -> None:
    done = run("--help")
    assert done.returncode == 0
    assert done.stderr == ""
    for command in COMMANDS:
        assert command in done.stdout


def test_no_arguments_prints_the_help() -> None:
    done = run()
    assert done.returncode == 0
    assert done.stderr == ""
    assert done.stdout == run("--help").stdout


def test_a_usage_error_is_one_line_naming_zread_sim() -> None:
    done = run("frobnicate")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("zread-sim: ")
    assert "Traceback" not in done.stderr


def test_version_exits_0() -> None:
    done = run("version", "--stdio", "--speed", "0")
    assert done.returncode == 0
    assert done.stderr == ""
    assert done.stdout.count("\n") == 1
    assert '"done":true' in done.stdout


def test_the_package_installs_a_zread_executable_beside_the_interpreter() -> None:
    zread = Path(sys.executable).parent / "zread"
    assert zread.exists()
    done = subprocess.run([str(zread), "version", "--stdio"], capture_output=True, timeout=30)
    assert done.returncode == 0
    assert json.loads(done.stdout)["done"] is True
    assert json.loads(done.stdout)["vm"]["version"] == "0.2.13"
    human = subprocess.run([str(zread), "version"], capture_output=True, timeout=30)
    assert human.returncode == 0
    assert human.stdout.decode().startswith("zread version 0.2.13 ")
    refused = subprocess.run([str(zread), "config"], capture_output=True, timeout=30)
    assert refused.returncode == 2
    assert refused.stderr.decode().startswith("zread: ")
    unknown = subprocess.run([str(zread), "scenarios"], capture_output=True, timeout=30)
    assert unknown.returncode == 2
    assert unknown.stderr.decode().startswith('zread: unknown command "scenarios"')


def test_the_zread_sim_script_is_zread_sim() -> None:
    script = Path(sys.executable).parent / "zread-sim"
    done = subprocess.run([str(script), "scenarios"], capture_output=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout.decode().startswith("default ")


NOT_FOR_VERSION = [
    "asyncio",  # --control only
    "dataclasses",
    "locale",  # argparse's message catalogue, looked up when a parser is built
    "shutil",  # argparse's formatter, asking the terminal for its width
    "simulator.clijson",  # --frame only
    "simulator.control",
    "simulator.core.effects",  # at the first effect; version asks for none
    "simulator.hosts.files",  # version reads none of zread's files
    "simulator.hosts.journal",
    "simulator.hosts.wikiserver",
    "simulator.scenario.wiki",
    "simulator.tools",
]
"""Modules ``version --stdio`` has no use for, kept out of its start-up."""


def test_version_stdio_imports_nothing_it_does_not_use() -> None:
    code = (
        "import sys\n"
        "from simulator.cli import main\n"
        "code = main(['version', '--stdio'])\n"
        "sys.stderr.write(f'{code} ' + ' '.join(sorted(sys.modules)))\n"
    )
    done = python("-c", code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["done"] is True
    code, *modules = done.stderr.split()
    assert code == "0"
    assert "transitions" in modules  # the chart runs on it, as every chart does
    assert sorted(set(NOT_FOR_VERSION) & set(modules)) == []
