"""A fork server for the docs examples: one process imports pytest and the simulator
once, then forks a child for each example that runs with this interpreter, so an
example pays for its own run, not for the start-up of Python and pytest.

Owns: :class:`ForkServer` (the test side: start the server, run one script or pytest
in a child, wait for it within a time limit, kill its process group) and :func:`serve`
(the server, run as ``python -c`` with this file's text, so a child's ``sys.path``
starts with its working directory, as ``python -m pytest``'s and ``python SCRIPT``'s
do).

A child is what ``python SCRIPT ARGS`` or ``python -m pytest ARGS`` started afresh would
be, but for the start-up: a process and a process group of its own, its working
directory, its environment (only what the request gives; ``tempfile`` reads it again),
stdin from ``/dev/null``, stdout and stderr in files of their own, and the exit code
its run's ``SystemExit`` gives (1 for an uncaught exception, with its traceback on
stderr). The server imports what any run imports first, never this package's pytest
plugin: pytest marks the plugin for assertion rewriting when it loads it, and warns
when it was imported before.

Must not: run a request in the server itself, or let a child return into the server's
loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ForkServer", "Forked"]

PRELOADED = (
    "pytest",
    "_pytest.pytester",
    "simulator.runners.virtual",
    "simulator.pipes",
    "simulator.tools.calls",
    "simulator.tools.coverage",
    "simulator.hosts.executable",
    "statecharts",
)
"""What the server imports before it forks (the plugin excepted, see above)."""


@dataclass(frozen=True)
class Forked:
    """How a child ended: its exit code (None: killed at the time limit), its output."""

    code: int | None
    out: str
    err: str


class ForkServer:
    """The test side: one server process, one child at a time."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        """Start the server in ``cwd`` with ``env``, as a process would start there."""
        self._proc = subprocess.Popen(
            [sys.executable, "-c", Path(__file__).read_text(encoding="utf-8")],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # unbuffered: select() sees every line not read yet
            start_new_session=True,
        )

    def run(
        self, kind: str, argv: list[str], cwd: Path, env: dict[str, str], timeout: float, logs: Path
    ) -> Forked:
        """``argv`` in a child in ``cwd``: ``kind`` "script" runs ``python *argv``,
        "pytest" runs ``python -m pytest *argv``; its stdout and stderr are written in
        the folder ``logs``. Past ``timeout`` seconds its process group is killed; so is
        whatever it left running in it when it ends."""
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        out, err = logs / "stdout", logs / "stderr"
        request = {"kind": kind, "argv": argv, "cwd": str(cwd), "env": env}
        line = memoryview(json.dumps(request | {"out": str(out), "err": str(err)}).encode() + b"\n")
        while line:
            line = line[stdin.write(line) or 0 :]
        pid = int(stdout.readline() or self._gone())
        code: int | None = None
        if select.select([stdout], [], [], timeout)[0]:
            code = int(stdout.readline() or self._gone())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if code is None:
            stdout.readline()  # the status of the child killed
        read = {"encoding": "utf-8", "errors": "replace"}
        return Forked(code, out.read_text(**read), err.read_text(**read))

    def _gone(self) -> bytes:
        raise AssertionError(f"the fork server ended (exit {self._proc.wait(10)})")

    def close(self) -> None:
        """End the server (at the end of its input) and wait for it."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:  # still waiting for a child a test gave up on
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _child(request: dict[str, Any]) -> None:
    """In a forked child: become the run ``request`` asks for. Never returns: the run
    ends in ``SystemExit`` or an exception, and either ends the process."""
    import tempfile

    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(file, fd)
        os.close(file)
    if request["kind"] == "pytest":
        import pytest

        sys.argv = [str(Path(pytest.__file__).with_name("__main__.py")), *request["argv"]]
        raise SystemExit(pytest.console_main())
    import runpy

    sys.argv = list(request["argv"])
    runpy.run_path(sys.argv[0], run_name="__main__")
    raise SystemExit(0)


def serve() -> None:
    """The server: import, then fork a child for each request line on stdin; answer
    each with a line of the child's pid, then one of its exit code."""
    import gc
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # what the server holds is garbage no child needs to look through
    while line := sys.stdin.buffer.readline():
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        os.write(1, f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        os.write(1, f"{os.waitstatus_to_exitcode(status)}\n".encode())


if __name__ == "__main__":
    serve()
