"""Every bad value is named in the simulator's words: never Python's, never a traceback.

Each case is a real process given one bad flag, variable, scenario, file in HOME or in
the project, or tool argument. It must end with its exit code (2: the user's or the
environment's), one line on stderr that names what it is about (the flag, the file,
the key), and nothing that :data:`PYTHON` recognises: the phrases of Python's and its
libraries' exceptions, which tell a user nothing about their input.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PYTHON = re.compile(
    r"Traceback|Error:|Exception|invalid literal for|\b(int|float|str)\(\)|sys\.set_int_max"
    r"|Exceeds the limit|Errno|Expecting (value|property name|',' delimiter)"
    r"|line \d+ column \d+ \(char \d+\)|has no attribute|NoneType|not subscriptable"
    r"|unhashable|codec can't|too large to convert|maximum recursion depth|rmtree"
    r"|Expected `|Object (contains unknown|missing required) field|Invalid enum value"
)
"""Phrases only Python or a library speaks (``ValueError:``, ``[Errno 28]``, json's and
msgspec's wording, int()'s limit on digits)."""

HUGE = "9" * 5000


@dataclass
class Case:
    argv: list[str]
    names: str
    """What the one line must name."""
    files: dict[str, str] = field(default_factory=dict)
    """Paths (under the test's folder) and their texts, written first."""
    env: dict[str, str] = field(default_factory=dict)
    code: int = 2


SESSION = ["generate", "--stdio", "--no-files"]
HOME = ["--home", "home", "--project", "proj"]

CASES = {
    "seed-word": Case([*SESSION, "--seed", "abc"], "--seed"),
    "seed-huge": Case([*SESSION, "--seed", HUGE], "--seed"),
    "speed-nan": Case([*SESSION, "--speed", "nan"], "--speed"),
    "speed-word": Case([*SESSION, "--speed", "fast"], "--speed"),
    "port-word": Case(["browse", "--stdio", "--no-files", "--port", "x"], "--port"),
    "port-huge": Case(["browse", "--stdio", "--no-files", "--port", HUGE], "--port"),
    "control-word": Case([*SESSION, "--control", "tcp"], "--control"),
    "control-dir": Case([*SESSION, "--control", "unix:none/x.sock"], "none/x.sock"),
    "journal-dir": Case([*SESSION, "--journal", "none/j.jsonl"], "none/j.jsonl"),
    "home-file": Case(["generate", "--stdio", "--home", "a-file"], "a-file", {"a-file": "x"}),
    "project-file": Case(["generate", "--stdio", "--project", "a-file"], "a-file", {"a-file": "x"}),
    "scenario-unknown": Case([*SESSION, "--scenario", "nosuch"], "nosuch"),
    "scenario-folder": Case(
        [*SESSION, "--scenario", "proj/s.toml"], "s.toml", {"proj/s.toml/x": ""}
    ),
    "scenario-type": Case(
        [*SESSION, "--scenario", "s.toml"], "speed", {"s.toml": 'speed = "fast"\n'}
    ),
    "scenario-digits": Case(
        [*SESSION, "--scenario", "s.toml"], "s.toml", {"s.toml": f"seed = {HUGE}\n"}
    ),
    "scenario-key": Case(
        [*SESSION, "--scenario", "s.toml"],
        "world.project.colour",
        {"s.toml": "[world.project]\ncolour = 1\n"},
    ),
    "scenario-table": Case(
        [*SESSION, "--scenario", "s.toml"], "timing.page", {"s.toml": '[timing]\npage = "x"\n'}
    ),
    "scenario-toml": Case([*SESSION, "--scenario", "s.toml"], "s.toml", {"s.toml": "a = \n"}),
    "scenario-utf8": Case([*SESSION, "--scenario", "s.toml"], "s.toml", {"s.toml": "a = '\udcff'"}),
    "variable-seed": Case(SESSION, "ZREAD_SIM_SEED", env={"ZREAD_SIM_SEED": HUGE}),
    "variable-speed": Case(SESSION, "ZREAD_SIM_SPEED", env={"ZREAD_SIM_SPEED": "1e999"}),
    "variable-files": Case(
        ["generate", "--stdio"], "ZREAD_SIM_FILES", env={"ZREAD_SIM_FILES": "?"}
    ),
    "config-yaml": Case(
        ["config", "--stdio", *HOME], "config.yaml", {"home/.zread/config.yaml": "llm: [1\n"}
    ),
    "config-digits": Case(
        ["config", "--stdio", *HOME],
        "config.yaml",
        {"home/.zread/config.yaml": f"max_retries: {HUGE}\n"},
    ),
    "login-json": Case(
        ["login", "--stdio", *HOME], "login.json", {"home/.zread/login.json": "{'user'"}
    ),
    "login-type": Case(
        ["login", "--stdio", *HOME], "username", {"home/.zread/login.json": '{"username": 3}'}
    ),
    "wiki-json": Case(
        ["browse", "--stdio", "--port", "0", *HOME],
        "wiki.json",
        {"proj/.zread/wiki/current": "v1", "proj/.zread/wiki/versions/v1/wiki.json": "[1"},
    ),
    "journal-tool": Case(["journal", "j.jsonl"], "j.jsonl", {"j.jsonl": "{nope\n"}),
    "journal-tool-missing": Case(["journal", "none.jsonl"], "none.jsonl"),
    "check-tool": Case(["check", "c.json"], "c.json", {"c.json": "[1, 2"}),
    "coverage-tool": Case(["coverage", "j.jsonl"], "j.jsonl", {"j.jsonl": "[]\n"}),
    "load-huge": Case(["load", "generate", "--sessions", HUGE], "--sessions"),
    "load-seed": Case(["load", "generate", "--sessions", "1", "--seed", HUGE], "--seed"),
    "install-file": Case(["install", "a-file"], "a-file", {"a-file": "x"}),
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_bad_value_is_one_line_in_the_simulators_words(case: Case, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "proj").mkdir()
    _write(tmp_path, case.files)
    env = {**os.environ, "HOME": str(tmp_path / "home"), **case.env}
    env.pop("ZREAD_SIM_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "simulator", *case.argv],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == case.code, err
    assert len(err.splitlines()) == 1, err
    assert case.names in err, err
    assert not PYTHON.search(err), err


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: invalid literal for int() with base 10: 'abc'",
        "Exceeds the limit (4300 digits) for integer string conversion; use "
        "sys.set_int_max_str_digits() to increase the limit",
        "[Errno 28] No space left on device",
        "Expecting value: line 1 column 1 (char 0)",
        "Cannot call rmtree on a symbolic link",
        "Expected `int`, got `str` - at `$.a`",
        "Traceback (most recent call last):",
    ],
)
def test_the_pattern_knows_pythons_phrases(text: str) -> None:
    assert PYTHON.search(text)
