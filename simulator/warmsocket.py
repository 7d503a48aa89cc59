"""The warm server's socket: a private folder, a socket only its uid can reach.

Owns: :func:`listen` (the socket ``zread-sim serve`` listens on, and the folder made for
it), the checks on a folder given with ``--socket`` and on what is already at its path
(also made early, :func:`check`, before a server warms up), :func:`remove` (what
stopping leaves behind: nothing; a socket someone else has bound at the path since is
left alone, :func:`identity`), and :func:`passed_fds` (the
descriptors a message carried, read the same way by the server and its children). The
socket is ``zread.sock`` in a folder made by ``tempfile.mkdtemp`` (0700), or the path
``--socket`` gives, whose folder must exist, be this uid's and grant nothing to group
or others; the socket is 0600. A live server at that path is refused, a stale socket replaced.

Must not: accept a connection; the loop is :mod:`simulator.warmserver`'s.
"""

from __future__ import annotations

import array
import contextlib
import os
import socket
import stat
import tempfile

from simulator.errors import ConfigurationError

SOCKET_NAME = "zread.sock"


class ServeError(ConfigurationError):
    """The server cannot serve at the place asked (exit 2)."""


def listen(path: str | None) -> tuple[socket.socket, str, str | None]:
    """(the listening socket, its path, the folder made for it or None)."""
    made = None
    if path is None:
        made = tempfile.mkdtemp(prefix="zread-sim-")
        path = os.path.join(made, SOCKET_NAME)
    else:
        path = os.path.abspath(path)
        _check_folder(os.path.dirname(path))
        _clear_stale(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(128)
    except OSError as error:
        listener.close()
        if made is not None:
            remove(path, made)
        raise ServeError(f"serve: socket {path}: {error.strerror or error}") from None
    listener.setblocking(False)
    return listener, path, made


def _check_folder(folder: str) -> None:
    try:
        info = os.stat(folder)
    except OSError as error:
        raise ServeError(f"serve: --socket folder {folder}: {error.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ServeError(f"serve: --socket folder {folder}: not a directory")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServeError(
            f"serve: --socket folder {folder} must be yours and closed to others (0700)"
        )


def _clear_stale(path: str) -> None:
    """Remove a socket nobody listens on at ``path``; refuse a live one or a file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise ServeError(f"serve: --socket {path}: exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:  # nobody listens: stale
        os.unlink(path)
    else:
        raise ServeError(f"serve: --socket {path}: a server already listens there")
    finally:
        probe.close()


def check(path: str | None) -> None:
    """Refuse now what :func:`listen` would refuse later (a folder open to others, a
    live server at ``path``): a server warms up only where it can listen."""
    if path is not None:
        path = os.path.abspath(path)
        _check_folder(os.path.dirname(path))
        _clear_stale(path)


def identity(path: str) -> tuple[int, int] | None:
    """Which file ``path`` names (device, inode), not following a link; None: none."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def remove(path: str, made: str | None, bound: tuple[int, int] | None = None) -> None:
    """Remove the socket at ``path`` (only if it is still the one bound, ``bound``'s
    identity, when given) and the folder made for it."""
    if bound is None or identity(path) == bound:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if made is not None:
        import shutil

        shutil.rmtree(made, ignore_errors=True)


def passed_fds(ancillary: list[tuple[int, int, bytes]]) -> array.array[int]:
    """The file descriptors ``SCM_RIGHTS`` passed in a message's ancillary data."""
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return fds
