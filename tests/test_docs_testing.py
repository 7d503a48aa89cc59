"""Every ```python example of docs/testing.md (and every test example of the README and
of docs/control.md) runs, and passes.

An example with a ``def test_`` is a test file: it runs under pytester (inline, with
the installed plugin and no conftest) and each of its tests must pass. Any other
example is a script: it runs with this interpreter in a fresh process and must exit 0.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks() -> list[str]:
    return _BLOCK.findall(DOC.read_text(encoding="utf-8"))


def block_id(block: str) -> str:
    name = re.search(r"^(?:async )?def (\w+)", block, re.MULTILINE)
    return name.group(1) if name else block.strip().splitlines()[-1][:40]


BLOCKS = python_blocks()
TESTS = [block for block in BLOCKS if "def test_" in block]
SCRIPTS = [block for block in BLOCKS if "def test_" not in block]


def test_the_doc_has_examples_of_both_kinds() -> None:
    assert len(TESTS) >= 8 and len(SCRIPTS) >= 3
    text = DOC.read_text(encoding="utf-8")
    assert text.count("```python") == len(BLOCKS)  # no block the pattern missed
    for needed in ("zread_sim", "zread_bin", "spawn_async", "violations", "monkeypatch"):
        assert needed in text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", TESTS, ids=[block_id(b) for b in TESTS])
def test_test_example_passes(block: str, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_example=block)
    result = pytester.runpytest("-p", "no:cacheprovider")
    passed = len(re.findall(r"^def test_", block, re.MULTILINE))
    assert passed >= 1
    result.assert_outcomes(passed=passed)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", SCRIPTS, ids=[block_id(b) for b in SCRIPTS])
def test_script_example_runs(block: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, timeout=60, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


README = DOC.parent.parent / "README.md"
README_TESTS = [b for b in _BLOCK.findall(README.read_text(encoding="utf-8")) if "def test_" in b]


def test_the_readme_has_a_test_example() -> None:
    assert README_TESTS


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", README_TESTS, ids=[block_id(b) for b in README_TESTS])
def test_readme_test_example_passes(block: str, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_readme_example=block)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(re.findall(r"^def test_", block, re.MULTILINE)))


CONTROL = DOC.parent / "control.md"
CONTROL_TESTS = [b for b in _BLOCK.findall(CONTROL.read_text(encoding="utf-8")) if "def test_" in b]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", CONTROL_TESTS, ids=[block_id(b) for b in CONTROL_TESTS])
def test_control_test_example_passes(block: str, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_control_example=block)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(re.findall(r"^def test_", block, re.MULTILINE)))


def test_the_readme_scenario_example_loads(tmp_path: Path) -> None:
    from simulator.scenario import load_scenario

    blocks = re.findall(r"^```toml\n(.*?)^```$", README.read_text(encoding="utf-8"), re.S | re.M)
    assert blocks
    for index, block in enumerate(blocks):
        path = tmp_path / f"readme{index}.toml"
        path.write_text(block, encoding="utf-8")
        scenario = load_scenario(str(path))
        assert scenario.description
        assert scenario.world.project.pages == 40
