"""Files inside a directory that may be hostile: by descriptor, never through a link.

Owns the few operations the store needs inside a project's ``.zread/`` (a cloned
repository may have planted links there), each relative to an open directory
descriptor and refusing to follow a link at the last step:

- :func:`open_dir` opens (or creates, then opens) a directory with
  ``O_DIRECTORY|O_NOFOLLOW``: a link there is a :class:`LinkRefused`; :func:`open_path`
  walks down several;
- :func:`read_file` reads a regular file, at most so many bytes, ``O_NOFOLLOW``
  (:func:`simulator.regularfile.read_regular`, which never waits on a FIFO);
- :func:`replace_file` writes a file without a name (``O_TMPFILE``, created 0600
  whatever the umask) and, once it is whole, links it at the name when the name is
  free (a page of a new draft): a kill leaves nothing. Where something stands at the
  name, or where there are no such files, it writes a temporary file instead
  (``O_EXCL|O_NOFOLLOW``, named ``.<name>.<8 hex digits>.tmp``, which no reader takes
  for a page: :func:`is_temp`, :func:`is_temp_of`) and exchanges the two names
  (:mod:`simulator.hosts.exchange`: ext4 flushes a file renamed over another) and
  removes the old one, or renames it over the name: a link at that name is replaced
  as a link, never written through;
- :func:`remove_tree` and :func:`entries` (by descriptor, neither following links, and
  without recursion: a hostile tree may nest thousands deep);
- :func:`flock` holds an exclusive ``flock`` on a directory's own descriptor, so no
  lock file is ever created.

Nothing here calls ``fsync``: a rename is atomic against a kill, which is what the
simulator guards against (a power cut is not; zread's own writes are not durable
against one either).

Must not: decide what to write; know zread's layout.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import secrets
import stat
from collections.abc import Iterator

from simulator.errors import ConfigurationError
from simulator.hosts import limits
from simulator.hosts.exchange import exchange
from simulator.regularfile import NotRegularFile, read_regular

TEMP_SUFFIX = ".tmp"
_TEMP_BYTES = 4  # random bytes in a temporary file's name, written as 8 hex digits
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_UNNAMED_FLAGS = os.O_WRONLY | getattr(os, "O_TMPFILE", 0) | os.O_CLOEXEC


class FilesError(ConfigurationError):
    """One of zread's files or directories cannot be used: the message names it and
    why (exit 2); nothing is written over it."""


class LinkRefused(FilesError):
    """A directory the simulator would have to go through is a link: nothing is
    written, the message names it (exit 2)."""


def open_dir(parent: int, name: str, where: str, *, create: bool = False) -> int | None:
    """The descriptor of directory ``name`` in ``parent`` (None when it does not exist
    and ``create`` is false); :class:`LinkRefused` naming ``where`` when it is a link or
    not a directory."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if create:  # pragma: no cover - removed between mkdir and open
            raise LinkRefused(f"{where}: removed while it was being created") from None
        return None
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            if _is_link(parent, name):
                raise LinkRefused(
                    f"{where}: a symbolic link; zread-sim never follows a link inside a "
                    "project, so it writes nothing here"
                ) from None
            raise FilesError(f"{where}: not a directory; zread-sim writes nothing here") from None
        raise


def open_path(top: int, parts: tuple[str, ...], where: str, *, create: bool = False) -> int | None:
    """The descriptor of the directory ``parts`` below ``top``, each opened as
    :func:`open_dir` opens one (``where`` names ``top`` in messages); None when one is
    missing and not ``create``."""
    fd = top
    for depth, name in enumerate(parts):
        path = "/".join((where, *parts[: depth + 1]))
        try:
            child = open_dir(fd, name, path, create=create)
        finally:
            if fd != top:
                os.close(fd)
        if child is None:
            return None
        fd = child
    return fd if fd != top else os.dup(top)


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
    except OSError:
        return False


def read_file(parent: int | None, name: str, limit: int, *, follow: bool = False) -> bytes | None:
    """At most ``limit + 1`` bytes of the regular file ``name`` in ``parent`` (one more
    than the limit, so the decoder knows a file is past it); None when there is no
    regular file there: missing, a directory, a pipe (never waited on), or a link
    (``follow``: the file a link names is read, for the user's own files; ``parent``
    None: ``name`` is a path). A failure for want of descriptors or memory is raised
    (:func:`~simulator.hosts.limits.reraise`): it says nothing of the file."""
    try:
        return read_regular(name, name, limit, follow=follow, dir_fd=parent)
    except NotRegularFile:
        return None
    except OSError as err:
        limits.reraise(err)  # out of descriptors is no answer about the file
        return None


def replace_file(parent: int, name: str, data: bytes, mode: int = 0o644, where: str = "") -> None:
    """Replace ``name`` in ``parent`` with ``data`` at once (a reader sees the old file or
    the new one) with exactly ``mode``; a link at ``name`` is replaced, not followed.
    :class:`FilesError` naming ``where`` (the file's path) when it cannot be."""
    try:
        _replace(parent, name, data, mode)
    except OSError as err:
        limits.reraise(err)  # the machine's limit, not this file's fault
        raise FilesError(f"{where or name}: cannot write: {err.strerror or err}") from None


def _replace(parent: int, name: str, data: bytes, mode: int) -> None:
    unnamed = _open_unnamed(parent)
    if unnamed is not None:  # a file without a name until it is whole
        try:
            _fill(unnamed, data, mode)
            if _name(unnamed, parent, name):
                return  # the name was free: the file appeared whole
            temporary = _temporary(name)
            if not _name(unnamed, parent, temporary):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), temporary)
        finally:
            os.close(unnamed)
    else:
        temporary = _temporary(name)
        fd = os.open(temporary, _CREATE_FLAGS, 0o600, dir_fd=parent)
        try:
            _fill(fd, data, mode)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise
        finally:
            os.close(fd)
    _put_in_place(parent, temporary, name)


def _temporary(name: str) -> str:
    return f".{name}.{secrets.token_hex(_TEMP_BYTES)}{TEMP_SUFFIX}"


def _fill(fd: int, data: bytes, mode: int) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fchmod(fd, mode)


def _open_unnamed(parent: int) -> int | None:
    """An ``O_TMPFILE`` in ``parent``, created 0600; None where there is none (the
    filesystem has none, no ``/proc/self/fd`` to give it a name through, or it is
    refused: the named temporary file then says why)."""
    if not _unnamed_files():
        return None
    try:
        return os.open(".", _UNNAMED_FLAGS, 0o600, dir_fd=parent)
    except OSError as err:
        limits.reraise(err)  # out of descriptors is not the file's answer
        return None


@functools.cache
def _unnamed_files() -> bool:
    return hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")


def _name(unnamed: int, parent: int, name: str) -> bool:
    """Give the file ``unnamed`` the free name ``name`` in ``parent`` (False: taken,
    by anything, a link too: nothing is followed or replaced)."""
    try:
        os.link(f"/proc/self/fd/{unnamed}", name, dst_dir_fd=parent, follow_symlinks=True)
    except FileExistsError:
        return False
    return True


def _put_in_place(parent: int, temporary: str, name: str) -> None:
    """``temporary`` becomes ``name``: exchanged with what stands there, which is then
    removed, or renamed to it; on failure ``temporary`` is removed."""
    try:
        if not exchange(parent, temporary, name):
            os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        else:
            try:
                os.unlink(temporary, dir_fd=parent)  # what stood at name
            except OSError:  # a directory stood there: it goes back, and is refused
                exchange(parent, temporary, name)
                raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise


def is_temp(name: str) -> bool:
    """Whether ``name`` is one of :func:`replace_file`'s temporary files."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def is_temp_of(entry: str, name: str) -> bool:
    """Whether ``entry`` is named exactly as :func:`replace_file`'s temporary file for
    ``name`` is (``.<name>.<8 hex digits>.tmp``): nothing else has that name."""
    random = entry.removeprefix(f".{name}.").removesuffix(TEMP_SUFFIX)
    return (
        len(entry) == len(name) + 2 + 2 * _TEMP_BYTES + len(TEMP_SUFFIX)
        and entry.startswith(f".{name}.")
        and entry.endswith(TEMP_SUFFIX)
        and all(c in "0123456789abcdef" for c in random)
    )


def entries(directory: int) -> Iterator[tuple[str, bool, bool]]:
    """(name, is a regular file, is a directory) of each entry, links neither."""
    with os.scandir(directory) as found:
        for entry in found:
            yield (
                entry.name,
                entry.is_file(follow_symlinks=False),
                entry.is_dir(follow_symlinks=False),
            )


def directories(directory: int) -> list[str]:
    """The names of the directories in ``directory`` (not links to one)."""
    with os.scandir(directory) as found:
        return [entry.name for entry in found if entry.is_dir(follow_symlinks=False)]


def remove_tree(parent: int, name: str, *, where: str = "", limit: int = 200_000) -> None:
    """Remove directory ``name`` in ``parent`` and all below it, following no link, with
    two descriptors open at most and no recursion, however deep the tree (a hostile one
    may nest thousands deep, past ``shutil.rmtree``'s recursion on Python 3.11): each
    subdirectory's entries are moved up into the top one, then it is removed.
    :class:`FilesError` naming ``where`` (the directory's path) when that takes more
    than ``limit`` steps."""
    try:
        top = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return
    try:
        steps = 0
        while found := list(entries(top)):
            for entry, _, is_dir in found:
                steps += 1
                if steps > limit:
                    raise FilesError(
                        f"{where or name}: more than {limit} entries to remove, "
                        "the most zread-sim removes"
                    )
                if is_dir:
                    _lift(top, entry)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry, dir_fd=top)
    finally:
        os.close(top)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=parent)


def _lift(top: int, name: str) -> None:
    """Move the entries of directory ``name`` up into ``top`` (fresh names: all of it
    is being removed), then remove ``name``."""
    child = os.open(name, _DIR_FLAGS, dir_fd=top)
    try:
        for entry, _, _ in list(entries(child)):
            os.rename(entry, f".rm-{secrets.token_hex(8)}", src_dir_fd=child, dst_dir_fd=top)
    finally:
        os.close(child)
    os.rmdir(name, dir_fd=top)


@contextlib.contextmanager
def flock(directory: int) -> Iterator[None]:
    """Hold an exclusive ``flock`` on an open directory for the block."""
    fcntl.flock(directory, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(directory, fcntl.LOCK_UN)


def try_flock(directory: int) -> bool:
    """Take an exclusive ``flock`` on an open directory if nobody holds one; it is held
    until the descriptor is closed. False when another holds it."""
    try:
        fcntl.flock(directory, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
