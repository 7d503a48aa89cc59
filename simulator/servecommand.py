"""``zread-sim serve``: its command line, and a warm server's life from start to stop.

Owns: :func:`main` (the arguments, the one line an error is, the ready line on stdout)
and :func:`serve`: check the place (at once: a bad ``--socket`` is said before the
warm-up, not after), warm up (:mod:`simulator.warmup`, the stops blocked meanwhile),
make the socket (:mod:`simulator.warmsocket`: only now, so a launcher that comes during
the warm-up finds none and runs by itself instead of waiting in the backlog), say
ready, and run the loop (:class:`simulator.warmserver.WarmServer`) with its own ends
(``--idle``, ``--until-changed``: :mod:`simulator.warmwatch`) until it stops; then
remove the socket, if it is still this server's.

Must not: serve a launch itself; the loop does.
"""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable

from simulator import launcher
from simulator.warmserver import STOP_SIGNALS, WarmServer
from simulator.warmsocket import ServeError, check, identity, listen, remove
from simulator.warmup import warm_up
from simulator.warmwatch import PackageStamp, Watch


def _pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def serve(
    path: str | None,
    *,
    ready: Callable[[str], None],
    warn: Callable[[str], None],
    stop_at_eof: bool = False,
    idle: float | None = None,
    until_changed: bool = False,
) -> int:
    """Warm up, listen at ``path`` (a private folder of its own when None), say
    ``ready(socket path)``, and serve until stopped (or, ``stop_at_eof``, until stdin
    ends; ``idle``: until no launch came for that many seconds; ``until_changed``:
    until the package's files change); the exit code. The socket is made once the
    server is warm: a launcher that comes earlier finds none and runs by itself, rather
    than wait for the warm-up in the backlog."""
    check(path)  # a bad place is said at once, not after the warm-up
    server = WarmServer(None, warn, stop_at_eof=stop_at_eof)
    server.catch_stop()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # the runs must not take them
    try:
        scratch = tempfile.mkdtemp(prefix="zread-sim-warm-")
        try:
            warm_up(scratch)
        finally:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)
        listener, where, made = listen(path)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # one held stops now
    bound = identity(where)
    try:
        if idle is not None or until_changed:
            stamp = PackageStamp.taken() if until_changed else None
            server.attach(
                listener, Watch(time.monotonic(), idle=idle, stamp=stamp, socket_path=where)
            )
        else:
            server.attach(listener)
        ready(where)
        server.serve()
    finally:
        listener.close()
        remove(where, made, bound)
    return 0


# -- the command line -------------------------------------------------------------------------

PROG = "zread-sim serve"


def _parser() -> argparse.ArgumentParser:
    from simulator.tools.arguments import raising

    parser = raising(ServeError)(
        prog=PROG,
        description="Serve zread launches from one warm process: a zread started with "
        f"{launcher.VARIABLE} set to the socket this prints runs in a child forked from "
        "it, on its own standard streams, in a fraction of a process's start-up.",
    )
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="the socket to listen on; its folder must be yours and 0700 "
        "(default: zread.sock in a private folder made for it)",
    )
    parser.add_argument(
        "--idle",
        metavar="SECONDS",
        type=_seconds,
        help="stop once no launch has run for SECONDS (a run in progress keeps it up)",
    )
    parser.add_argument(
        "--until-changed",
        action="store_true",
        help="stop listening once the installed package's files change (a new version, "
        "a reinstall, an edit), and stop when the runs still going have ended",
    )
    parser.add_argument(
        "--stop-at-eof",
        action="store_true",
        help="stop when standard input (a pipe or a socket) ends: a server started by "
        "another program then ends with it",
    )
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def main(argv: list[str]) -> int:
    """``zread-sim serve [--socket PATH]``: serve until stopped; the exit code (2: a
    bad argument or socket)."""
    try:
        args = _parser().parse_args(argv)
    except ServeError as refused:
        sys.stderr.write(f"{PROG}: {refused}\n")
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    if args.stop_at_eof and not _pipe_or_socket(0):  # /dev/null or a file: at its end at once
        sys.stderr.write(f"{PROG}: --stop-at-eof needs a pipe or a socket on stdin\n")
        return 2

    def ready(path: str) -> None:
        sys.stdout.write(f"{launcher.VARIABLE}={path}\n")
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)  # a reader waiting for the end gets it
        os.dup2(devnull, 1)
        os.close(devnull)

    def warn(line: str) -> None:
        sys.stderr.write(f"{PROG}: {line}\n")
        sys.stderr.flush()

    try:
        return serve(
            args.socket,
            ready=ready,
            warn=warn,
            stop_at_eof=args.stop_at_eof,
            idle=args.idle,
            until_changed=args.until_changed,
        )
    except ServeError as error:
        warn(str(error).removeprefix("serve: "))
        return 2
    except Exception as error:  # the simulator's own bug: one line
        warn(f"internal error: {type(error).__name__}: {error}")
        return 70
