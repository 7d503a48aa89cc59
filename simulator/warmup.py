"""What a warm server loads before it serves, and what its spares rehearse.

Owns: :func:`warm_up` (the command line, every chart, the runners, the files, the
journal and the scenario catalogue imported, and each command but ``browse`` run once to
its end on /dev/null in a scratch folder, with no variable of the server's: what a
first run builds lazily is then built; then ``gc.freeze``, so children never walk what
the server holds), :func:`rehearse` (what a spare runs before it waits) and
:func:`die_with_parent` (a child ends with its server).

Must not: write anywhere but the scratch folder it is given, or to the server's stdout.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

WARM_RUNS = (
    (["version", "--stdio"], b""),
    (["generate", "--stdio", "-y"], b""),
    (["generate", "--stdio", "-y", "--no-files"], b""),
    (["config", "--stdio"], b'{"type":"quit"}\n'),
    (["login", "--stdio"], b'{"type":"quit"}\n'),
    (["update", "--stdio"], b'{"type":"quit"}\n'),
)
"""The runs made once in the server before it serves, each with its input: the two
that end by themselves read none, the others are told to quit at their first gate."""


def warm_up(scratch: str) -> None:
    """Import what any command needs and run each once in ``scratch``, its output and
    stderr on /dev/null; then freeze what the server holds out of the collector's walk."""
    import gc
    import io

    import statecharts
    from simulator.cli import main

    for command in statecharts.COMMANDS:
        statecharts.load_chart(command)
    for name in ("simulator.cli.session", "simulator.hosts.journal", "simulator.tools.calls"):
        __import__(name)
    home, project = Path(scratch, "home"), Path(scratch, "project")
    home.mkdir()
    project.mkdir()
    flags = ["--speed", "0", "--home", str(home), "--project", str(project)]
    flags += ["--journal", str(Path(scratch, "journal.jsonl"))]
    saved = os.dup(2)
    try:
        with open(os.devnull, "r+b") as null:
            os.dup2(null.fileno(), 2)
            for argv, given in WARM_RUNS:
                stdin = Path(scratch, "stdin")
                stdin.write_bytes(given)
                with contextlib.suppress(Exception), stdin.open("rb") as lines:
                    main(
                        [*argv, *flags], stdin=lines, stdout=null, stderr=io.StringIO(), environ={}
                    )
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    gc.collect()
    gc.freeze()


REHEARSED = (
    ["version", "--stdio", "--no-files"],
    ["generate", "--stdio", "-y", "--speed", "0", "--no-files"],
)
"""What a spare runs before it waits: the commands clients spawn the most."""


def rehearse() -> None:
    """In a spare: run :data:`REHEARSED` on /dev/null, as the warm-up did. A forked
    child shares the server's memory until it writes it, and every page a run writes
    (a reference count changed is a write) is copied then: ~3 ms of a short run when
    the client waits for it, none when the spare did it before."""
    import io

    from simulator.cli import main

    with open(os.devnull, "r+b") as null:
        for argv in REHEARSED:
            with contextlib.suppress(Exception):  # no variable of the server's applies
                main(argv, stdin=null, stdout=null, stderr=io.StringIO(), environ={})


def die_with_parent() -> None:
    """In a child: be killed (SIGKILL) when the server ends; end now if it already has."""
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _libc() -> Any:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return None


_LIBC: Any = None


def load_libc() -> None:
    """In the server, before it forks: load what :func:`die_with_parent` calls."""
    global _LIBC
    _LIBC = _libc()
