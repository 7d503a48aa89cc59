"""Opening a file the simulator reads or appends to, without ever waiting on it.

Owns: :func:`open_regular` and :func:`read_regular`, the one way every file named by a
user (a scenario, a cassette, a journal, ``config.yaml``) or found in a project is
opened, and :class:`NotRegularFile`, the refusal of what is not a regular file.

A FIFO blocks ``open`` until someone opens its other end, a device such as
``/dev/zero`` never ends, and a socket cannot be opened at all: none of them is a file
the simulator can use. So a file is opened ``O_NONBLOCK`` (a FIFO opens at once for
reading; for writing, with no reader, it fails with ``ENXIO``), checked with ``fstat``
to be a regular file, and only then used, its ``O_NONBLOCK`` cleared. What is not a
regular file is refused at once, in one line naming the file and what it is:
``scenario /tmp/x: not a regular file (a FIFO)``. A reader takes at most one byte past
its limit (:data:`simulator.formats.bounds.LIMITS`), so a file over it is known to be.

Must not: decide what a file means or where it lives; import anything from the
package but :mod:`simulator.errors` (the scenarios, below the hosts, read through it).
"""

from __future__ import annotations

import errno
import os
import stat

from simulator.errors import ConfigurationError

READ = os.O_RDONLY
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT
"""Append, creating the file if it is missing (a journal)."""
REPLACE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
"""Write from empty, creating the file if it is missing (a cassette)."""

_ALWAYS = os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegularFile(ConfigurationError):
    """A file to read or write that is not a regular file (a FIFO, a device, a socket,
    a directory, or a link where none is followed): refused at once, nothing read or
    written (exit 2)."""


def what(mode: int) -> str:
    """What a file of ``mode`` is, in words: ``a FIFO``, ``a character device``..."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def refusal(name: str, mode: int) -> NotRegularFile:
    """The refusal of ``name``, a file of ``mode``: ``NAME: not a regular file (a FIFO)``."""
    return NotRegularFile(f"{name}: not a regular file ({what(mode)})")


def open_regular(
    path: str,
    name: str,
    flags: int = READ,
    *,
    follow: bool = True,
    dir_fd: int | None = None,
    mode: int = 0o600,
) -> int:
    """A descriptor of the regular file ``path`` opened with ``flags`` (:data:`READ`,
    :data:`APPEND`, :data:`REPLACE`; a file created is ``mode``), blocking again once
    it is known to be one. :class:`NotRegularFile` naming ``name`` at once for anything
    else (``follow`` false: a link too); an :class:`OSError` as ``open`` raises it when
    there is nothing to open (missing, not permitted)."""
    flags |= _ALWAYS | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, mode, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ENXIO, errno.EISDIR, errno.ELOOP, errno.ENODEV, errno.EOPNOTSUPP):
            found = _mode(path, follow, dir_fd)
            if found is not None and not stat.S_ISREG(found):
                raise refusal(name, found) from None
        raise
    try:
        found = os.fstat(fd).st_mode
        if not stat.S_ISREG(found):
            raise refusal(name, found)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mode(path: str, follow: bool, dir_fd: int | None) -> int | None:
    try:
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=follow).st_mode
    except OSError:
        return None


def read_regular(
    path: str, name: str, limit: int, *, follow: bool = True, dir_fd: int | None = None
) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (one more than the
    limit, so the decoder knows a file is past it); :func:`open_regular`'s errors."""
    fd = open_regular(path, name, READ, follow=follow, dir_fd=dir_fd)
    try:
        return read_at_most(fd, limit + 1)
    finally:
        os.close(fd)


def read_at_most(fd: int, count: int) -> bytes:
    """Up to ``count`` bytes from ``fd``, fewer at its end."""
    chunks: list[bytes] = []
    left = count
    while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
