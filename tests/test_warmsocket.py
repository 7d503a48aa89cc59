"""Tests for simulator.warmsocket: the private folder, the modes, what --socket accepts."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from simulator.warmsocket import ServeError, listen, passed_fds, remove


def test_a_socket_of_its_own_is_0600_in_a_0700_folder_removed_after() -> None:
    listener, path, made = listen(None)
    try:
        assert made is not None and Path(path).parent == Path(made)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    finally:
        listener.close()
        remove(path, made)
    assert not Path(made).exists()


def test_a_given_socket_in_a_private_folder(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir(mode=0o700)
    listener, path, made = listen(str(folder / "z.sock"))
    listener.close()
    assert (made, stat.S_IMODE(os.stat(path).st_mode)) == (None, 0o600)
    remove(path, made)
    assert folder.is_dir() and not Path(path).exists()  # the user's folder stays


def test_a_folder_open_to_others_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    with pytest.raises(ServeError, match="must be yours and closed to others"):
        listen(str(folder / "z.sock"))
    with pytest.raises(ServeError, match="No such file"):
        listen(str(tmp_path / "missing" / "z.sock"))


def test_a_live_server_is_refused_a_stale_socket_replaced_a_file_kept(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir(mode=0o700)
    path = folder / "z.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(path))
        live.listen()
        with pytest.raises(ServeError, match="already listens"):
            listen(str(path))
    listener, _, _ = listen(str(path))  # nobody listens now: stale, replaced
    listener.close()
    path.unlink()
    path.write_text("mine")
    with pytest.raises(ServeError, match="not a socket"):
        listen(str(path))
    assert path.read_text() == "mine"


def test_passed_fds_are_the_descriptors_a_message_carried() -> None:
    import array

    ours, theirs = socket.socketpair()
    with ours, theirs, open(os.devnull, "rb") as null:
        sent = array.array("i", [null.fileno(), null.fileno()])
        ours.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, sent.tobytes())])
        _, ancillary, _, _ = theirs.recvmsg(16, socket.CMSG_SPACE(8 * sent.itemsize))
        got = passed_fds(ancillary)
        try:
            assert len(got) == 2 and all(
                os.fstat(fd).st_ino == os.fstat(null.fileno()).st_ino for fd in got
            )
        finally:
            for fd in got:
                os.close(fd)
        assert list(passed_fds([])) == []
