"""Tests of ``simulator/tools/schema.py``: the schemas by command name, the published
files are current, and ``zread-sim schema`` prints or writes them.

What the schemas hold, against real sessions, is tested with their building
(``tests/tools/test_schema_build.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from simulator.tools import schema_build
from simulator.tools.schema import (
    REGENERATE,
    SchemaError,
    command_schema,
    doc_files,
    event_schema,
    main,
    render,
    write_docs,
)
from simulator.tools.schema_build import scenario_schema
from statecharts import COMMANDS, load_chart

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "docs" / "schema"


# -- by command name -----------------------------------------------------------------------


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_s_schemas_are_those_of_its_compiled_chart(command: str) -> None:
    chart = load_chart(command)
    assert event_schema(command) == schema_build.event_schema(chart)
    assert command_schema(command) == schema_build.command_schema(chart)


@pytest.mark.parametrize("build", [event_schema, command_schema])
def test_an_unknown_command_is_the_user_s_mistake(build: Callable[[str], object]) -> None:
    with pytest.raises(SchemaError, match="unknown zread command 'deploy' \\(one of: browse"):
        build("deploy")


# -- the published files -------------------------------------------------------------------


def test_published_schemas_are_current() -> None:
    expected = doc_files()
    published = {path.name for path in SCHEMA_DIR.glob("*.json")}
    assert published == set(expected), (
        f"docs/schema holds other files: regenerate with {REGENERATE}"
    )
    for name, text in expected.items():
        current = (SCHEMA_DIR / name).read_text(encoding="utf-8")
        assert current == text, f"docs/schema/{name} is stale: regenerate with {REGENERATE}"


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    for text in doc_files().values():
        schema = json.loads(text)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert "$id" not in text
        Draft202012Validator.check_schema(schema)


def test_the_readme_names_every_file_and_the_regenerate_command() -> None:
    readme = (SCHEMA_DIR / "README.md").read_text(encoding="utf-8")
    assert REGENERATE in readme
    for name in ("events-<command>.json", "commands-<command>.json", "scenario.json"):
        assert name in readme
    for command in COMMANDS:
        assert f"`{command}`" in readme
    assert "#:schema" in readme


def test_write_docs_writes_the_files_as_published(tmp_path: Path) -> None:
    written = write_docs(tmp_path / "out")
    assert sorted(Path(p).name for p in written) == sorted(doc_files())
    for path in written:
        assert Path(path).read_bytes() == (SCHEMA_DIR / Path(path).name).read_bytes()


# -- the command line -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "schema"),
    [
        (["events", "generate"], lambda: event_schema("generate")),
        (["commands", "login"], lambda: command_schema("login")),
        (["scenario"], scenario_schema),
    ],
)
def test_main_prints_the_schema(
    argv: list[str], schema: Callable[[], dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == render(schema()) and err == ""
    assert out.endswith("}\n") and '\n  "$schema"' in out


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["events", "deploy"], "unknown zread command 'deploy'"),
        (["commands"], "COMMAND"),
        (["scenario", "extra"], "unrecognized arguments: extra"),
        (["schemas"], "invalid choice: 'schemas'"),
        ([], "expected one of"),
        (["--write"], "expected one argument"),
        (["--write", "out", "scenario"], "expected one of"),
    ],
)
def test_main_refuses_a_bad_argument_in_one_line(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("zread-sim schema: ") and err.count("\n") == 1, err
    assert reason in err


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["events", "--help"]])
def test_main_help_exits_0(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    assert "\nUsage:\n  zread-sim schema" in capsys.readouterr().out


def test_main_write_writes_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--write", str(tmp_path / "schema")]) == 0
    assert sorted(p.name for p in (tmp_path / "schema").iterdir()) == sorted(doc_files())
    assert capsys.readouterr().out.count("\n") == len(doc_files())


def test_main_write_to_a_file_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    assert main(["--write", str(blocker)]) == 2  # the environment refused, as elsewhere
    err = capsys.readouterr().err
    assert err.startswith(f"zread-sim schema: cannot write {blocker}") and err.count("\n") == 1
