"""SIGTERM, SIGINT and SIGHUP from the program's first instruction.

Owns: catching those signals before anything else is imported (:func:`catch`, the
first thing :mod:`simulator.__main__` does), the ones that arrive while the program
starts (:func:`take`, :func:`take_all`), and giving them back their defaults for a
command that runs no session (:func:`release`).

A client may cancel the moment it has spawned zread, while the simulator is still
importing what its command needs. So the very first thing the program does is catch
those three signals with a handler that only remembers them. The session runner, once
the session exists, installs its own handling and calls :func:`take`: a signal that
came during start-up is then honoured as ``quit`` (the first event, then the final
one, exit 0). A command that runs no session (``--help``, the tools) calls
:func:`release`: the signals act as they do on any program again, and one that came
during start-up is delivered then. A SIGINT never becomes a ``KeyboardInterrupt``
traceback: :mod:`simulator.__main__` ends such a run with exit 130, silently.

The handler is installed through ``_signal``, the C module under :mod:`signal`:
``signal`` builds its enums on import (``enum``, ~1.5 ms), and every millisecond before
the handler is a window in which a signal kills the process. Before the first line of
this module runs, the interpreter's own start-up is such a window too; nothing written
in Python can close it.

Must not: import anything at module level but ``_signal``; print.
"""

import _signal  # type: ignore[import-not-found]  # no stub; see the docstring

SIGNALS = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
"""The signals that are zread's ``quit`` (FIDELITY.md §4)."""

_pending: list[int] = []


def _remember(signum: int, frame: object) -> None:
    _pending.append(signum)


def catch() -> None:
    """Remember SIGTERM, SIGINT and SIGHUP from now on, instead of acting on them."""
    for signum in SIGNALS:
        _signal.signal(signum, _remember)


def take() -> bool:
    """Whether a signal came since :func:`catch` that nobody has taken yet; forgets it."""
    came = bool(_pending)
    _pending.clear()
    return came


def take_all() -> list[int]:
    """The signals that came since :func:`catch` that nobody has taken yet, in order;
    forgets them (a launcher passes them on to the child that runs its command)."""
    came = _pending[:]
    del _pending[: len(came)]
    return came


def release() -> None:
    """Give the three signals back their defaults; one that came since :func:`catch`
    is delivered now (a SIGINT as ``KeyboardInterrupt``)."""
    if _signal.getsignal(_signal.SIGTERM) is not _remember:
        return
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if _pending:
        signum = _pending[0]
        _pending.clear()
        _signal.raise_signal(signum)
