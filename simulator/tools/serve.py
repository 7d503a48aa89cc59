"""A warm server (``zread-sim serve``) for a test session.

Owns: starting one as a process and stopping it (:class:`ServerProcess`), and the one a
pytest session shares (:func:`start_for_tests`, what ``zread_bin`` calls). The server
and its command line are :mod:`simulator.warmserver`'s, the launcher
:mod:`simulator.launcher`'s; docs/serve.md says how to use them.

``serve`` prints one line, ``ZREAD_SIM_SERVER=<socket path>``, once it is ready, and
runs in the foreground until SIGTERM, SIGINT or SIGHUP, or until its stdin, a pipe from
the process that started it, ends (``--stop-at-eof``): a test session killed hard
(SIGKILL, the OOM killer) takes its server with it. A ``zread`` started with that
variable set (or with it baked into its script) runs in a child of the server, on its
own standard streams, and exits as it would have: a client sees no difference but the
time it takes.

Must not: import the server: it runs in a process of its own.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from simulator.launcher import VARIABLE

START_TIMEOUT = 60.0
"""Seconds ``start_for_tests`` waits for the server's ready line."""


# -- for a test session -----------------------------------------------------------------------


class ServerProcess:
    """A ``python -m simulator serve`` process started for a test session."""

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "simulator", "serve", "--stop-at-eof"],
            cwd=root,  # -m finds the simulator this module is part of
            env=env,
            stdin=subprocess.PIPE,  # its end (this process gone, even killed) stops the server
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.path = self._ready_line()

    def _ready_line(self) -> str:
        """The socket path the server prints; "" when it did not say it in time."""
        stdout = self.proc.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            ready = selector.select(START_TIMEOUT)
        line = stdout.readline().decode("utf-8", "replace").strip() if ready else ""
        stdout.close()
        name, _, path = line.partition("=")
        if name != VARIABLE or not path:
            self.stop()
            return ""
        return path

    def stop(self) -> None:
        """End the server (its children are killed) and wait for it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()


_KEYS: dict[str, Any] = {}


def start_for_tests(config: Any) -> dict[str, str]:
    """What ``zread_bin`` bakes into its script: ``ZREAD_SIM_SERVER``, the socket of one
    server for the whole pytest session ``config`` runs (started at the first call,
    stopped at the session's end); nothing with ``--zread-no-server``, or when the
    server did not start (the script then runs each command itself)."""
    if config.getoption("zread_no_server", default=False):
        return {}
    import pytest

    key = _KEYS.setdefault("server", pytest.StashKey[ServerProcess]())
    server: ServerProcess | None = config.stash.get(key, None)
    if server is None:
        server = ServerProcess()
        config.stash[key] = server
        config.add_cleanup(server.stop)
    return {VARIABLE: server.path} if server.path else {}
