"""Fixtures the store's tests share: a HOME and a project of their own, in real
directories (a module may replace ``project`` with a bare one)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME (``tmp_path/home``): zread's user side starts with no ``.zread/``."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with two text files a page can cite: ``README.md`` (3 lines) and
    ``src/app.py`` (40)."""
    path = tmp_path / "project"
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 41)))
    (path / "README.md").write_text("# widget\n\nA widget.\n")
    return path
