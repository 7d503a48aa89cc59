"""The two folders a run uses, checked before its first event: HOME and the project.

Owns: :func:`check_places`, the rule of which folder must exist and which must be
writable for a command (its chart's ``"project"`` and ``"writes"``), and the one-line
refusals (:class:`~simulator.hosts.dirfd.FilesError`, exit 2) of a folder that fails it.

A folder named for a run (``--project``, ``--home``, their variables, the Python API's
``project=`` and ``home=``; the working directory as the project) must exist and be a
folder: a typo is refused, never created. HOME from the environment may be missing for
a command that does not write it (nothing there is read as nothing). A folder the
command writes (``generate``: the project; ``config`` and ``login``: HOME) must be
writable, which is tried rather than guessed (``os.access`` says yes to root on
``/proc``): a file with no name (``O_TMPFILE``) is made and closed in the deepest folder
of the way to ``.zread/wiki`` (or ``.zread``) that exists: nothing appears, not even a
new mtime. Where the file system knows no ``O_TMPFILE``, a folder named as a temporary
file is (``.probe.<hex>.tmp``) is made and removed at once, and the folder's times put
back.

Must not: create anything that stays; follow a link inside the project (the checks
stop at one: the store refuses it in its own words).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Collection
from pathlib import Path

from simulator.hosts import limits
from simulator.hosts.dirfd import TEMP_SUFFIX, FilesError

_WAY = {"project": (".zread", "wiki"), "home": (".zread",)}
"""What a command writes below each folder."""


def check_places(
    home: Path | None,
    project: Path | None,
    writes: Collection[str],
    *,
    home_named: bool,
) -> None:
    """:class:`FilesError` naming the folder and what is wrong with it, before anything
    is read or written: ``project`` (None: the command has none) must be a folder,
    ``home`` too when it was named or is written (``writes``: ``"project"``,
    ``"home"``), and each folder written must be writable."""
    if project is not None:
        check_folder(project, "project")
        if "project" in writes:
            check_writable(project, "project")
    if home is not None and (home_named or "home" in writes):
        check_folder(home, "home")
        if "home" in writes:
            check_writable(home, "home")


def check_folder(path: Path, what: str) -> None:
    """:class:`FilesError` unless ``path`` is an existing folder (a link to one is: the
    user named it)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FilesError(f"{what} {path}: no such folder; zread-sim creates none") from None
    except OSError as err:
        limits.reraise(err)  # out of memory says nothing of the folder
        raise FilesError(f"{what} {path}: {err.strerror or err}") from None
    if not stat.S_ISDIR(mode):
        raise FilesError(f"{what} {path}: not a folder")


def check_writable(path: Path, what: str) -> None:
    """:class:`FilesError` naming the operation that failed unless a file can be made
    where the command will make its first one (see the module docstring)."""
    deepest = path
    for part in _WAY[what]:
        below = deepest / part
        if below.is_symlink() or not below.is_dir():
            break
        deepest = below
    try:
        os.close(os.open(deepest, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    except OSError as err:
        limits.reraise(err)  # out of descriptors: not an unwritable folder
        if err.errno not in _NO_TMPFILE:
            raise _unwritable(path, what, f"creating a file in {deepest}", err) from None
        _probe_with_a_folder(path, what, deepest)


_NO_TMPFILE = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL)
"""``O_TMPFILE`` unknown to the file system (or the kernel): a folder is tried instead."""


def _probe_with_a_folder(path: Path, what: str, deepest: Path) -> None:
    """A folder made and removed in ``deepest``, whose times are then put back."""
    before = os.stat(deepest)
    probe = deepest / f".probe.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    try:
        os.mkdir(probe, 0o700)
    except OSError as err:
        raise _unwritable(path, what, f"making a folder in {deepest}", err) from None
    os.rmdir(probe)
    with contextlib.suppress(OSError):
        os.utime(deepest, ns=(before.st_atime_ns, before.st_mtime_ns))


def _unwritable(path: Path, what: str, doing: str, err: OSError) -> FilesError:
    return FilesError(f"{what} {path}: cannot be written: {doing} failed: {err.strerror or err}")
