"""The machine's limits: telling a failure for want of descriptors, memory or threads.

Owns: which failures mean the process ran out of something (:func:`exhausted`: an
``OSError`` with ``EMFILE``, ``ENFILE``, ``ENOMEM`` or ``ENOBUFS``, a ``MemoryError``,
``RuntimeError("can't start new thread")``), the one line that says so
(:func:`out_of`: what ran out, what the simulator was doing, and the limit, as
``out of file descriptors while reading the wiki (ulimit -n is 6)``), and
:func:`doing`, the block that turns such a failure into that
:class:`~simulator.errors.OutOfResources` (exit 2).

Such a failure is never an answer about the file or the socket it happened on: a
``wiki.json`` that could not be opened for want of a descriptor is not a missing one,
and a ``config.yaml`` that could not be looked at is not a pipe. Code that reads a
failure as "none there" calls :func:`reraise` first, and the failure reaches the
:func:`doing` around it, which names the work.

Must not: decide what a command does about it (the command line prints the line).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from simulator.errors import OutOfResources

try:  # imported now: out of descriptors, its import would fail too (a shared object)
    import resource
except ImportError:  # pragma: no cover - Windows: no such limits
    resource = None  # type: ignore[assignment]

_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_NO_THREAD = "can't start new thread"


def exhausted(error: BaseException) -> bool:
    """Whether ``error`` says the process (or the system) ran out of descriptors,
    memory or threads, rather than anything about what it was working on."""
    if isinstance(error, OSError):
        return error.errno in _EXHAUSTED
    if isinstance(error, MemoryError):
        return True
    return isinstance(error, RuntimeError) and _NO_THREAD in str(error)


def reraise(error: BaseException) -> None:
    """Raise ``error`` again when it is :func:`exhausted`; else return: for the
    handlers that take a failure for an answer ("missing", "not a regular file")."""
    if exhausted(error):
        raise error


def out_of(error: BaseException, doing: str) -> OutOfResources:
    """The error that says what ``error`` ran out of while ``doing`` (``reading the
    wiki``), with the limit that was reached when there is one."""
    code = getattr(error, "errno", None)
    if code == errno.EMFILE:
        what = f"out of file descriptors while {doing}{_limit('RLIMIT_NOFILE', 'n')}"
    elif code == errno.ENFILE:
        what = f"the system is out of file descriptors while {doing}"
    elif isinstance(error, RuntimeError):
        what = f"out of threads while {doing}{_limit('RLIMIT_NPROC', 'u')}"
    else:  # ENOMEM, ENOBUFS, MemoryError
        what = f"out of memory while {doing}{_limit('RLIMIT_AS', 'v')}"
    return OutOfResources(what)


def _limit(name: str, flag: str) -> str:
    """`` (ulimit -<flag> is N)`` for the soft limit ``name``, or "" when unlimited."""
    if resource is None:  # pragma: no cover - Windows
        return ""
    soft, _ = resource.getrlimit(getattr(resource, name))
    if soft == resource.RLIM_INFINITY:
        return ""
    shown = soft // 1024 if flag == "v" else soft  # ulimit -v counts KiB
    return f" (ulimit -{flag} is {shown})"


@contextlib.contextmanager
def doing(what: str) -> Iterator[None]:
    """The block ``what`` names (``reading the wiki``): a failure in it for want of
    descriptors, memory or threads is :func:`out_of`'s error; any other goes on."""
    try:
        yield
    except OutOfResources:
        raise
    except (OSError, MemoryError, RuntimeError) as error:
        if not exhausted(error):
            raise
        raise out_of(error, what) from None
