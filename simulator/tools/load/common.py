"""What the runners and the command line of the load test share.

Owns: :class:`LoadConfig` (what to run), :class:`LoadError` (a bad argument or an
unusable scenario), :data:`EVENT_KEYS` (the keys every event line has),
:func:`interrupt` (Ctrl-C ends a run as the duration does) and :func:`watch_children`
(exit codes of children started on asyncio, without a race).

Must not: measure (:mod:`simulator.tools.load.stats`), run sessions (the runners), parse
arguments or print (:mod:`simulator.tools.load.cli`). It imports nothing of the package.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simulator.errors import ConfigurationError

EVENT_KEYS = ("vm", "waiting_for", "done", "error")
"""The keys of every event line zread writes."""


class LoadError(ConfigurationError):
    """A bad argument or an unusable scenario: one line on stderr, exit 2."""


@dataclass
class LoadConfig:
    """What to run; see ``python -m simulator load --help``."""

    command: str
    args: list[str] = field(default_factory=list)
    sessions: int | None = None
    concurrency: int | None = None
    duration: float | None = None
    scenario: str = "default"
    seed: int = 0
    speed: float = 1.0
    mode: str = "inprocess"
    timeout: float = 600.0
    progress: bool = False
    ramp: float = 0.0
    """In-process: start the first ``concurrency`` sessions evenly over this many seconds
    (session i scheduled at ``i * ramp / concurrency``)."""
    workers: int | None = None
    """In-process: event loops, each in a process of its own; None: one per core."""

    def worker_count(self) -> int:
        """How many workers run: ``workers`` (one per core if None), but no more than
        the sessions at once, and one in process mode."""
        if self.mode != "inprocess":
            return 1
        wanted = self.workers or os.cpu_count() or 1
        return max(1, min(wanted, self.concurrency or self.sessions or 1))


@contextlib.contextmanager
def interrupt(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> Any:
    """Ctrl-C ends the run as the duration does: what runs quits, the summary follows."""
    try:
        loop.add_signal_handler(signal.SIGINT, stop)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


def watch_children() -> None:
    """On the running loop, before children are started on it: a child watcher that
    gets every exit code.

    Python 3.11's default watcher (a thread per child, ``waitpid``) can lose a child
    that exits at once (CPython issue 86276): its exit code comes back as 255 and asyncio
    logs "Unknown child process pid" on stderr. A load test of failing processes would
    count wrong codes. Linux's pidfd watcher has no such race; Python 3.12 uses it by
    default. Where pidfds cannot be opened (an old kernel, a sandbox), the default stays.
    """
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return
    watcher = asyncio.PidfdChildWatcher()
    asyncio.set_child_watcher(watcher)
    watcher.attach_loop(asyncio.get_running_loop())
