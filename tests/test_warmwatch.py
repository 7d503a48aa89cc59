"""Tests for simulator.warmwatch: a package stamp over real files (an edit, a new file at
the name, a file gone are changes; a read is not), the files a process loaded from a
package folder, a distribution's metadata on a path, and a watch's ends on a clock the
test gives (idle only when nothing runs, the looks once a period, a socket moved)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from simulator import warmwatch
from simulator.warmwatch import WATCH_PERIOD, PackageStamp, Watch


def _files(tmp_path: Path) -> list[str]:
    made = []
    for name in ("a.py", "b.py"):
        path = tmp_path / name
        path.write_text("x = 1\n")
        made.append(str(path))
    return made


def test_a_stamp_is_unchanged_until_a_file_is_edited(tmp_path: Path) -> None:
    files = _files(tmp_path)
    stamp = PackageStamp(files)
    Path(files[0]).read_text()  # a read changes nothing
    assert stamp.changed() == ""
    info = os.stat(files[1])
    os.utime(files[1], ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    assert stamp.changed() == files[1]


def test_a_file_written_anew_at_its_name_or_gone_is_a_change(tmp_path: Path) -> None:
    files = _files(tmp_path)
    stamp = PackageStamp(files)
    info = os.stat(files[0])
    fresh = tmp_path / "new"
    fresh.write_text("x = 1\n")
    os.utime(fresh, ns=(info.st_atime_ns, info.st_mtime_ns))  # same size and time
    os.replace(fresh, files[0])  # as pip writes a file: a new inode
    assert stamp.changed() == files[0]
    stamp = PackageStamp(files)
    os.unlink(files[1])
    assert stamp.changed() == files[1]


def test_the_loaded_files_are_this_processes_modules_under_the_package_folders() -> None:
    root = warmwatch.package_root()
    loaded = warmwatch.loaded_files(root)
    assert warmwatch.__file__ in loaded
    assert all(
        f.startswith(os.path.join(root, "simulator") + os.sep) or "statecharts" in f for f in loaded
    )
    assert os.__file__ not in loaded


def test_metadata_files_are_those_of_the_distribution_on_the_path(tmp_path: Path) -> None:
    (tmp_path / "zread_sim-1.0.dist-info").mkdir()
    (tmp_path / "other-1.0.dist-info").mkdir()
    found = warmwatch.metadata_files([str(tmp_path), str(tmp_path / "missing")])
    info = tmp_path / "zread_sim-1.0.dist-info"
    assert found == [str(info / "METADATA"), str(info / "RECORD")]


def test_the_stamp_taken_covers_this_process_and_is_unchanged() -> None:
    stamp = PackageStamp.taken()
    assert warmwatch.__file__ in stamp.keys
    assert stamp.changed() == ""
    assert sys.modules["simulator"].__file__ in stamp.keys


def test_idle_ends_only_when_nothing_runs_for_the_whole_time() -> None:
    watch = Watch(100.0, idle=5.0)
    assert watch.deadline(busy=False) == 105.0
    assert watch.deadline(busy=True) is None  # a run in progress keeps it up
    assert watch.ended(104.9, busy=False) == ""
    assert watch.ended(106.0, busy=True) == ""
    watch.active(106.0)  # a run ended
    assert watch.ended(110.9, busy=False) == ""
    assert watch.ended(111.0, busy=False) == "idle"


def test_a_watch_without_ends_never_ends() -> None:
    watch = Watch(0.0)
    assert watch.deadline(busy=False) is None
    assert watch.ended(10**9, busy=False) == ""


def test_a_changed_package_is_seen_at_the_next_look(tmp_path: Path) -> None:
    files = _files(tmp_path)
    watch = Watch(0.0, stamp=PackageStamp(files))
    assert watch.deadline(busy=True) == WATCH_PERIOD  # looked at even while busy
    os.unlink(files[0])
    assert watch.ended(WATCH_PERIOD / 2, busy=True) == ""  # not yet time to look
    assert watch.ended(WATCH_PERIOD, busy=True) == "changed"
    assert watch.looked() == "changed"  # and asked at once, before a launch is answered


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_socket_no_longer_at_its_path_is_moved(tmp_path: Path, how: str) -> None:
    path = tmp_path / "s.sock"
    bound = socket.socket(socket.AF_UNIX)
    bound.bind(str(path))
    try:
        watch = Watch(0.0, socket_path=str(path))
        assert watch.looked() == ""
        path.unlink()
        if how == "replaced":
            other = tmp_path / "other"
            other.write_text("")
            other.rename(path)
        assert watch.ended(WATCH_PERIOD, busy=False) == "moved"
    finally:
        bound.close()
