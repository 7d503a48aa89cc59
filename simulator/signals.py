"""SIGTERM, SIGINT and SIGHUP from the program's first instruction.

Owns: catching those signals before anything else is imported (:func:`catch`, the
first thing :mod:`simulator.__main__` does), the ones that arrive while the program
starts (:func:`take`, :func:`take_all`), giving them back their defaults for a
command that runs no session (:func:`release`), and ending a process a signal cannot
reach otherwise, stuck in a call (:func:`end_if_stuck`, :func:`disarm`).

A client may cancel the moment it has spawned zread, while the simulator is still
importing what its command needs. So the very first thing the program does is catch
those three signals with a handler that only remembers them. The session runner, once
the session exists, installs its own handling and calls :func:`take`: a signal that
came during start-up is then honoured as ``quit`` (the first event, then the final
one, exit 0). A command that runs no session (``--help``, the tools) calls
:func:`release`: the signals act as they do on any program again, and one that came
during start-up is delivered then. A SIGINT never becomes a ``KeyboardInterrupt``
traceback: :mod:`simulator.__main__` ends such a run with exit 130, silently.

A signal is never held for ever. Python retries a system call a signal interrupts
(PEP 475) once its handler has returned, so a process stuck in one (an ``open`` that
waits for a FIFO's other end, a write to a pipe nobody reads) would hold the signal,
and go on waiting, for good. So a signal held also arms a timer (:func:`end_if_stuck`:
``SIGALRM`` in :data:`GRACE_S`, longer while a launcher waits on its server:
:func:`grace`), whose ring interrupts that call: the signal is then
given its default and raised again, and ends the process as it ends any program
(128+N, no event). :func:`take`, :func:`take_all` and :func:`release` disarm it, and
so does :func:`disarm`; the session runner arms it again for its own quit.

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

GRACE_S = 3.0
"""How long a signal may take to be honoured: a start-up takes a few hundred
milliseconds at most, even on a loaded machine, and a quit a few; a process still going
this long after the signal is stuck."""

_grace = [GRACE_S]
"""How long the timer gives a held signal now (:func:`grace`)."""
_pending: list[int] = []
_armed: list[object] = []
"""While the timer runs: the signal it runs for, and the ``SIGALRM`` handler it replaced."""


def _remember(signum: int, frame: object) -> None:
    _pending.append(signum)
    end_if_stuck(signum)


def end_if_stuck(signum: int) -> None:
    """Unless :func:`disarm` comes within :data:`GRACE_S`, ``signum`` (the first signal
    armed for) ends the process as by default, whatever call it waits in. Main thread
    only, as every signal handler."""
    if not _armed:
        _armed[:] = [signum, _signal.signal(_signal.SIGALRM, _overdue)]
        _signal.setitimer(_signal.ITIMER_REAL, _grace[0])


def grace(seconds: float) -> None:
    """From now on a held signal has ``seconds`` (from now, if the timer runs) to be
    honoured: a launcher waiting on its server (each wait bounded) takes longer than a
    start-up; it gives back :data:`GRACE_S` when it runs the command itself."""
    _grace[0] = seconds
    if _armed:
        _signal.setitimer(_signal.ITIMER_REAL, seconds)


def _overdue(signum: int, frame: object) -> None:
    if _armed:
        _signal.signal(_armed[0], _signal.SIG_DFL)
        _signal.raise_signal(_armed[0])


def disarm() -> None:
    """Stop the timer of :func:`end_if_stuck`, if it runs; ``SIGALRM`` is as it was."""
    if _armed:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
        before = _armed[1]  # None: not set from Python, so the default
        _signal.signal(_signal.SIGALRM, _signal.SIG_DFL if before is None else before)
        _armed.clear()


def catch() -> None:
    """Remember SIGTERM, SIGINT and SIGHUP from now on, instead of acting on them."""
    for signum in SIGNALS:
        _signal.signal(signum, _remember)


def take() -> bool:
    """Whether a signal came since :func:`catch` that nobody has taken yet; forgets it."""
    came = bool(_pending)
    _pending.clear()
    disarm()
    return came


def take_all() -> list[int]:
    """The signals that came since :func:`catch` that nobody has taken yet, in order;
    forgets them (a launcher passes them on to the child that runs its command)."""
    came = _pending[:]
    del _pending[: len(came)]
    disarm()
    return came


def release() -> None:
    """Give the three signals back their defaults; one that came since :func:`catch`
    is delivered now (a SIGINT as ``KeyboardInterrupt``)."""
    if _signal.getsignal(_signal.SIGTERM) is not _remember:
        return
    disarm()
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if _pending:
        signum = _pending[0]
        _pending.clear()
        _signal.raise_signal(signum)
