"""The one opener of files: a regular file is read bounded; a FIFO, a device, a socket,
a directory (and a link, where none is followed) are refused at once, never waited on."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from simulator.errors import ConfigurationError
from simulator.regularfile import (
    APPEND,
    REPLACE,
    NotRegularFile,
    open_regular,
    read_regular,
    what,
)


def test_a_regular_file_is_read_to_one_byte_past_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_regular(str(path), "f", 1000) == b"x" * 100
    assert read_regular(str(path), "f", 10) == b"x" * 11  # one more: the decoder knows


def test_the_descriptor_it_gives_blocks_again(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    fd = open_regular(str(path), "f")
    try:
        assert os.get_blocking(fd)
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)


def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done: list[BaseException] = []
    # a thread, so a hang is a failed assert, not a hung suite
    thread = threading.Thread(target=_catch, args=(done, read_regular, str(fifo), "x", 10))
    thread.start()
    thread.join(30)
    if thread.is_alive():  # pragma: no cover - the failure being tested for
        with open(fifo, "wb"):  # let the blocked open go
            pass
        pytest.fail("the open of a FIFO waited for a writer")
    assert len(done) == 1 and isinstance(done[0], NotRegularFile)
    assert str(done[0]) == "x: not a regular file (a FIFO)"
    assert isinstance(done[0], ConfigurationError)


def _catch(into: list[BaseException], call: object, *args: object) -> None:
    try:
        call(*args)  # type: ignore[operator]
    except BaseException as err:
        into.append(err)


@pytest.mark.parametrize("flags", [APPEND, REPLACE])
def test_a_fifo_to_write_is_refused_with_or_without_a_reader(tmp_path: Path, flags: int) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match=r"^out: not a regular file \(a FIFO\)$"):
        open_regular(str(fifo), "out", flags)  # no reader: ENXIO, at once
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(NotRegularFile, match=r"\(a FIFO\)$"):
            open_regular(str(fifo), "out", flags)  # a reader: opened, then refused
    finally:
        os.close(reader)


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_a_device_is_refused_to_read_and_to_write(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    with pytest.raises(NotRegularFile, match=rf"^{device}: not a regular file \(a character"):
        read_regular(device, device, 10)
    with pytest.raises(NotRegularFile, match=r"\(a character device\)$"):
        open_regular(device, device, APPEND)


def test_a_socket_and_a_directory_are_refused(tmp_path: Path) -> None:
    where = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(where))
        with pytest.raises(NotRegularFile, match=r"\(a socket\)$"):
            read_regular(str(where), "s", 10)
    with pytest.raises(NotRegularFile, match=r"\(a directory\)$"):
        read_regular(str(tmp_path), "d", 10)
    with pytest.raises(NotRegularFile, match=r"\(a directory\)$"):
        open_regular(str(tmp_path), "d", APPEND)


def test_a_link_is_followed_unless_told_not_to(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    (tmp_path / "link").symlink_to("f")
    assert read_regular(str(tmp_path / "link"), "l", 10) == b"data"
    with pytest.raises(NotRegularFile, match=r"\(a symbolic link\)$"):
        read_regular(str(tmp_path / "link"), "l", 10, follow=False)


def test_nothing_to_open_is_the_os_error_for_the_caller_to_word(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(str(tmp_path / "missing"), "m", 10)
    assert not (tmp_path / "missing").exists()


def test_a_file_to_append_to_is_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "j"
    os.close(open_regular(str(path), "j", APPEND))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_each_kind_of_file_has_its_words() -> None:
    assert what(stat.S_IFIFO) == "a FIFO"
    assert what(stat.S_IFCHR) == "a character device"
    assert what(stat.S_IFBLK) == "a block device"
    assert what(stat.S_IFSOCK) == "a socket"
    assert what(stat.S_IFDIR) == "a directory"
    assert what(stat.S_IFLNK) == "a symbolic link"
