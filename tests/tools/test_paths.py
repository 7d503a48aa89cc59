"""Tests for simulator.tools.paths: the cases of a command by name, written as JSON
lines or as a pytest module that passes against the simulator, and the command line.

What the cases are, and how they are found, is tested with the search
(``tests/tools/test_paths_search.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml  # noqa: F401 - see below

from simulator.tools.paths import PathsError, main, paths, pytest_module
from simulator.tools.paths_search import Case
from statecharts import COMMANDS
from tests.tools.pathcases import cases_of

pytest_plugins = ["pytester"]
# PyYAML is imported before the inline runs below: pytester takes out of sys.modules what
# a run imported, while simulator.formats.yamlv3 keeps the classes of its first import,
# so a later `import yaml` would raise errors the module no longer catches.


def test_paths_by_name_are_the_cases_the_search_finds() -> None:
    found, left = paths("config")
    assert (found, left) == (list(cases_of("config")), [])


def test_paths_of_an_unknown_command_is_the_user_s_mistake() -> None:
    with pytest.raises(PathsError, match="unknown command 'nope' \\(one of browse, generate"):
        paths("nope")


def test_the_pytest_module_passes_against_the_simulator(pytester: pytest.Pytester) -> None:
    for command in COMMANDS:
        pytester.makepyfile(**{f"test_paths_{command}": pytest_module(command, cases_of(command))})
    result = pytester.runpytest("-p", "no:cacheprovider", "--zread-coverage")
    result.assert_outcomes(passed=sum(len(cases_of(c)) for c in COMMANDS))
    result.stdout.fnmatch_lines(["zread coverage: * transitions 100.0% of the commands run"])


def test_the_pytest_module_fails_when_the_path_is_not_taken(pytester: pytest.Pytester) -> None:
    case = next(c for c in cases_of("update") if c.steps)
    data = case.as_json()
    data["transitions"] = [*data["transitions"], "download has_update->nowhere"]
    pytester.makepyfile(test_broken=pytest_module("update", [Case.from_json(data)]))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)


def test_main_writes_json_lines_or_a_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["name"] for line in lines] == [c.name for c in cases_of("config")]
    out = tmp_path / "test_config_paths.py"
    assert main(["config", "--format", "pytest", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    compile(text, str(out), "exec")
    assert "def test_path(zread_sim" in text


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["nope"], "unknown command 'nope' (one of browse, generate"),
        (["config", "--format", "svg"], "argument --format: invalid choice"),
        (["config", "--out", "/no/such/dir/x.py"], "/no/such/dir/x.py: No such file"),
    ],
)
def test_main_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zread-sim paths: ") and reason in err
