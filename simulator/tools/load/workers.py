"""Every core: K event loops in K processes behind one load command.

Owns: :class:`Workers`, the parent, which starts K worker processes, gives each its
share (session i to worker i % K, the ramp's schedule kept global), one origin for that
schedule, draws their progress as one, and merges their summaries
(:func:`simulator.tools.load.merge.merge`); and :func:`worker_main`, a worker
(``python -m simulator.tools.load.workers``): one
:class:`~simulator.tools.load.inprocess.InProcess` loop.

A worker is a plain program spoken to in JSON lines, one object a line. On its stdin:
its order (``{"config": ..., "worker": w, "workers": K}``), then ``{"go": ORIGIN}``,
then ``{"stop": true}`` or the end of input, either of which stops it as the duration
does. On its stdout: ``{"ready": true}`` once warmed up, ``{"tick": POINT, "finished":
N}`` every tick, then ``{"summary": SUMMARY}``; on its stderr, what went wrong.

Why processes started with :mod:`asyncio.subprocess` (this Python, this module) and
not :mod:`multiprocessing`: the parent reads K pipes on its own loop, with no thread,
no pickling and no queue; nothing is forked from a process that already has a loop
(and possibly threads); nothing the parent holds is copied into a worker, so each
worker's RSS figures are its own; and a worker's summary is the one ``load --json``
writes, so workers merge exactly as ``load --merge`` merges hosts, by one function.

The origin is a reading of :func:`time.monotonic`, the clock of asyncio's loops, which
all processes of one machine share. Each worker runs in a session of its own, so a
Ctrl-C at the terminal reaches only the parent, which passes it on as ``stop``.

Must not: parse arguments or write to the terminal (progress goes to a callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

from simulator.errors import SimulatorBug
from simulator.tools.load.common import LoadConfig, interrupt, watch_children
from simulator.tools.load.stats import Histogram, bins_percentile_ms

Draw = Callable[[int, dict[str, Any]], None]
"""Told the sessions finished in all and the newest merged point, after each tick."""

_LEAD = 0.05
"""Seconds between sending ``go`` and the origin: every worker hears it in time."""
_LIMIT = 1 << 28
"""The longest line a worker may write (its summary, with every session's row)."""


class WorkerError(SimulatorBug):
    """A worker process that ended without its summary."""


class _Order(msgspec.Struct):
    config: dict[str, Any]
    worker: int
    workers: int


class Workers:
    """K worker processes, one summary; see the module docstring."""

    def __init__(self, config: LoadConfig, count: int, draw: Draw | None) -> None:
        self.config = config
        self.count = count
        self.draw = draw
        self.procs: list[asyncio.subprocess.Process] = []
        self.latest: list[tuple[int, dict[str, Any]] | None] = [None] * count
        self.stopping = False
        self.parts: list[dict[str, Any]] = []
        """Each worker's own summary, once the run is over."""

    def stop(self) -> None:
        """Ctrl-C: every worker stops as at the end of its duration."""
        if self.stopping:
            return
        self.stopping = True
        for proc in self.procs:
            self._send(proc, {"stop": True})

    @staticmethod
    def _send(proc: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
        if proc.stdin is not None and not proc.stdin.is_closing():
            with contextlib.suppress(ConnectionError, RuntimeError):
                proc.stdin.write(msgspec.json.encode(message) + b"\n")

    async def run(self) -> dict[str, Any]:
        from simulator.tools.load.merge import merge

        loop = asyncio.get_running_loop()
        watch_children()
        try:
            await self._spawn()
            with interrupt(loop, self.stop):
                await self._start_together()
                parts = await asyncio.gather(
                    *(self._follow(w, proc) for w, proc in enumerate(self.procs))
                )
        finally:
            await self._kill_the_rest()
        self.parts = list(parts)
        names = [f"worker {worker}" for worker in range(self.count)]
        summary = merge(self.parts, names, "workers")
        summary["concurrency"] = self.config.concurrency
        summary["workers"] = self.count
        return summary

    async def _spawn(self) -> None:
        """Start the K workers, each given its order (they import, then say ready)."""
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, PYTHONPATH=root if not path else f"{root}{os.pathsep}{path}")
        config = dataclasses.asdict(self.config)
        config.update(progress=False, workers=1)
        for worker in range(self.count):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "simulator.tools.load.workers",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
                limit=_LIMIT,
            )
            self.procs.append(proc)
            self._send(proc, {"config": config, "worker": worker, "workers": self.count})

    async def _start_together(self) -> None:
        """Once every worker is ready: one origin for all, a moment ahead."""
        for worker, proc in enumerate(self.procs):
            message = await self._read(worker, proc)
            if not message.get("ready"):
                raise await self._failed(worker, proc, "no ready line")
        origin = time.monotonic() + _LEAD
        for proc in self.procs:
            self._send(proc, {"go": origin})
        if self.stopping:  # Ctrl-C while they warmed up
            for proc in self.procs:
                self._send(proc, {"stop": True})

    async def _kill_the_rest(self) -> None:
        """Kill the workers still running (after a failure) and reap them all."""
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()

    async def _read(self, worker: int, proc: asyncio.subprocess.Process) -> dict[str, Any]:
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if not line:
            raise await self._failed(worker, proc, "its output ended")
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError:
            raise await self._failed(worker, proc, f"not a JSON line: {line[:80]!r}") from None
        if not isinstance(message, dict):
            raise await self._failed(worker, proc, f"not a message: {line[:80]!r}")
        return message

    async def _failed(
        self, worker: int, proc: asyncio.subprocess.Process, what: str
    ) -> WorkerError:
        assert proc.stderr is not None
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        err = (await proc.stderr.read()).decode(errors="replace").strip().splitlines()
        code = await proc.wait()
        said = f": {err[-1]}" if err else ""
        return WorkerError(f"worker {worker} failed ({what}, exit code {code}){said}")

    async def _follow(self, worker: int, proc: asyncio.subprocess.Process) -> dict[str, Any]:
        """A worker's ticks, drawn as they come; its summary."""
        while True:
            message = await self._read(worker, proc)
            if "summary" in message:
                if proc.stdin is not None:
                    proc.stdin.close()
                await proc.wait()
                summary: dict[str, Any] = message["summary"]
                return summary
            if "tick" in message:
                self.latest[worker] = (int(message["finished"]), message["tick"])
                self._draw()

    def _draw(self) -> None:
        if self.draw is None:
            return
        latest = [item for item in self.latest if item is not None]
        hist = Histogram()
        for _, point in latest:
            for index, count in point.get("late_bins", []):
                hist.counts[index] += count
                hist.total += count
        total = hist.total
        p99 = bins_percentile_ms(enumerate(hist.counts), total, 99) if total else None
        point = {
            "t": max(p["t"] for _, p in latest),
            "live": sum(p["live"] for _, p in latest),
            "events_per_s": sum(p["events_per_s"] for _, p in latest),
            "p99_ms": p99,
        }
        self.draw(sum(finished for finished, _ in latest), point)


# -- a worker --------------------------------------------------------------------------


def _write(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(message) + b"\n")
    sys.stdout.buffer.flush()


class _Stdin:
    """The parent's lines, read from the file descriptor (no buffer hides any)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.rest = b""

    def line(self) -> bytes:
        while b"\n" not in self.rest:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                break
            self.rest += chunk
        line, newline, self.rest = self.rest.partition(b"\n")
        return line + newline


async def _run(runner: Any, origin: float, stdin: _Stdin) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    task = loop.create_task(runner.run(origin))
    await asyncio.sleep(0)  # the run has its hub and clock: it can be stopped

    def heard() -> None:
        data = b""
        with contextlib.suppress(OSError):
            data = os.read(stdin.fd, 1 << 16)
        if not data or b"stop" in data:
            loop.remove_reader(stdin.fd)
            runner.stop()

    if b"stop" in stdin.rest:
        runner.stop()
    else:
        loop.add_reader(stdin.fd, heard)
    try:
        summary: dict[str, Any] = await task
    finally:
        loop.remove_reader(stdin.fd)
    return summary


def worker_main() -> int:
    """One worker: its order on stdin, its ticks and summary on stdout; the exit code."""
    from simulator.scenario import load_scenario
    from simulator.tools.load.inprocess import InProcess

    stdin = _Stdin(sys.stdin.fileno())
    try:
        order = msgspec.json.decode(stdin.line(), type=_Order)
        config = LoadConfig(**order.config)
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as error:
        sys.stderr.write(f"zread-sim load worker: not an order on stdin: {error}\n")
        return 2

    def tick(stats: Any, point: dict[str, Any]) -> None:
        _write({"tick": point, "finished": stats.finished})

    runner = InProcess(
        config,
        load_scenario(config.scenario),
        tick,
        worker=order.worker,
        workers=order.workers,
    )
    runner.prepare()
    _write({"ready": True})
    try:
        origin = float(msgspec.json.decode(stdin.line())["go"])
    except (msgspec.DecodeError, KeyError, TypeError, ValueError):
        return 0  # the parent went away (or said stop) before the start: nothing ran
    summary = asyncio.run(_run(runner, origin, stdin))
    summary["concurrency"] = runner.slots
    _write({"summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(worker_main())
