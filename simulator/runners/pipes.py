"""A session behind real OS pipes, in this process: for clients that take streams.

Owns: :class:`PipeProcess`, which runs one session in real time on a thread, behind a
pair of ``os.pipe()``s, and hands the client the ends a subprocess would give it:
``stdin`` to write commands to and ``stdout`` to read events from, as binary file
objects (:func:`spawn`) or as asyncio streams (:func:`spawn_async`). The bytes are
exactly those of ``python -m simulator``: the same runner writes them.

Signals are the process's business and stay untouched. As with a real zread, closing
``stdin`` does not end the session; :meth:`PipeProcess.terminate` does what SIGTERM
does to the process (quit), and ``close()`` sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from simulator.runners.stdio import ProcessRunner

if TYPE_CHECKING:
    from simulator.core.interface import SessionLike
    from simulator.core.session import Session
    from simulator.scenario import Scenario

__all__ = ["AsyncPipeProcess", "PipeProcess", "spawn", "spawn_async"]

STREAM_LIMIT = 64 << 20
"""The asyncio reader's line limit: a 5,000-page vm is a few MiB."""


class PipeProcess:
    """One session running on a thread behind OS pipes; like a ``subprocess.Popen``."""

    def __init__(
        self, session: SessionLike, *, scenario: Scenario | None = None, seed: int = 0
    ) -> None:
        """``session`` runs with the transport faults of ``scenario`` (none without
        one), drawn from ``seed``, as the process runs them."""
        self.session = session
        self.returncode: int | None = None
        in_r, self._in_w = os.pipe()
        self._out_r, out_w = os.pipe()
        # Closed by _serve when the run ends.
        stdin = open(in_r, "rb", buffering=0)  # noqa: SIM115
        stdout = open(out_w, "wb", buffering=0)  # noqa: SIM115
        self._runner = ProcessRunner(session, stdin, stdout, scenario=scenario, seed=seed)
        self._thread = threading.Thread(
            target=self._serve, args=(stdin, stdout), name=f"zread-sim {session.command}"
        )
        self._thread.daemon = True
        self._thread.start()

    def _serve(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        with stdin, stdout:
            self.returncode = self._runner.run()

    def terminate(self) -> None:
        """Quit, as SIGTERM makes the process quit (no signal reaches a thread)."""
        self._runner.terminate()

    def kill(self) -> None:
        """End the session at once, as SIGKILL ends the process (exit code -9)."""
        self._runner.kill()

    def take_fds(self) -> tuple[int, int]:
        """The client's ends (stdin write end, stdout read end); the caller owns them."""
        return self._in_w, self._out_r

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the session to end; its exit code, or None if still running."""
        self._thread.join(timeout)
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode


class FilePipeProcess(PipeProcess):
    """A :class:`PipeProcess` whose ends are binary file objects, like ``Popen``'s."""

    def __init__(
        self, session: SessionLike, *, scenario: Scenario | None = None, seed: int = 0
    ) -> None:
        super().__init__(session, scenario=scenario, seed=seed)
        in_w, out_r = self.take_fds()
        self.stdin: IO[bytes] = open(in_w, "wb")  # noqa: SIM115 - closed by close()
        self.stdout: IO[bytes] = open(out_r, "rb")  # noqa: SIM115 - closed by close()

    def close(self) -> None:
        """Close stdin, end the session as SIGTERM would, and wait for it."""
        if not self.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.stdin.close()
        self.terminate()
        if self.wait(1) is None:  # a hang: nothing ends it but this
            self.kill()
            self.wait(5)
        self.stdout.close()

    def __enter__(self) -> FilePipeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncPipeProcess:
    """A :class:`PipeProcess` seen through asyncio streams."""

    def __init__(
        self, process: PipeProcess, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader
    ) -> None:
        self.process = process
        self.stdin = stdin
        self.stdout = stdout

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int | None:
        """Wait for the session to end without blocking the loop; its exit code."""
        await asyncio.get_running_loop().run_in_executor(None, self.process.wait)
        return self.process.returncode

    def terminate(self) -> None:
        """Quit, as SIGTERM makes the process quit."""
        self.process.terminate()

    async def close(self) -> None:
        """Close stdin, end the session as SIGTERM would, and wait for it."""
        if not self.stdin.is_closing():
            self.stdin.close()
        self.process.terminate()
        await self.wait()


def _session(
    command: str, args: Sequence[str], scenario: str | Scenario, seed: int, speed: float
) -> tuple[Session, Scenario]:
    """The session, and the scenario whose transport faults its runner plays."""
    from simulator.launch import build_session
    from simulator.scenario import load_scenario

    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    return build_session(command, args, scenario=loaded, seed=seed, speed=speed), loaded


def spawn(
    command: str,
    *args: str,
    scenario: str | Scenario = "default",
    seed: int = 0,
    speed: float = 1.0,
) -> FilePipeProcess:
    """Run ``zread <command> *args --stdio`` behind pipes; binary file objects."""
    session, loaded = _session(command, args, scenario, seed, speed)
    return FilePipeProcess(session, scenario=loaded, seed=seed)


async def spawn_async(
    command: str,
    *args: str,
    scenario: str | Scenario = "default",
    seed: int = 0,
    speed: float = 1.0,
) -> AsyncPipeProcess:
    """Run ``zread <command> *args --stdio`` behind pipes; asyncio streams."""
    loop = asyncio.get_running_loop()
    session, loaded = _session(command, args, scenario, seed, speed)
    process = PipeProcess(session, scenario=loaded, seed=seed)
    in_w, out_r = process.take_fds()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT, loop=loop)
    # The transports own the file objects and close them.
    read_end = open(out_r, "rb", buffering=0)  # noqa: SIM115
    write_end = open(in_w, "wb", buffering=0)  # noqa: SIM115
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), read_end)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, write_end)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return AsyncPipeProcess(process, writer, reader)
