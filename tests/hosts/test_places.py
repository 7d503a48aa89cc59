"""HOME and the project, checked before a run's first event, in real folders."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from simulator.errors import ConfigurationError
from simulator.hosts.dirfd import FilesError
from simulator.hosts.places import check_places


def state(root: Path) -> dict[str, int]:
    """Every entry at and below ``root`` with its mtime."""
    found = {".": os.lstat(root).st_mtime_ns}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = os.lstat(path).st_mtime_ns
    return found


def test_a_missing_project_is_refused_and_not_created(tmp_path: Path) -> None:
    for project in (tmp_path / "nope", tmp_path / "typo" / "deep" / "proj"):
        with pytest.raises(FilesError) as caught:
            check_places(None, project, {"project"}, home_named=False)
        assert str(caught.value) == f"project {project}: no such folder; zread-sim creates none"
        assert isinstance(caught.value, ConfigurationError)
    assert os.listdir(tmp_path) == []


def test_a_file_is_no_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(FilesError, match=r"^home .*/f: not a folder$"):
        check_places(tmp_path / "f", None, (), home_named=True)


def test_a_writable_project_passes_and_is_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / ".zread" / "wiki").mkdir(parents=True)
    before = state(tmp_path)
    check_places(None, tmp_path, {"project"}, home_named=False)  # probed in .zread/wiki
    assert state(tmp_path) == before
    (tmp_path / ".zread" / "wiki").rmdir()
    (tmp_path / ".zread").rmdir()
    before = state(tmp_path)
    check_places(None, tmp_path, {"project"}, home_named=False)  # probed in the project
    assert state(tmp_path) == before == {".": before["."]}


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_proc_is_refused_where_the_command_writes_and_fine_where_it_reads() -> None:
    with pytest.raises(FilesError) as caught:
        check_places(None, Path("/proc"), {"project"}, home_named=False)
    assert str(caught.value).startswith("project /proc: cannot be written: ")
    assert "failed: " in str(caught.value)
    check_places(None, Path("/proc"), (), home_named=False)  # browse only reads
    with pytest.raises(FilesError, match=r"^home /proc: cannot be written: "):
        check_places(Path("/proc"), None, {"home"}, home_named=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a folder without w")
def test_a_folder_without_write_permission_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    try:
        with pytest.raises(
            FilesError, match=r"cannot be written: creating a file in .*: Permission"
        ):
            check_places(home, None, {"home"}, home_named=True)
    finally:
        home.chmod(0o755)


def test_home_from_the_environment_may_be_missing_unless_it_is_written(tmp_path: Path) -> None:
    home = tmp_path / "gone"
    check_places(home, None, {"project"}, home_named=False)  # generate: nothing there
    with pytest.raises(FilesError, match=r"^home .*gone: no such folder"):
        check_places(home, None, {"home"}, home_named=False)  # config, login write it
    with pytest.raises(FilesError, match=r"^home .*gone: no such folder"):
        check_places(home, None, (), home_named=True)  # named: a typo
    assert os.listdir(tmp_path) == []


def test_out_of_descriptors_is_raised_not_called_an_unwritable_folder(tmp_path: Path) -> None:
    from tests.e2e.helpers import run_starved

    done = run_starved(
        "from pathlib import Path\nfrom simulator.hosts.places import check_writable",
        "try:\n"
        f"    check_writable(Path({str(tmp_path)!r}), 'home')\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, getattr(err, 'errno', None))\n",
        spare=0,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"OSError {errno.EMFILE}\n"  # not FilesError: the folder is fine
