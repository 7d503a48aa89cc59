"""The process runner: N real ``zread`` processes over real pipes, C at a time.

Owns: :class:`Processes`, which writes a ``zread`` executable to a temporary folder put
first on PATH (:func:`simulator.hosts.executable.write_zread_executable`), starts the
processes, answers their gates with a :class:`~simulator.tools.client.ReferenceClient`,
checks every transcript (each line a JSON object with vm, waiting_for, done and error;
the last done) and samples each process's peak RSS (``VmHWM``, or psutil's RSS).

Lateness comes from the children: each is started with
:data:`~simulator.runners.stdio.LATENESS_FILE` naming a file of its own, where a
``zread`` that supports it writes, at exit, how late each of its timers fired
(:func:`read_lateness`: ``{"lateness_s": [seconds, ...]}``). When no child wrote one,
lateness is "not measured".

Must not: change what a process is asked to do beyond the client's answers, parse
arguments or write to the terminal (progress goes to a callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from simulator.hosts.executable import write_zread_executable
from simulator.runners.stdio import LATENESS_FILE
from simulator.tools.client import ReferenceClient
from simulator.tools.load.common import EVENT_KEYS, LoadConfig, interrupt, watch_children
from simulator.tools.load.memory import RssSampler, peak_rss_kb
from simulator.tools.load.stats import Progress, Stats, build_summary, tick


def read_lateness(path: str) -> list[float] | None:
    """The lateness samples (seconds) a child wrote to ``path``; None if none are there."""
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    samples = data.get("lateness_s") if isinstance(data, dict) else None
    if not isinstance(samples, list):
        return None
    return [float(v) for v in samples if isinstance(v, int | float) and v == v]


class Processes:
    """N ``zread`` processes, C at a time; see the module docstring."""

    def __init__(self, config: LoadConfig, scenario_arg: str, progress: Progress | None) -> None:
        self.config = config
        self.scenario_arg = scenario_arg
        self.progress = progress
        self.stats: Stats
        self.live: dict[int, asyncio.subprocess.Process] = {}
        self.rss_kb: list[int] = []
        self.stopping = False
        self.quitting: set[int] = set()
        self.sampler = RssSampler()
        self.reported = 0
        """Children that wrote a lateness file."""
        self.folder = ""

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        for index, proc in self.live.items():
            self.quitting.add(index)
            # quit, as a client would: it is taken in every state, even before the
            # process is up (where a SIGTERM would kill it), and the done event comes.
            if proc.stdin is not None and not proc.stdin.is_closing():
                with contextlib.suppress(ConnectionError, RuntimeError):
                    proc.stdin.write(b'{"type":"quit"}\n')

    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        watch_children()
        self.stats = Stats(loop.time)
        with tempfile.TemporaryDirectory(prefix="zread-load-") as folder:
            self.folder = folder
            write_zread_executable(Path(folder))
            env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
            env.setdefault("ZREAD_SIM_FILES", "0")  # a load test writes no zread files
            ticker = loop.create_task(tick(self.stats, lambda: len(self.live), None, self.progress))
            if self.config.duration is not None:
                loop.call_later(self.config.duration, self.stop)
            with interrupt(loop, self.stop), self.sampler.running():
                await self._spawn(loop, env)
            ticker.cancel()
        self.stats.sample(0)
        summary = build_summary(self.config, self.stats, lateness=self.reported > 0)
        summary["lateness_reported_by"] = self.reported
        summary.update(_memory_figures(sorted(self.rss_kb)))
        summary["load_tool_peak_rss_mb"] = round((peak_rss_kb() or 0) / 1024, 1)
        return summary

    def _more(self) -> bool:
        """Whether another process is to start: not stopping, and sessions left."""
        sessions = self.config.sessions
        return not self.stopping and (sessions is None or self.stats.started < sessions)

    async def _spawn(self, loop: asyncio.AbstractEventLoop, env: dict[str, str]) -> None:
        """Start a process whenever one of the C slots is free; return when all ended."""
        assert self.config.concurrency is not None
        slots = asyncio.Semaphore(self.config.concurrency)
        tasks: list[asyncio.Task[None]] = []
        while self._more():
            await slots.acquire()
            if self.stopping:
                break
            index = self.stats.started
            self.stats.started += 1
            task = loop.create_task(self._one(index, env))
            task.add_done_callback(lambda _: slots.release())
            tasks.append(task)
            tasks = [t for t in tasks if not t.done()] if len(tasks) > 1024 else tasks
        await asyncio.gather(*tasks)

    async def _one(self, index: int, env: dict[str, str]) -> None:
        """Session ``index``: start it, answer it to its end, count how it went."""
        started = self.stats.clock()
        lateness_file = os.path.join(self.folder, f"lateness-{index}.json")
        proc = await self._start(index, env, lateness_file)
        if proc is None:
            return
        self.live[index] = proc
        self.sampler.watch(proc.pid)
        transcript = _Transcript()
        code = await self._converse(proc, transcript)
        self.live.pop(index, None)
        self._take_lateness(lateness_file)
        hwm = self.sampler.forget(proc.pid)
        if hwm is not None:
            self.rss_kb.append(hwm)
        self.stats.per_session[index] = {
            "index": index,
            "seed": self.config.seed + index,
            "start": round(started - self.stats.started_at, 4),
            "events": transcript.events,
            "bytes": transcript.size,
            "outcome": self._count(index, transcript.verdict(code)),
            "rss_kb": hwm,
        }

    async def _start(
        self, index: int, env: dict[str, str], lateness_file: str
    ) -> asyncio.subprocess.Process | None:
        """The ``zread`` process of session ``index``; None (an error counted) if none."""
        config = self.config
        argv = [config.command, "--stdio", *config.args, "--scenario", self.scenario_arg]
        argv += ["--seed", str(config.seed + index), "--speed", repr(config.speed)]
        try:
            return await asyncio.create_subprocess_exec(
                "zread",
                *argv,
                env=dict(env, **{LATENESS_FILE: lateness_file}),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                limit=64 << 20,
            )
        except OSError as error:
            self.stats.error(index, f"cannot start zread: {error}")
            return None

    async def _converse(self, proc: asyncio.subprocess.Process, transcript: _Transcript) -> int:
        """Read ``proc``'s lines and answer its gates until it ends; its exit code.

        Past the timeout it is killed, and the transcript says so."""
        assert proc.stdout is not None
        assert proc.stdin is not None
        client = ReferenceClient()
        try:
            async with asyncio.timeout(self.config.timeout):
                while line := await proc.stdout.readline():
                    self.stats.events += 1
                    self.stats.bytes += len(line)
                    event = transcript.take(line)
                    answer = None if event is None else client.answer(event)
                    if answer is not None:
                        await _send(proc.stdin, answer)
                proc.stdin.close()
                return await proc.wait()
        except TimeoutError:
            transcript.problem = (
                transcript.problem or f"no done:true within {self.config.timeout:g} s"
            )
            proc.kill()
            return await proc.wait()

    def _take_lateness(self, lateness_file: str) -> None:
        """Count the lateness a child wrote, if it wrote any."""
        samples = read_lateness(lateness_file)
        if samples is not None:
            self.reported += 1
            for seconds in samples:
                self.stats.late(seconds)

    def _count(self, index: int, problem: str) -> str:
        """Count session ``index``'s outcome (an error if ``problem``); its name."""
        if problem:
            self.stats.error(index, problem)
            return "error"
        if index in self.quitting:
            self.stats.interrupted += 1
            return "interrupted"
        self.stats.completed += 1
        return "completed"


async def _send(stdin: asyncio.StreamWriter, answer: bytes) -> None:
    """Write an answer to a process that may have closed its input meanwhile."""
    if not stdin.is_closing():
        with contextlib.suppress(ConnectionError):
            stdin.write(answer)
            await stdin.drain()


def _memory_figures(rss: list[int]) -> dict[str, Any]:
    """The summary's memory figures from the peak RSS (kB, sorted) of each process."""
    if not rss:
        # No /proc: the largest reaped child, which counts its forked copy of this
        # process before exec.
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return {
            "rss_per_process_mb": None,
            "rss_per_session_kb": None,
            "peak_rss_mb": round(children / 1024, 1),
            "peak_rss_note": "getrusage(RUSAGE_CHILDREN): includes the fork",
        }
    median = rss[len(rss) // 2]
    return {
        "rss_per_process_mb": {
            "min": round(rss[0] / 1024, 1),
            "median": round(median / 1024, 1),
            "max": round(rss[-1] / 1024, 1),
            "sampled": len(rss),
        },
        "rss_per_session_kb": median,
        "peak_rss_mb": round(rss[-1] / 1024, 1),
    }


@dataclasses.dataclass
class _Transcript:
    """What one process wrote, counted and checked line by line."""

    events: int = 0
    size: int = 0
    """Bytes, newlines included."""
    last: dict[str, Any] | None = None
    """The last event."""
    problem: str = ""
    """The first thing wrong with the transcript, or ''."""

    def take(self, line: bytes) -> dict[str, Any] | None:
        """Count and check ``line``; the event on it, or None if it holds none."""
        self.events += 1
        self.size += len(line)
        event, why = _check_line(line, self.last)
        self.problem = self.problem or why
        if event is not None:
            self.last = event
        return event

    def verdict(self, code: int) -> str:
        """What went wrong with the process that exited with ``code``, or ''."""
        if self.problem:
            return self.problem
        if code:
            return f"exit code {code}"
        if self.last is None or not self.last["done"]:
            return "the transcript ended without done:true"
        return ""


def _check_line(line: bytes, last: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """The event on ``line`` and '' , or None and what is wrong with the line."""
    if last is not None and last.get("done"):
        return None, f"a line after done:true: {line[:80]!r}"
    if not line.endswith(b"\n"):
        return None, f"incomplete last line: {line[:80]!r}"
    try:
        event = json.loads(line)
    except ValueError:
        return None, f"not a JSON line: {line[:80]!r}"
    if not isinstance(event, dict) or any(key not in event for key in EVENT_KEYS):
        return None, f"not an event (keys {', '.join(EVENT_KEYS)}): {line[:80]!r}"
    return event, ""
