"""Tests of simulator/hosts/dirfd.py: files inside a directory that may hold planted
links, by descriptor, in real temporary directories."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.errors import ConfigurationError
from simulator.hosts.dirfd import (
    TEMP_SUFFIX,
    FilesError,
    LinkRefused,
    entries,
    flock,
    is_temp,
    is_temp_of,
    open_dir,
    open_path,
    read_file,
    remove_tree,
    replace_file,
    try_flock,
)
from tests.e2e.helpers import run_starved


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def fd(root: Path) -> Iterator[int]:
    """An open descriptor of ``root``."""
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def is_open(descriptor: int) -> bool:
    try:
        os.fstat(descriptor)
    except OSError:
        return False
    return True


def test_the_errors() -> None:
    assert issubclass(FilesError, ConfigurationError)
    assert issubclass(LinkRefused, FilesError)
    # the user's setup, never an OSError a caller might take for a passing fault
    assert not issubclass(LinkRefused, OSError) and not issubclass(FilesError, OSError)


# -- open_dir -----------------------------------------------------------------------------


def test_open_dir_opens_a_directory(root: Path, fd: int) -> None:
    (root / "wiki").mkdir()
    (root / "wiki" / "inside").write_bytes(b"x")
    child = open_dir(fd, "wiki", str(root / "wiki"))
    assert child is not None
    try:
        assert stat.S_ISDIR(os.fstat(child).st_mode)
        assert os.fstat(child).st_ino == (root / "wiki").stat().st_ino
        assert [name for name, _, _ in entries(child)] == ["inside"]
    finally:
        os.close(child)


def test_open_dir_of_a_missing_directory_is_none(root: Path, fd: int) -> None:
    assert open_dir(fd, "wiki", "where") is None
    assert names(root) == []


def test_open_dir_creates_a_missing_directory_when_asked(root: Path, fd: int) -> None:
    old_umask = os.umask(0o022)
    try:
        child = open_dir(fd, "wiki", "where", create=True)
    finally:
        os.umask(old_umask)
    assert child is not None
    try:
        assert (root / "wiki").is_dir() and not (root / "wiki").is_symlink()
        assert stat.S_IMODE((root / "wiki").stat().st_mode) == 0o755
        assert os.fstat(child).st_ino == (root / "wiki").stat().st_ino
    finally:
        os.close(child)
    again = open_dir(fd, "wiki", "where", create=True)  # an existing one is opened
    assert again is not None
    os.close(again)


@pytest.mark.parametrize("create", [False, True])
def test_open_dir_refuses_a_symlinked_directory(root: Path, fd: int, create: bool) -> None:
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir()
    (root / "wiki").symlink_to(elsewhere)
    where = "/some/project/.zread/wiki"
    with pytest.raises(LinkRefused) as caught:
        open_dir(fd, "wiki", where, create=create)
    message = str(caught.value)
    assert message.startswith(f"{where}: a symbolic link")
    assert "never follows a link" in message
    assert names(elsewhere) == []
    assert (root / "wiki").is_symlink()


def test_open_dir_refuses_a_dangling_link_and_creates_nothing(root: Path, fd: int) -> None:
    (root / "wiki").symlink_to(root.parent / "missing")
    with pytest.raises(LinkRefused, match=r"^here: a symbolic link"):
        open_dir(fd, "wiki", "here", create=True)
    assert not (root.parent / "missing").exists()
    assert (root / "wiki").is_symlink()


def test_open_dir_refuses_a_file(root: Path, fd: int) -> None:
    (root / "wiki").write_bytes(b"not a directory")
    for create in (False, True):
        with pytest.raises(FilesError, match=r"^here: not a directory; zread-sim writes"):
            open_dir(fd, "wiki", "here", create=create)
    assert (root / "wiki").read_bytes() == b"not a directory"


# -- read_file ----------------------------------------------------------------------------


def test_read_file_reads_a_regular_file(root: Path, fd: int) -> None:
    (root / "current").write_bytes(b"versions/2026-04-06-130213")
    assert read_file(fd, "current", 4096) == b"versions/2026-04-06-130213"
    (root / "empty").write_bytes(b"")
    assert read_file(fd, "empty", 10) == b""


@pytest.mark.parametrize(("size", "limit", "read"), [(10, 4, 5), (5, 4, 5), (4, 4, 4), (3, 0, 1)])
def test_read_file_reads_at_most_one_byte_past_the_limit(
    root: Path, fd: int, size: int, limit: int, read: int
) -> None:
    data = bytes(range(size))
    (root / "f").write_bytes(data)
    assert read_file(fd, "f", limit) == data[:read]


def test_read_file_reads_a_large_file_in_pieces_up_to_the_limit(root: Path, fd: int) -> None:
    data = os.urandom(3 * (1 << 20) + 17)
    (root / "big").write_bytes(data)
    assert read_file(fd, "big", 2 * (1 << 20) + 5) == data[: 2 * (1 << 20) + 6]
    assert read_file(fd, "big", 8 << 20) == data


def test_read_file_of_a_missing_file_is_none(fd: int) -> None:
    assert read_file(fd, "missing", 100) is None


def test_read_file_does_not_follow_a_link_even_to_a_regular_file(root: Path, fd: int) -> None:
    target = root.parent / "secret"
    target.write_bytes(b"secret")
    (root / "current").symlink_to(target)
    (root / "inside").write_bytes(b"inside")
    (root / "relative").symlink_to("inside")
    assert read_file(fd, "current", 100) is None
    assert read_file(fd, "relative", 100) is None
    assert read_file(fd, "inside", 100) == b"inside"


def test_read_file_of_a_directory_is_none(root: Path, fd: int) -> None:
    (root / "wiki.json").mkdir()
    assert read_file(fd, "wiki.json", 100) is None


def test_read_file_of_a_fifo_is_none_and_does_not_block(root: Path, fd: int) -> None:
    os.mkfifo(root / "current")
    result: list[bytes | None] = []
    reader = threading.Thread(target=lambda: result.append(read_file(fd, "current", 100)))
    started = time.monotonic()
    reader.start()
    reader.join(5)
    if reader.is_alive():  # pragma: no cover - unblock the reader before failing
        with open(root / "current", "wb"):
            pass
        reader.join(5)
        pytest.fail("read_file blocked on a FIFO")
    assert result == [None]
    assert time.monotonic() - started < 5


# -- replace_file -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o640, 0o755])
@pytest.mark.parametrize("umask", [0o077, 0o022, 0o000])
def test_replace_file_writes_the_bytes_with_the_exact_mode(
    root: Path, fd: int, mode: int, umask: int
) -> None:
    old_umask = os.umask(umask)
    try:
        replace_file(fd, "config.yaml", b"one")
        first_mode = stat.S_IMODE((root / "config.yaml").stat().st_mode)
        replace_file(fd, "config.yaml", b"two", mode)
    finally:
        os.umask(old_umask)
    assert first_mode == 0o644  # the default
    assert (root / "config.yaml").read_bytes() == b"two"
    assert stat.S_IMODE((root / "config.yaml").stat().st_mode) == mode
    assert names(root) == ["config.yaml"]


def test_replace_file_replaces_the_file_at_once(root: Path, fd: int) -> None:
    (root / "current").write_bytes(b"old")
    old_inode = (root / "current").stat().st_ino
    with open(root / "current", "rb") as reader:
        replace_file(fd, "current", b"new")
        assert reader.read() == b"old"  # an open reader keeps the old file whole
    assert (root / "current").read_bytes() == b"new"
    assert (root / "current").stat().st_ino != old_inode


def test_replace_file_writes_large_data(root: Path, fd: int) -> None:
    data = os.urandom(5 * (1 << 20) + 3)
    replace_file(fd, "page.md", data)
    assert (root / "page.md").read_bytes() == data
    replace_file(fd, "page.md", b"")
    assert (root / "page.md").read_bytes() == b""


def test_replace_file_replaces_a_link_and_leaves_its_target(root: Path, fd: int) -> None:
    target = root.parent / "elsewhere"
    target.write_bytes(b"target")
    target.chmod(0o640)
    (root / "config.yaml").symlink_to(target)
    replace_file(fd, "config.yaml", b"new", 0o600)
    assert not (root / "config.yaml").is_symlink()
    assert (root / "config.yaml").is_file()
    assert (root / "config.yaml").read_bytes() == b"new"
    assert target.read_bytes() == b"target"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_replace_file_replaces_a_dangling_link_and_creates_no_target(root: Path, fd: int) -> None:
    (root / "current").symlink_to(root.parent / "missing" / "file")
    replace_file(fd, "current", b"versions/x")
    assert not (root / "current").is_symlink()
    assert (root / "current").read_bytes() == b"versions/x"
    assert not (root.parent / "missing").exists()


def test_replace_file_leaves_nothing_behind_when_the_data_is_not_bytes(root: Path, fd: int) -> None:
    (root / "current").write_bytes(b"old")
    with pytest.raises(TypeError):
        replace_file(fd, "current", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        replace_file(fd, "current", None)  # type: ignore[arg-type]
    assert (root / "current").read_bytes() == b"old"
    assert names(root) == ["current"]


def test_replace_file_leaves_nothing_behind_when_the_rename_fails(root: Path, fd: int) -> None:
    (root / "wiki.json").mkdir()
    (root / "wiki.json" / "inside").write_bytes(b"kept")
    with pytest.raises(FilesError, match=r"^/p/wiki\.json: cannot write: "):
        replace_file(fd, "wiki.json", b"{}", where="/p/wiki.json")
    assert names(root) == ["wiki.json"]
    assert names(root / "wiki.json") == ["inside"]


def test_replace_file_leaves_nothing_behind_when_the_mode_is_refused(root: Path, fd: int) -> None:
    (root / "current").write_bytes(b"old")
    with pytest.raises(OverflowError):
        replace_file(fd, "current", b"new", 1 << 64)
    assert (root / "current").read_bytes() == b"old"
    assert names(root) == ["current"]


def test_replace_file_into_a_directory_that_is_gone_raises(root: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    descriptor = os.open(gone, os.O_RDONLY | os.O_DIRECTORY)
    try:
        gone.rmdir()
        with pytest.raises(FilesError, match=r"^current: cannot write: No such file"):
            replace_file(descriptor, "current", b"x")
    finally:
        os.close(descriptor)
    assert not gone.exists()


class _Watching(threading.Thread):
    """Records every name seen in a directory until stopped."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.seen: set[str] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.seen.update(os.listdir(self.path))


@pytest.mark.parametrize("name", ["1-overview.md", "wiki.json", "current", "x"])
def test_the_temporary_names_are_temp_and_never_pages(root: Path, fd: int, name: str) -> None:
    data = b"x" * (16 << 20)  # long enough a write for another thread to list it
    watcher = _Watching(root)
    watcher.start()
    deadline = time.monotonic() + 20
    try:
        while not watcher.seen - {name} and time.monotonic() < deadline:
            replace_file(fd, name, data)
    finally:
        watcher.stop.set()
        watcher.join(5)
    temporary = watcher.seen - {name}
    assert temporary, "no temporary file was ever seen"
    for seen in temporary:
        assert is_temp(seen)
        assert not seen.endswith(".md")
        assert seen.startswith(f".{name}.") and seen.endswith(TEMP_SUFFIX)
    assert names(root) == [name]


@pytest.mark.parametrize(
    ("name", "temp"),
    [
        (".x.0a1b2c3d.tmp", True),
        (".1-overview.md.0a1b2c3d.tmp", True),
        ("x.tmp", False),
        (".x.md", False),
        ("1-overview.md", False),
        ("wiki.json", False),
    ],
)
def test_is_temp(name: str, temp: bool) -> None:
    assert is_temp(name) is temp


# -- entries ------------------------------------------------------------------------------


def test_entries_lists_kinds_without_following_links(root: Path, fd: int) -> None:
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir()
    (root.parent / "file").write_bytes(b"x")
    (root / "wiki.json").write_bytes(b"{}")
    (root / "drafts").mkdir()
    (root / "to-dir").symlink_to(elsewhere)
    (root / "to-file").symlink_to(root.parent / "file")
    (root / "dangling").symlink_to(root.parent / "missing")
    os.mkfifo(root / "fifo")
    assert sorted(entries(fd)) == [
        ("dangling", False, False),
        ("drafts", False, True),
        ("fifo", False, False),
        ("to-dir", False, False),
        ("to-file", False, False),
        ("wiki.json", True, False),
    ]


def test_entries_of_an_empty_directory_and_the_descriptor_stays_usable(root: Path, fd: int) -> None:
    assert list(entries(fd)) == []
    (root / "a").write_bytes(b"")
    assert list(entries(fd)) == [("a", True, False)]
    assert list(entries(fd)) == [("a", True, False)]  # listed again from the start
    assert is_open(fd)


# -- remove_tree --------------------------------------------------------------------------


def test_remove_tree_removes_a_tree_and_not_what_a_link_in_it_names(root: Path, fd: int) -> None:
    outside = root.parent / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "keep.md").write_bytes(b"keep")
    (outside / "deep" / "also").write_bytes(b"also")
    draft = root / "drafts"
    (draft / "sub" / "subsub").mkdir(parents=True)
    (draft / "wiki.json").write_bytes(b"{}")
    (draft / "sub" / "subsub" / "page.md").write_bytes(b"page")
    (draft / "link").symlink_to(outside)
    (draft / "sub" / "link").symlink_to(outside / "keep.md")
    (draft / "sub" / "dangling").symlink_to(root.parent / "missing")
    remove_tree(fd, "drafts")
    assert names(root) == []
    assert names(outside) == ["deep", "keep.md"]
    assert (outside / "keep.md").read_bytes() == b"keep"
    assert (outside / "deep" / "also").read_bytes() == b"also"


def test_remove_tree_of_a_missing_directory_does_nothing(root: Path, fd: int) -> None:
    (root / "other").write_bytes(b"x")
    remove_tree(fd, "missing")
    assert names(root) == ["other"]


def test_remove_tree_of_a_link_removes_nothing_it_names(root: Path, fd: int) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"keep")
    (root / "drafts").symlink_to(outside)
    with contextlib.suppress(OSError):
        remove_tree(fd, "drafts")
    assert names(outside) == ["keep"]
    assert (outside / "keep").read_bytes() == b"keep"


# -- flock and try_flock ------------------------------------------------------------------


def _open(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def test_flock_excludes_another_descriptor_of_the_directory(root: Path, fd: int) -> None:
    other = _open(root)
    try:
        with flock(fd):
            assert try_flock(other) is False
            assert try_flock(other) is False
        assert try_flock(other) is True
    finally:
        os.close(other)
    assert names(root) == []


def test_flock_is_released_when_the_block_raises(root: Path, fd: int) -> None:
    with pytest.raises(RuntimeError), flock(fd):
        raise RuntimeError("inside")
    other = _open(root)
    try:
        assert try_flock(other) is True
    finally:
        os.close(other)


def test_flock_waits_for_the_holder(root: Path, fd: int) -> None:
    holder = _open(root)
    assert try_flock(holder) is True
    order: list[str] = []

    def wait_then_hold() -> None:
        with flock(fd):
            order.append("waiter in")

    waiter = threading.Thread(target=wait_then_hold)
    waiter.start()
    time.sleep(0.1)
    order.append("holder out")
    os.close(holder)
    waiter.join(5)
    assert not waiter.is_alive()
    assert order == ["holder out", "waiter in"]


def test_try_flock_is_held_until_the_descriptor_closes(root: Path) -> None:
    first, second = _open(root), _open(root)
    try:
        try:
            assert try_flock(first) is True
            assert try_flock(second) is False
        finally:
            os.close(first)
        assert try_flock(second) is True
        third = _open(root)
        try:
            assert try_flock(third) is False
        finally:
            os.close(third)
    finally:
        os.close(second)


def test_a_lock_on_one_directory_does_not_lock_another(root: Path, tmp_path: Path) -> None:
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    first, second = _open(root), _open(sibling)
    try:
        assert try_flock(first) is True
        assert try_flock(second) is True
    finally:
        os.close(first)
        os.close(second)


def test_no_lock_file_is_ever_created(root: Path, fd: int) -> None:
    (root / "wiki.json").write_bytes(b"{}")
    before = names(root)
    with flock(fd):
        assert names(root) == before
    other = _open(root)
    try:
        assert try_flock(other) is True
        assert names(root) == before
    finally:
        os.close(other)
    assert names(root) == before
    assert names(root.parent) == ["root"]


def test_remove_tree_removes_a_tree_thousands_deep_without_recursion(root: Path, fd: int) -> None:
    cur = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    os.mkdir("deep", dir_fd=cur)
    nxt = os.open("deep", os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
    os.close(cur)
    for _ in range(3000):  # deeper than Python's recursion limit
        os.mkdir("a", dir_fd=nxt)
        child = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=nxt)
        os.close(nxt)
        nxt = child
    os.close(nxt)
    remove_tree(fd, "deep")
    assert names(root) == []


def test_remove_tree_stops_past_its_limit_with_one_error(root: Path, fd: int) -> None:
    (root / "wide").mkdir()
    for n in range(20):
        (root / "wide" / f"f{n}").write_bytes(b"")
    said = f"^{root}/wide: more than 5 entries to remove, the most zread-sim removes$"
    with pytest.raises(FilesError, match=said):
        remove_tree(fd, "wide", where=str(root / "wide"), limit=5)


def test_open_path_walks_down_and_refuses_a_link_on_the_way(root: Path, fd: int) -> None:
    inner = open_path(fd, (".zread", "wiki"), "/p", create=True)
    assert inner is not None
    os.close(inner)
    assert (root / ".zread" / "wiki").is_dir()
    assert open_path(fd, (".zread", "nothing"), "/p") is None
    (root / "elsewhere").mkdir()
    (root / ".zread" / "linked").symlink_to(root / "elsewhere")
    with pytest.raises(LinkRefused, match=r"^/p/\.zread/linked: a symbolic link"):
        open_path(fd, (".zread", "linked", "x"), "/p", create=True)
    assert names(root / "elsewhere") == []


def test_out_of_descriptors_is_raised_not_taken_for_no_file(root: Path) -> None:
    (root / "wiki.json").write_text("{}")
    done = run_starved(
        "import os\nfrom simulator.hosts.dirfd import read_file",
        f"top = os.open({str(root)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
        "try:\n"
        "    print(read_file(top, 'wiki.json', 100))\n"
        "except OSError as err:\n"
        "    print(err.errno)\n",
        spare=1,  # the directory takes it: none is left for the file
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{errno.EMFILE}\n"


def test_replace_file_out_of_descriptors_is_raised_as_it_is(root: Path) -> None:
    done = run_starved(
        "import os\nfrom simulator.hosts.dirfd import replace_file",
        f"top = os.open({str(root)!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
        "try:\n"
        "    replace_file(top, 'current', b'x', where='w/current')\n"
        "except OSError as err:\n"
        "    print(type(err).__name__, err.errno)\n",
        spare=1,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"OSError {errno.EMFILE}\n"  # not FilesError: the file is fine
    assert names(root) == []  # and no temporary file is left


@pytest.mark.parametrize(
    ("entry", "name", "temp"),
    [
        (".config.yaml.0a1b2c3d.tmp", "config.yaml", True),
        (".login.json.ffffffff.tmp", "login.json", True),
        (".config.yaml.0a1b2c3d.tmp", "login.json", False),
        (".config.yaml.0A1B2C3D.tmp", "config.yaml", False),
        (".config.yaml.0a1b2c3.tmp", "config.yaml", False),
        (".config.yaml.0a1b2c3d0.tmp", "config.yaml", False),
        (".config.yaml.tmp", "config.yaml", False),
        ("config.yaml.0a1b2c3d.tmp", "config.yaml", False),
        (".config.yaml.0a1b2c3d.tmp.x", "config.yaml", False),
    ],
)
def test_is_temp_of_names_exactly_replace_files_temporary_file(
    entry: str, name: str, temp: bool
) -> None:
    assert is_temp_of(entry, name) is temp


def test_a_temporary_file_is_0600_from_its_creation_whatever_the_umask(root: Path, fd: int) -> None:
    """Seen while it is written (before the mode it is to have is set), the temporary
    file is never readable by others, even under umask 0."""
    data = b"x" * (16 << 20)
    modes: dict[str, int] = {}

    class Modes(_Watching):
        def run(self) -> None:
            while not self.stop.is_set():
                for entry in os.listdir(self.path):
                    if is_temp(entry):
                        with contextlib.suppress(FileNotFoundError):
                            modes[entry] = stat.S_IMODE(os.lstat(self.path / entry).st_mode)

    old = os.umask(0)
    watcher = Modes(root)
    watcher.start()
    deadline = time.monotonic() + 20
    try:
        while not modes and time.monotonic() < deadline:
            replace_file(fd, "config.yaml", data, 0o600)
            assert is_temp_of(next(iter(modes), ".config.yaml.00000000.tmp"), "config.yaml")
    finally:
        os.umask(old)
        watcher.stop.set()
        watcher.join(5)
    assert modes, "no temporary file was ever seen"
    assert set(modes.values()) == {0o600}


def test_replace_file_over_an_empty_directory_is_refused_and_keeps_it(root: Path, fd: int) -> None:
    (root / "current").mkdir()
    with pytest.raises(FilesError, match=r"^current: cannot write: "):
        replace_file(fd, "current", b"x")
    assert (root / "current").is_dir()
    assert names(root) == ["current"]


@pytest.mark.parametrize("unnamed", [True, False], ids=["unnamed-file", "named-temporary"])
def test_replace_file_either_way_writes_the_same_and_leaves_nothing_else(
    root: Path, fd: int, unnamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import simulator.hosts.dirfd as dirfd

    monkeypatch.setattr(dirfd, "_unnamed_files", lambda: unnamed)
    (root / "elsewhere").write_bytes(b"kept")
    (root / "linked").symlink_to(root / "elsewhere")
    (root / "old").write_bytes(b"old")
    (root / "folder").mkdir()
    for name in ("free", "old", "linked"):
        replace_file(fd, name, name.encode(), 0o640)
        assert (root / name).read_bytes() == name.encode() and not (root / name).is_symlink()
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o640
    with pytest.raises(FilesError):
        replace_file(fd, "folder", b"x")
    assert (root / "elsewhere").read_bytes() == b"kept"
    assert names(root) == ["elsewhere", "folder", "free", "linked", "old"]
