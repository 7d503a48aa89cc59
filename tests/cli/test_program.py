"""The command line: simulator.cli.main in-process (argv, streams, environ), plus a
few real processes where the real stdio matters."""

from __future__ import annotations

import io
import json
import os
import platform
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import statecharts
from simulator import launch
from simulator.cli import main
from simulator.scenario import builtin_names
from statecharts.browse import BrowseFlags
from statecharts.generate import GenerateFlags

COMMANDS = list(statecharts.COMMANDS)
GO_OS = {"linux": "linux", "darwin": "darwin", "win32": "windows"}[sys.platform]
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[
    platform.machine().lower()
]
QUIT = b'{"type":"quit"}\n'


def flags_of(args: Any) -> Any:
    """The zread flags of arguments the command line parsed."""
    return launch.flags_of(args.command, args)


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
    prog: str = "zread-sim",
) -> Result:
    """main() with a regular-file stdin holding ``stdin`` and a regular-file stdout."""
    in_path, out_path = tmp_path / "stdin", tmp_path / "stdout"
    in_path.write_bytes(stdin)
    err = io.StringIO()
    with in_path.open("rb") as fin, out_path.open("wb") as fout:
        rc = main(argv, stdin=fin, stdout=fout, stderr=err, environ=environ or {}, prog=prog)
    return Result(int(rc), out_path.read_bytes(), err.getvalue())


def assert_one_line(stderr: str, *mentions: str, name: str = "zread-sim") -> None:
    assert stderr.endswith("\n"), stderr
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"{name}: "), stderr
    assert "Traceback" not in stderr
    for text in mentions:
        assert text in stderr, (text, stderr)


# -- help ---------------------------------------------------------------------------------

NAMES = ["zread", "zread-sim"]
SUMMARIES = {
    "browse": "Browse the generated wiki in a local web server",
    "config": "Edit zread's configuration",
    "generate": "Generate wiki documentation for the current repository",
    "login": "Login flow: sign in and choose a model",
    "update": "Update Zread to the latest version",
    "version": "Print the version of Zread",
}
SIMULATOR_OPTIONS = [
    "--scenario",
    "--seed",
    "--speed",
    "--home",
    "--project",
    "--no-files",
    "--control",
    "--frame",
    "--journal",
]


def help_of(argv: list[str], prog: str = "zread") -> str:
    """What ``prog *argv`` writes for help: checked to exit 0 with nothing on stderr."""
    out, err = io.BytesIO(), io.StringIO()
    rc = main(argv, stdout=out, stderr=err, environ={}, prog=prog)
    assert (rc, err.getvalue()) == (0, ""), (argv, err.getvalue())
    return out.getvalue().decode()


def section(text: str, heading: str) -> list[str]:
    """The lines of one help section, up to the blank line that ends it."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("argv", [["--help"], ["-h"], [], ["help"]])
def test_the_program_help_lists_the_six_commands(name: str, argv: list[str]) -> None:
    text = help_of(argv, name)
    listed = section(text, "Available Commands:")
    for command, summary in SUMMARIES.items():
        assert f"  {command:<11} {summary}" in listed
    assert f"  {'help':<11} Help about any command" in listed
    assert [line.split()[0] for line in listed] == sorted([*SUMMARIES, "help"])
    assert section(text, "Usage:") == [f"  {name} [command]"]
    assert section(text, "Flags:") == [
        f"  -h, --help      help for {name}",
        f"  -v, --version   version for {name}",
    ]
    assert text.endswith(f'Use "{name} [command] --help" for more information about a command.\n')


def test_the_program_help_says_where_it_writes() -> None:
    for name in NAMES:
        text = help_of(["--help"], name)
        assert "~/.zread/" in text and "the project's .zread/" in text and "--no-files" in text


def test_only_zread_sim_lists_its_own_commands_and_options() -> None:
    sim, zread = help_of(["--help"], "zread-sim"), help_of(["--help"], "zread")
    assert [line.split()[0] for line in section(sim, "Simulator Commands:")] == [
        "charts",
        "check",
        "coverage",
        "install",
        "journal",
        "load",
        "paths",
        "record",
        "scenarios",
        "schema",
        "serve",
    ]
    assert "Simulator Commands:" not in zread and "scenarios" not in zread
    for option in SIMULATOR_OPTIONS:
        listed = re.compile(rf"^ +{option}\b", re.MULTILINE)
        assert listed.search(sim) and not listed.search(zread)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_is_cobra_shaped(name: str, command: str) -> None:
    text = help_of([command, "--help"], name)
    assert text == help_of([command, "-h"], name) == help_of(["help", command], name)
    assert section(text, "Usage:") == [f"  {name} {command} [flags]"]
    flags = section(text, "Flags:")
    assert re.fullmatch(rf"  -h, --help +help for {command}", next(f for f in flags if "-h," in f))
    assert any(re.fullmatch(r"      --stdio +\S.*", line) for line in flags)
    # pflag's columns: sorted by name, every usage at one column, 3 spaces after the widest.
    parts = [re.fullmatch(r"(  (?:-\w, |    )--([\w-]+)(?: \w+)?) +(\S.*)", f) for f in flags]
    assert all(parts), flags
    names = [part[2] for part in parts if part]
    assert names == sorted(names)
    widest = max(len(part[1]) for part in parts if part)
    starts = {len(line) - len(part[3]) for line, part in zip(flags, parts, strict=True) if part}
    assert starts == {widest + 3}
    assert "usage:" not in text and "options:" not in text  # not argparse's layout
    simulator_section = "Simulator Flags:" in text
    assert simulator_section is (name == "zread-sim")
    for option in SIMULATOR_OPTIONS:
        assert bool(re.search(rf"^ +{option}\b", text, re.MULTILINE)) is (name == "zread-sim")


def test_the_help_texts_a_desktop_hub_probes_for() -> None:
    generate = help_of(["generate", "--help"])
    for text in ("Generate wiki documentation", "--stdio", "-y, --yes", "--draft", "--skip-failed"):
        assert text in generate
    login = help_of(["login", "--help"])
    assert "Login flow" in login and "--custom" in login
    assert "Update Zread to the latest version" in help_of(["update", "--help"])
    browse = help_of(["browse", "--help"])
    for text in ("--host string", "--port int", "--version string", "--generate"):
        assert text in browse
    assert '(default "127.0.0.1")' in browse and "(default 9681)" in browse


def test_help_wins_wherever_it_stands() -> None:
    assert help_of(["generate", "-y", "--stdio", "--help"]) == help_of(["generate", "--help"])
    assert help_of(["--help", "--scenario", "empty"]) == help_of([])


def test_help_of_the_simulator_commands() -> None:
    install = help_of(["install", "--help"], "zread-sim")
    assert section(install, "Usage:") == ["  zread-sim install DIR [flags]"]
    for option in SIMULATOR_OPTIONS:
        assert option in install
    scenarios = help_of(["help", "scenarios"], "zread-sim")
    assert section(scenarios, "Usage:") == ["  zread-sim scenarios [list|show NAME] [flags]"]


# -- version without --stdio -------------------------------------------------------------


def release_file(tmp_path: Path, version: str = "1.2.3") -> str:
    path = tmp_path / "release.toml"
    path.write_text(f'[world.release]\ncurrent_version = "{version}"\n', encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", NAMES)
def test_version_prints_a_human_line(name: str) -> None:
    assert help_of(["version"], name) == f"zread version 0.2.13 {GO_OS}/{GO_ARCH}\n"
    if name == "zread":
        assert help_of(["--version"], name) == "zread version 0.2.13\n"
        assert help_of(["-v"], name) == "zread version 0.2.13\n"


def test_zread_sim_version_is_the_tools_own_and_the_zread_it_plays() -> None:
    from importlib.metadata import version

    line = f"zread-sim {version('zread-sim')} (plays zread 0.2.13)\n"
    assert help_of(["--version"], "zread-sim") == line
    assert help_of(["-v"], "zread-sim") == line


def test_the_version_line_comes_from_the_scenario(tmp_path: Path) -> None:
    path = release_file(tmp_path)
    for argv in (["version", "--scenario", path], ["--version", "--scenario", path]):
        out = io.BytesIO()
        assert main(argv, stdout=out, environ={}, prog="zread") == 0
        assert out.getvalue().startswith(b"zread version 1.2.3")
    out = io.BytesIO()
    assert main(["version"], stdout=out, environ={"ZREAD_SIM_SCENARIO": path}, prog="zread") == 0
    assert out.getvalue().startswith(b"zread version 1.2.3 ")


def test_the_version_line_of_an_unknown_scenario_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path, ["--version", "--scenario", "nope"], prog="zread")
    assert result.rc == 2 and result.stdout == b""
    assert_one_line(result.stderr, "nope", name="zread")


@pytest.mark.parametrize(
    ("argv", "environ"),
    [
        (["generate", "--stdio", "-y", "--scenario", ""], {}),
        (["generate", "--stdio", "-y"], {"ZREAD_SIM_SCENARIO": ""}),
    ],
)
def test_an_empty_scenario_name_exits_2_in_one_line(
    tmp_path: Path, argv: list[str], environ: dict[str, str]
) -> None:
    result = run(tmp_path, argv, environ, prog="zread")
    assert result.rc == 2 and result.stdout == b""
    assert_one_line(result.stderr, "empty scenario name", "zread-sim scenarios", name="zread")


# -- usage errors --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "version"])
def test_without_stdio_exits_2_with_one_line(tmp_path: Path, name: str, command: str) -> None:
    result = run(tmp_path, [command], prog=name)
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, f"run: {name} {command} --stdio", name=name)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["frobnicate", "--stdio"], 'unknown command "frobnicate"'),
        (["generate", "--stdio", "--bogus"], "generate: unrecognized arguments: --bogus"),
        (["generate", "--stdio", "--draft", "keep"], "invalid choice: 'keep'"),
        (["login", "--stdio", "-y"], "login: unrecognized arguments: -y"),
        (["browse", "--stdio", "--port", "x"], "--port"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["help", "nope"], 'unknown help topic "nope"'),
        (["version", "--stdio", "--spe", "0"], "--spe"),  # no abbreviations, as in zread
    ],
)
def test_a_usage_error_is_one_line_naming_the_program(
    tmp_path: Path, name: str, argv: list[str], says: str
) -> None:
    result = run(tmp_path, argv, prog=name)
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, says, name=name)


@pytest.mark.parametrize("command", ["scenarios", "load", "install", "journal"])
def test_the_simulator_commands_are_unknown_to_zread(tmp_path: Path, command: str) -> None:
    result = run(tmp_path, [command, str(tmp_path / "bin")], prog="zread")
    assert result.rc == 2
    assert_one_line(result.stderr, f'unknown command "{command}" for "zread"', name="zread")
    assert not (tmp_path / "bin").exists()


def test_the_name_comes_from_argv0(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for argv0, name in [
        ("/usr/local/bin/zread", "zread"),
        ("zread", "zread"),
        ("/venv/bin/zread-sim", "zread-sim"),
        ("/x/simulator/__main__.py", "zread-sim"),
    ]:
        monkeypatch.setattr(sys, "argv", [argv0])
        err = io.StringIO()
        assert main(["nope"], stderr=err, environ={}) == 2
        assert err.getvalue().startswith(f"{name}: "), (argv0, err.getvalue())


# -- zread's flags and the simulator options on the parsed arguments ----------------------


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Parse as main does, stopping where the run would start: returns the namespace."""
    import simulator.cli.session

    seen: list[Any] = []

    def fake_run(args: Any, stdin: Any, stdout: Any, environ: Any) -> int:
        seen.append(args)
        return 0

    monkeypatch.setattr(simulator.cli.session, "run", fake_run)

    def parse(
        argv: list[str], environ: Mapping[str, str] | None = None, prog: str = "zread"
    ) -> Any:
        err = io.StringIO()
        assert main(argv, stderr=err, environ=environ or {}, prog=prog) == 0, err.getvalue()
        return seen.pop()

    return parse


@pytest.mark.parametrize("name", NAMES)
def test_the_simulator_options_are_taken_under_both_names(parsed: Any, name: str) -> None:
    argv = ["generate", "--stdio", "-y", "--scenario", "empty", "--seed", "4", "--speed", "0"]
    argv += ["--home", "/h", "--project", "/p", "--no-files", "--control", "stdio", "--frame"]
    args = parsed(argv, prog=name)
    assert (args.command, args.scenario, args.seed, args.speed) == ("generate", "empty", 4, 0.0)
    assert (args.home, args.project, args.files, args.control, args.frame) == (
        "/h",
        "/p",
        False,
        "stdio",
        True,
    )
    assert flags_of(args) == GenerateFlags(yes=True)


@pytest.mark.parametrize("name", NAMES)
def test_version_stdio_is_parsed_as_its_parser_parses_it(name: str) -> None:
    """``version --stdio`` skips building its parser: what it gets is what that parser
    returns for it, every option there with the same value."""
    from simulator.cli.parsers import parsed_arguments as _parsed_arguments
    from simulator.cli.parsers import topic_parser as _topic_parser

    argv = ["version", "--stdio"]
    expected = vars(_topic_parser("version", name).parse_args(argv[1:]))
    assert vars(_parsed_arguments("version", name, argv)) == expected
    assert list(vars(_parsed_arguments("version", name, argv))) == list(expected)


def test_the_simulator_options_default_to_their_variables(parsed: Any) -> None:
    args = parsed(["config", "--stdio"])
    assert (args.scenario, args.seed, args.speed, args.home, args.project, args.files) == (
        "default",
        0,
        1.0,
        "",
        "",
        True,
    )
    env = {"ZREAD_SIM_PROJECT": "/work/repo", "ZREAD_SIM_FILES": "0"}
    args = parsed(["config", "--stdio"], env)
    assert (args.project, args.files) == ("/work/repo", False)
    args = parsed(["config", "--stdio", "--project", "/other"], env)
    assert args.project == "/other"
    assert parsed(["config", "--stdio"], {"ZREAD_SIM_FILES": "1"}).files is True


def test_a_bad_files_variable_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path, ["config", "--stdio"], environ={"ZREAD_SIM_FILES": "maybe"})
    assert result.rc == 2
    assert_one_line(result.stderr, "ZREAD_SIM_FILES")


@pytest.mark.parametrize("flag", ["--draft", "--draft-action"])
@pytest.mark.parametrize("action", ["resume", "clear", "cancel"])
def test_draft_and_its_alias_answer_the_draft_prompt(parsed: Any, flag: str, action: str) -> None:
    args = parsed(["generate", "-y", flag, action, "--stdio", "--skip-failed"])
    assert flags_of(args) == GenerateFlags(yes=True, draft_action=action, skip_failed=True)
    assert flags_of(parsed(["generate", f"{flag}={action}", "--stdio"])).draft_action == action


def test_browse_takes_host_port_version_and_generate(parsed: Any) -> None:
    assert flags_of(parsed(["browse", "--stdio"])) == BrowseFlags(host="127.0.0.1", port=9681)
    argv = ["browse", "--stdio", "--host", "localhost", "--port", "0", "--version", "v1"]
    args = parsed([*argv, "--generate"])
    assert flags_of(args) == BrowseFlags(host="localhost", port=0, version="v1", generate=True)
    for host in ("::1", "127.0.0.2", "LOCALHOST", "127.255.0.1"):
        assert flags_of(parsed(["browse", "--stdio", "--host", host])).host == host
    assert flags_of(parsed(["browse", "--stdio", "--port", "65535"])).port == 65535


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.4", "example.com", "::", "", "128.0.0.1"])
def test_a_host_off_this_machine_is_refused(tmp_path: Path, host: str) -> None:
    result = run(tmp_path, ["browse", "--stdio", "--host", host], prog="zread")
    assert result.rc == 2 and result.stdout == b""
    assert_one_line(result.stderr, "--host", repr(host), "loopback", name="zread")


@pytest.mark.parametrize("port", ["-1", "65536", "x", "1.5", ""])
def test_a_port_out_of_range_is_refused(tmp_path: Path, port: str) -> None:
    result = run(tmp_path, ["browse", "--stdio", f"--port={port}"])
    assert result.rc == 2 and result.stdout == b""
    assert_one_line(result.stderr, "--port", "0-65535")


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


def test_version_reports_the_version_real_clients_pin(tmp_path: Path) -> None:
    for name in NAMES:
        result = run(tmp_path, ["version", "--stdio"], prog=name)
        assert result.rc == 0 and result.stderr == ""
        assert result.events[-1]["vm"]["version"] == "0.2.13"


def test_scenario_flag_beats_scenario_variable(tmp_path: Path) -> None:
    env = {"ZREAD_SIM_SCENARIO": release_file(tmp_path)}
    by_variable = run(tmp_path, ["version", "--stdio"], environ=env)
    assert by_variable.events[0]["vm"]["version"] == "1.2.3"
    by_flag = run(tmp_path, ["version", "--stdio", "--scenario", "default"], environ=env)
    assert by_flag.events[0]["vm"]["version"] == "0.2.13"


def test_scenario_variable_selects_a_scenario(tmp_path: Path) -> None:
    env = {"ZREAD_SIM_SCENARIO": "up-to-date", "ZREAD_SIM_SPEED": "0"}
    result = run(tmp_path, ["update", "--stdio"], environ=env)
    assert result.rc == 0, result.stderr
    assert result.states == ["checking", "up_to_date"]
    assert result.events[-1]["done"] is True
    default = run(tmp_path, ["update", "--stdio"], environ={"ZREAD_SIM_SPEED": "0"}, stdin=QUIT)
    assert default.states[:2] == ["checking", "has_update"]


def test_speed_variable_is_used(tmp_path: Path) -> None:
    # At speed 0 the check is due at once, before the quit on stdin is read; at a huge
    # speed factor it is far away and the quit comes first.
    fast = run(tmp_path, ["update", "--stdio"], environ={"ZREAD_SIM_SPEED": "0"}, stdin=QUIT)
    assert fast.states == ["checking", "has_update", "has_update"]
    slow = run(tmp_path, ["update", "--stdio"], environ={"ZREAD_SIM_SPEED": "1000"}, stdin=QUIT)
    assert slow.states == ["checking", "checking"]
    assert slow.events[-1]["done"] is True


def test_seed_variable_is_used(tmp_path: Path) -> None:
    script = b'{"type":"select_region","params":{"region":"cn"}}\n' + QUIT
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
    assert data["world"]["release"]["current_version"] == "0.2.13"
    assert data["world"]["release"]["latest_version"] == "0.2.13"
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

    environ = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
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


# -- install -------------------------------------------------------------------------------


def baked_of(script: Path) -> dict[str, str]:
    """The variables a written script sets by default (its one dict literal)."""
    import ast

    text = script.read_text()
    literal = text[text.index("{", text.index("for _name")) : text.index(".items()")]
    baked: dict[str, str] = ast.literal_eval(literal)
    return baked


@pytest.mark.cold  # no warm server to bake: the baked set is asserted whole
def test_install_writes_an_executable_zread_and_prints_its_path(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "bin"
    result = run(tmp_path, ["install", str(folder)])
    assert result.rc == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == f"{folder / 'zread'}\n".encode()
    assert (folder / "zread").stat().st_mode & 0o111
    assert baked_of(folder / "zread") == {}


@pytest.mark.cold  # no warm server to bake: the baked set is asserted whole
def test_install_bakes_the_options_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text('extends = "empty"\n')
    argv = ["install", "bin", "--scenario", "mine.toml", "--seed", "7", "--speed", "0.5"]
    argv += ["--home", "h", "--project", "p", "--no-files", "--control", "unix:c.sock", "--frame"]
    argv += ["--journal", "j.jsonl"]
    result = run(tmp_path, argv)
    assert result.rc == 0, result.stderr
    assert baked_of(tmp_path / "bin" / "zread") == {
        "ZREAD_SIM_SCENARIO": str(tmp_path / "mine.toml"),  # paths hold from anywhere
        "ZREAD_SIM_SEED": "7",
        "ZREAD_SIM_SPEED": "0.5",
        "ZREAD_SIM_HOME": str(tmp_path / "h"),
        "ZREAD_SIM_PROJECT": str(tmp_path / "p"),
        "ZREAD_SIM_FILES": "0",
        "ZREAD_SIM_CONTROL": f"unix:{tmp_path / 'c.sock'}",
        "ZREAD_SIM_FRAME": "1",
        "ZREAD_SIM_JOURNAL": str(tmp_path / "j.jsonl"),
    }
    run(tmp_path, ["install", "bin", "--scenario", "up-to-date", "--control", "stdio"])
    assert baked_of(tmp_path / "bin" / "zread") == {
        "ZREAD_SIM_SCENARIO": "up-to-date",
        "ZREAD_SIM_CONTROL": "stdio",
    }


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--scenario", "nope"], "nope"),
        (["--seed", "x"], "--seed"),
        (["--speed", "-1"], "--speed"),
        (["--stdio"], "unrecognized arguments: --stdio"),
        ([], "the following arguments are required: dir"),
    ],
)
def test_install_refuses_a_bad_option_and_writes_nothing(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    folder = tmp_path / "bin"
    result = run(tmp_path, ["install", *([str(folder)] if argv else []), *argv])
    assert result.rc == 2
    assert result.stdout == b""
    assert_one_line(result.stderr, says)
    assert not folder.exists()


def test_install_into_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run(tmp_path, ["install", str(tmp_path / "file")])
    assert result.rc == 2
    assert_one_line(result.stderr, "install", "file")


# -- --journal ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_journal_it_cannot_append_to_exits_2_before_anything(tmp_path: Path, name: str) -> None:
    where = tmp_path / "missing" / "j.jsonl"
    for argv, environ in [
        (["config", "--stdio", "--no-files", "--journal", str(where)], {}),
        (["config", "--stdio", "--no-files"], {"ZREAD_SIM_JOURNAL": str(where)}),
        (["config", "--stdio", "--no-files", "--journal", str(tmp_path)], {}),  # a folder
    ]:
        result = run(tmp_path, argv, environ, stdin=b'{"type":"quit"}\n', prog=name)
        assert (result.rc, result.stdout) == (2, b"")  # not even the first event
        assert_one_line(result.stderr, "journal ", name=name)
    assert not where.parent.exists()


def test_the_journal_flag_beats_its_variable_and_names_the_run(tmp_path: Path) -> None:
    flag, variable = tmp_path / "flag.jsonl", tmp_path / "variable.jsonl"
    argv = ["config", "--stdio", "--no-files", "--journal", str(flag)]
    result = run(tmp_path, argv, {"ZREAD_SIM_JOURNAL": str(variable)}, b'{"type":"quit"}\n')
    assert (result.rc, result.stderr) == (0, "")
    assert not variable.exists()
    start, *_, end = [json.loads(line) for line in flag.read_bytes().splitlines()]
    assert start["kind"] == "start" and start["command"] == "config"
    assert start["argv"] == ["zread-sim", *argv] and start["cwd"] == os.getcwd()
    assert start["pid"] == end["pid"] == os.getpid()
    assert (end["kind"], end["how"], end["code"]) == ("exit", "quit", 0)


def test_without_a_journal_nothing_is_written_but_the_events(tmp_path: Path) -> None:
    result = run(tmp_path, ["config", "--stdio", "--no-files"], {}, b'{"type":"quit"}\n')
    assert result.rc == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["stdin", "stdout"]


def test_journal_reads_under_zread_sim_only(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"")
    result = run(tmp_path, ["journal", str(path)])
    assert (result.rc, result.stdout, result.stderr) == (0, b"0 processes, no violations\n", "")
    assert section(help_of(["journal", "--help"], "zread-sim"), "Usage:") == [
        "  zread-sim journal FILE... [flags]"
    ]
    missing = run(tmp_path, ["journal", str(tmp_path / "nope")])
    assert (missing.rc, missing.stdout) == (2, b"")
    assert_one_line(missing.stderr, "No such file or directory")


# -- record and check, under the zread-sim name and as the drop-in ---------------------


def run_cli(args: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None) -> Any:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    return subprocess.run(
        [sys.executable, "-m", "simulator", *args],
        input=stdin,
        capture_output=True,
        env={**environ, **(env or {})},
        timeout=30,
        check=False,
    )


def test_record_then_check_through_zread_sim(tmp_path: Path) -> None:
    cassette = tmp_path / "version.json"
    program = [sys.executable, "-m", "simulator", "version", "--stdio", "--no-files"]
    recorded = run_cli(["record", "--out", str(cassette), "--", *program])
    plain = subprocess.run(program, capture_output=True, timeout=30, check=False)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == plain.stdout  # the client sees what it would see
    lines = json.loads(cassette.read_text())["lines"]
    assert [entry["dir"] for entry in lines] == ["out"]
    checked = run_cli(["check", str(cassette)])
    assert checked.returncode == 0, checked.stdout


def test_zread_sim_record_records_the_real_zread_as_a_drop_in(tmp_path: Path) -> None:
    real = tmp_path / "real-zread"
    real.write_text(f'#!/bin/sh\nexec {sys.executable} -m simulator "$@"\n')
    real.chmod(0o755)
    cassette = tmp_path / "dropin.json"
    env = {"ZREAD_SIM_RECORD": str(cassette), "ZREAD_SIM_REAL": str(real)}
    done = run_cli(["version", "--stdio", "--no-files"], env=env)
    assert done.returncode == 0, done.stderr
    recorded = json.loads(cassette.read_text())
    assert recorded["argv"][1:] == ["version", "--stdio", "--no-files"]
    assert "ZREAD_SIM_RECORD" not in recorded["env"]


def test_record_and_check_are_not_zread_commands() -> None:
    err = io.StringIO()
    assert main(["check", "x.json"], stderr=err, environ={}, prog="zread") == 2
    assert "check" in err.getvalue()


@pytest.mark.parametrize("mode", ["once", "all"])
def test_record_modes_record_then_replay_or_record_again(tmp_path: Path, mode: str) -> None:
    real = tmp_path / "real-zread"
    real.write_text(
        f'#!/bin/sh\necho ran >> {tmp_path / "runs"}\nexec {sys.executable} -m simulator "$@"\n'
    )
    real.chmod(0o755)
    cassette = tmp_path / "version.json"
    env = {
        "ZREAD_SIM_RECORD": str(cassette),
        "ZREAD_SIM_REAL": str(real),
        "ZREAD_SIM_RECORD_MODE": mode,
    }
    first = run_cli(["version", "--stdio", "--no-files"], env=env)
    second = run_cli(["version", "--stdio", "--no-files"], env=env)
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert first.stdout == second.stdout
    runs = (tmp_path / "runs").read_text().count("ran")
    assert runs == (1 if mode == "once" else 2)  # once: the second run is the replay


def test_record_mode_none_needs_the_cassette(tmp_path: Path) -> None:
    env = {"ZREAD_SIM_RECORD": str(tmp_path / "missing.json"), "ZREAD_SIM_RECORD_MODE": "none"}
    done = run_cli(["version", "--stdio", "--no-files"], env=env)
    assert done.returncode == 2 and b"missing.json" in done.stderr
    assert b"Traceback" not in done.stderr


def test_an_unknown_record_mode_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {"ZREAD_SIM_RECORD": str(tmp_path / "c.json"), "ZREAD_SIM_RECORD_MODE": "new"}
    done = run_cli(["version", "--stdio"], env=env)
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "zread-sim: ZREAD_SIM_RECORD_MODE: 'new' is not one of none, once, all"
    ]


# -- the chart tools: coverage, paths, charts, schema -------------------------------------

TOOLS = ("coverage", "paths", "charts", "schema")


def test_zread_sim_lists_the_chart_tools_and_zread_does_not() -> None:
    listed = run_cli(["--help"]).stdout.decode()
    for tool in TOOLS:
        assert f"  {tool} " in listed
    err = io.StringIO()
    assert main(["paths", "version"], stderr=err, environ={}, prog="zread") == 2
    assert 'unknown command "paths" for "zread"' in err.getvalue()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["paths", "version"], b'"transitions": ["_start starting->done"]'),
        (["charts", "version"], b"stateDiagram-v2"),
        (["schema", "events", "version"], b'"$schema"'),
    ],
)
def test_the_chart_tools_run_through_zread_sim(argv: list[str], expected: bytes) -> None:
    done = run_cli(argv)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout


def test_zread_sim_coverage_reads_a_journal(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    ran = run_cli(["version", "--stdio", "--no-files", "--journal", str(journal)])
    assert ran.returncode == 0, ran.stderr
    done = run_cli(["coverage", str(journal), "--fail-under", "100"])
    assert done.returncode == 0, done.stderr
    assert b"version           1  2/2 100%     1/1 100%" in done.stdout


@pytest.mark.parametrize("tool", TOOLS)
def test_a_chart_tool_s_mistake_is_one_line_and_exit_2(tool: str) -> None:
    done = run_cli([tool, "no-such-thing", "--no-such-flag"])
    assert done.returncode == 2
    assert done.stderr.count(b"\n") == 1 and done.stderr.startswith(f"zread-sim {tool}: ".encode())


@pytest.mark.parametrize("odd", ["\n", "\x1b[31m", "\u2028", "\u202e", "\x85"])
def test_an_error_naming_a_hostile_path_stays_one_printable_line(tmp_path: Path, odd: str) -> None:
    scenario = tmp_path / f"a{odd}b.toml"
    scenario.write_text("not = [valid\n")
    result = run(tmp_path, ["generate", "--stdio", "--scenario", str(scenario)])
    assert result.rc == 2
    assert_one_line(result.stderr, "not valid TOML")
    line = result.stderr.removesuffix("\n")
    assert line.isprintable() and len(line.splitlines()) == 1
    assert ascii(odd)[1:-1] in line  # the character is shown, escaped


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (MemoryError(), "zread-sim: out of memory while running generate"),
        (
            RuntimeError("can't start new thread"),
            "zread-sim: out of threads while running generate",
        ),
        (
            OSError(24, "Too many open files", "x.py"),
            "zread-sim: out of file descriptors while running generate",
        ),
    ],
)
def test_out_of_memory_threads_or_descriptors_unnamed_is_one_line_exit_2(
    error: BaseException, line: str
) -> None:
    """Where no part of the run named its work, the command line names the command."""
    from simulator.cli.program import _exit_code

    err = io.StringIO()
    assert _exit_code(error, "zread-sim", err, doing="running generate") == 2
    assert err.getvalue().startswith(line)
    assert err.getvalue().count("\n") == 1


def test_out_of_descriptors_before_anything_named_it_names_the_command() -> None:
    """An import the command needs fails for want of a descriptor: one line, exit 2."""
    done = subprocess.run(
        ["bash", "-c", f"ulimit -n 5; exec {sys.executable} -m simulator generate --stdio -y"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "ZREAD_SIM_SERVER"},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(
        r"zread-sim: out of file descriptors while [a-z' .]+ \(ulimit -n is 5\)\n", done.stderr
    ), done.stderr
