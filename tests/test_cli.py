"""The command line: simulator.cli.main in-process (argv, streams, environ), plus a
few real processes where the real stdio matters."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from simulator.cli import main
from simulator.scenario import builtin_names

COMMANDS = ["browse", "generate", "config", "login", "update", "version"]


class Result:
    def __init__(self, rc: int, stdout: bytes, stderr: str) -> None:
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]

    @property
    def states(self) -> list[str]:
        return [e["vm"].get("state", "") for e in self.events]


def run(
    tmp_path: Path,
    argv: list[str],
    environ: Mapping[str, str] | None = None,
    stdin: bytes = b"",
) -> Result:
    """main() with a regular-file stdin holding ``stdin`` and a regular-file stdout."""
    in_path, out_path = tmp_path / "stdin", tmp_path / "stdout"
    in_path.write_bytes(stdin)
    err = io.StringIO()
    with in_path.open("rb") as fin, out_path.open("wb") as fout:
        rc = main(argv, stdin=fin, stdout=fout, stderr=err, environ=environ or {})
    return Result(int(rc), out_path.read_bytes(), err.getvalue())


def assert_one_line(stderr: str, *mentions: str) -> None:
    assert stderr.endswith("\n"), stderr
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith("zread-sim: "), stderr
    assert "Traceback" not in stderr
    for text in mentions:
        assert text in stderr, (text, stderr)


# -- help and usage errors ----------------------------------------------------------------


def test_help_lists_the_six_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"], environ={})
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_mentions_stdio(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"], environ={})
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--stdio" in out
    assert "--scenario" in out and "--speed" in out and "--seed" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_without_stdio_exits_2_with_one_line(tmp_path: Path, command: str) -> None:
    result = run(tmp_path, [command])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, f"{command} --stdio")


def test_no_command_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path, [])
    assert result.rc == 2
    assert_one_line(result.stderr)


def test_unknown_command_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path, ["frobnicate", "--stdio"])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, "frobnicate")


@pytest.mark.parametrize("name", ["nope", "no-such-scenario"])
def test_unknown_scenario_exits_2_naming_it(tmp_path: Path, name: str) -> None:
    result = run(tmp_path, ["config", "--stdio", "--scenario", name])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, name)


def test_missing_scenario_file_exits_2_naming_it(tmp_path: Path) -> None:
    path = str(tmp_path / "absent.toml")
    result = run(tmp_path, ["update", "--stdio", "--scenario", path])
    assert result.rc == 2
    assert_one_line(result.stderr, "absent.toml")


def test_invalid_scenario_file_exits_2_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[world.config]\nmax_retries = 99\n", encoding="utf-8")
    result = run(tmp_path, ["config", "--stdio", "--scenario", str(bad)])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, "bad.toml", "max_retries")


@pytest.mark.parametrize("value", ["-1", "abc", "nan", "inf", "", "1e999"])
def test_bad_speed_flag_exits_2(tmp_path: Path, value: str) -> None:
    result = run(tmp_path, ["config", "--stdio", f"--speed={value}"])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, "--speed")


@pytest.mark.parametrize("value", ["1.5", "x", ""])
def test_bad_seed_flag_exits_2(tmp_path: Path, value: str) -> None:
    result = run(tmp_path, ["config", "--stdio", f"--seed={value}"])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, "--seed")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ZREAD_SIM_SPEED", "fast"),
        ("ZREAD_SIM_SPEED", "-2"),
        ("ZREAD_SIM_SPEED", "nan"),
        ("ZREAD_SIM_SEED", "x"),
        ("ZREAD_SIM_SEED", "2.5"),
    ],
)
def test_bad_environment_variable_exits_2_naming_it(
    tmp_path: Path, variable: str, value: str
) -> None:
    result = run(tmp_path, ["config", "--stdio"], environ={variable: value})
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, variable)


def test_unknown_scenario_variable_exits_2_naming_it(tmp_path: Path) -> None:
    result = run(tmp_path, ["config", "--stdio"], environ={"ZREAD_SIM_SCENARIO": "nope"})
    assert result.rc == 2
    assert_one_line(result.stderr, "nope")


# -- environment variables ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "variable"),
    [
        (["--speed", "0"], {"ZREAD_SIM_SPEED": "fast"}),
        (["--seed", "1"], {"ZREAD_SIM_SEED": "x"}),
        (["--scenario", "default"], {"ZREAD_SIM_SCENARIO": "nope"}),
    ],
)
def test_a_flag_beats_its_variable(
    tmp_path: Path, flag: list[str], variable: dict[str, str]
) -> None:
    result = run(tmp_path, ["version", "--stdio", *flag], environ=variable)
    assert result.rc == 0, result.stderr
    assert result.stderr == ""
    assert result.events[-1]["done"] is True


def test_scenario_flag_beats_scenario_variable(tmp_path: Path) -> None:
    env = {"ZREAD_SIM_SCENARIO": "up-to-date"}
    by_variable = run(tmp_path, ["version", "--stdio"], environ=env)
    assert by_variable.events[0]["vm"]["version"] == "0.9.5"
    by_flag = run(tmp_path, ["version", "--stdio", "--scenario", "default"], environ=env)
    assert by_flag.events[0]["vm"]["version"] == "0.9.4"


def test_scenario_variable_selects_a_scenario(tmp_path: Path) -> None:
    env = {"ZREAD_SIM_SCENARIO": "up-to-date", "ZREAD_SIM_SPEED": "0"}
    result = run(tmp_path, ["update", "--stdio"], environ=env)
    assert result.rc == 0, result.stderr
    assert result.states == ["checking", "up_to_date"]
    assert result.events[-1]["done"] is True
    default = run(tmp_path, ["update", "--stdio"], environ={"ZREAD_SIM_SPEED": "0"})
    assert default.states[:2] == ["checking", "has_update"]


def test_speed_variable_is_used(tmp_path: Path) -> None:
    # At speed 0 the check is due at once, before the end of stdin is read; at a huge
    # speed factor it is far away and the end of stdin (= quit) comes first.
    fast = run(tmp_path, ["update", "--stdio"], environ={"ZREAD_SIM_SPEED": "0"})
    assert fast.states == ["checking", "has_update", "has_update"]
    slow = run(tmp_path, ["update", "--stdio"], environ={"ZREAD_SIM_SPEED": "1000"})
    assert slow.states == ["checking", "checking"]
    assert slow.events[-1]["done"] is True


def test_seed_variable_is_used(tmp_path: Path) -> None:
    script = b'{"type":"select_region","params":{"region":"cn"}}\n'
    env = {"ZREAD_SIM_SPEED": "0"}

    def urls(argv: list[str], environ: dict[str, str]) -> list[str]:
        result = run(tmp_path, ["login", "--stdio", *argv], environ=environ, stdin=script)
        assert result.rc == 0, result.stderr
        return [e["vm"]["authorize_url"] for e in result.events if "authorize_url" in e["vm"]]

    by_variable = urls([], {**env, "ZREAD_SIM_SEED": "5"})
    assert by_variable
    assert by_variable == urls(["--seed", "5"], env)
    assert by_variable != urls([], {**env, "ZREAD_SIM_SEED": "6"})


# -- scenarios ---------------------------------------------------------------------------


def packaged_scenarios() -> list[str]:
    folder = resources.files("simulator") / "scenario" / "builtin"
    return sorted(
        e.name.removesuffix(".toml") for e in folder.iterdir() if e.name.endswith(".toml")
    )


@pytest.mark.parametrize("argv", [["scenarios"], ["scenarios", "list"]])
def test_scenarios_lists_every_builtin_with_a_description(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv, environ={}) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    names = [line.split()[0] for line in lines]
    assert sorted(names) == packaged_scenarios()
    assert names == builtin_names()
    assert names[0] == "default"
    for line in lines:
        name, description = line.split(None, 1)
        text = tomllib.loads(
            (resources.files("simulator") / "scenario" / "builtin" / f"{name}.toml").read_text()
        )
        assert description.strip() == text["description"]
    for expected in ("default", "up-to-date", "package-manager", "download-error", "login-timeout"):
        assert expected in names


def test_scenarios_show_prints_toml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "show", "up-to-date"], environ={}) == 0
    out = capsys.readouterr().out
    data = tomllib.loads(out)
    assert data["world"]["release"]["current_version"] == "0.9.5"
    assert data["description"]


def test_scenarios_show_unknown_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path, ["scenarios", "show", "nope"])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, "nope")


def test_scenarios_show_without_a_name_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path, ["scenarios", "show"])
    assert result.rc == 2
    assert_one_line(result.stderr)


# -- a full run in-process ---------------------------------------------------------------


def test_in_process_run_with_regular_files(tmp_path: Path) -> None:
    script = b'{"type":"update_fields","params":{"fields":{"language":"zh"}}}\n{"type":"save"}\n'
    result = run(tmp_path, ["config", "--stdio", "--speed", "0"], stdin=script)
    assert result.rc == 0
    assert result.stderr == ""
    events = result.events
    assert len(events) == 3
    assert events[-1]["done"] is True
    assert events[-1]["vm"]["saved"] is True
    assert events[-1]["vm"]["fields"][0]["value"] == "zh"


# -- real processes ----------------------------------------------------------------------


def spawn(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    import os

    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "simulator", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=20,
        env=environ,
        check=False,
    )


def test_process_without_stdio_exits_2() -> None:
    done = spawn("config")
    assert done.returncode == 2
    assert done.stdout == b""
    assert_one_line(done.stderr.decode())


def test_process_bad_variable_exits_2() -> None:
    done = spawn("version", "--stdio", env={"ZREAD_SIM_SEED": "many"})
    assert done.returncode == 2
    assert done.stdout == b""
    assert_one_line(done.stderr.decode(), "ZREAD_SIM_SEED")


def test_process_variables_steer_a_plain_command() -> None:
    done = spawn(
        "update", "--stdio", env={"ZREAD_SIM_SCENARIO": "package-manager", "ZREAD_SIM_SPEED": "0"}
    )
    assert done.returncode == 0
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["vm"]["state"] == "package_manager"
    assert events[-1]["vm"]["package_manager"] == "brew"
    assert done.stderr == b""
