"""Tests of simulator/hosts/exchange.py: two names swapped at once, in real directories."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.hosts.exchange import exchange


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    descriptor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield descriptor
    os.close(descriptor)


def test_two_files_swap_names(tmp_path: Path, fd: int) -> None:
    (tmp_path / "new").write_bytes(b"new")
    (tmp_path / "current").write_bytes(b"old")
    inode = (tmp_path / "new").stat().st_ino
    assert exchange(fd, "new", "current")
    assert (tmp_path / "current").read_bytes() == b"new"
    assert (tmp_path / "current").stat().st_ino == inode  # the very file, not a copy
    assert (tmp_path / "new").read_bytes() == b"old"


def test_a_link_swaps_as_a_link(tmp_path: Path, fd: int) -> None:
    (tmp_path / "target").write_bytes(b"target")
    (tmp_path / "current").symlink_to(tmp_path / "target")
    (tmp_path / "new").write_bytes(b"new")
    assert exchange(fd, "new", "current")
    assert (tmp_path / "new").is_symlink() and not (tmp_path / "current").is_symlink()
    assert (tmp_path / "target").read_bytes() == b"target"


def test_nothing_to_swap_with_is_false_and_changes_nothing(tmp_path: Path, fd: int) -> None:
    (tmp_path / "new").write_bytes(b"new")
    assert not exchange(fd, "new", "current")
    assert sorted(os.listdir(tmp_path)) == ["new"]


def test_a_missing_first_name_is_false_too(tmp_path: Path, fd: int) -> None:
    (tmp_path / "current").write_bytes(b"old")
    assert not exchange(fd, "new", "current")
    assert (tmp_path / "current").read_bytes() == b"old"


def test_another_failure_is_raised(tmp_path: Path) -> None:
    not_a_directory = os.open(__file__, os.O_RDONLY)
    try:
        with pytest.raises(NotADirectoryError):
            exchange(not_a_directory, "a", "b")
    finally:
        os.close(not_a_directory)
