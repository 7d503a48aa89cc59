"""Fixtures the store's tests share: a HOME of their own, in a real directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME (``tmp_path/home``): zread's user side starts with no ``.zread/``."""
    path = tmp_path / "home"
    path.mkdir()
    return path
