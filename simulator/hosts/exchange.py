"""Swapping two names in one directory at once: Linux's ``renameat2(RENAME_EXCHANGE)``.

Owns :func:`exchange`, which :func:`simulator.hosts.dirfd.replace_file` uses to put a
new file where one already stands. A plain rename over an existing file costs ext4
~0.3 ms more than a rename to a free name: with its default ``auto_da_alloc`` it
writes the new file's blocks out before the rename returns, to guard against a power
cut (which the simulator does not guard against: no ``fsync`` either). Exchanging the
two names is as atomic against a kill (a reader sees the old file or the new one) and
costs what a rename to a free name costs.

Python has no call for ``renameat2``, so it is reached through ctypes, loaded on the
first replace of an existing file; where the C library or the filesystem lacks it,
:func:`exchange` says so and the caller renames as before.

Must not: decide what to write; follow a link (renames never do).
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable

_RENAME_EXCHANGE = 2  # <linux/fs.h>

Renameat2 = Callable[[int, bytes, int, bytes, int], int]


@functools.cache
def _renameat2() -> Renameat2 | None:
    """The C library's ``renameat2``, or None where it has none."""
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    function.argtypes += [ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_NOT_HERE = frozenset(
    {errno.ENOENT, errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}
)
"""What ``renameat2`` answers when there is nothing to exchange with, or where the
kernel or the filesystem cannot exchange."""


def exchange(directory: int, first: str, second: str) -> bool:
    """Swap ``first`` and ``second`` in ``directory`` at once. False when nothing was
    swapped and a rename is what is left to do: nothing at ``second``, or no exchange
    here (no ``renameat2``, a filesystem without it); another failure is raised as the
    rename's would be."""
    function = _renameat2()
    if function is None:
        return False
    if function(directory, os.fsencode(first), directory, os.fsencode(second), _RENAME_EXCHANGE):
        import ctypes

        code = ctypes.get_errno()
        if code in _NOT_HERE:
            return False
        raise OSError(code, os.strerror(code), first, None, second)
    return True
