"""Fuzz every driver through real processes: no line kills one, none goes unanswered.

For each driver, ``--lines`` lines (default 100,000) go to real ``python -m simulator
<driver> --stdio --no-files`` processes over pipes, one at a time: valid commands (the
reference client's answer to the last event), valid commands with wrong params,
arbitrary JSON, bytes that are not JSON or not UTF-8, blank and near-blank lines, and
the shapes that break decoders (deep nesting, integers of thousands of digits,
escaped lone surrogates, ``\\v``). A process that writes ``done:true`` is replaced by a
new one (another seed, another built-in scenario).

Two ways, each process one of them at random:

- plain: ``--speed 1e9``, so no timer fires while the lines go in (the selector loop);
- controlled: ``--speed 0.05 --control stdio`` with the timers paused; every 20 lines they
  are resumed until they write an event (half a second at most) and paused again, so
  the session moves on to the states its
  timers lead to (the asyncio loop, control frames on the same pipes). An
  ``authorize`` request from login is answered, approve or not, at random.

Checked, and reported as counts (the run fails, exit 1, on any):

- tracebacks or ``internal error`` on stderr, and exit codes other than 0;
- a line answered by no event or by more than one (a blank line by any): each
  non-blank line's event is read before the next line goes, and after ``done`` the
  process must write nothing more;
- a rejection that changes the vm or ``waiting_for`` (its bytes are compared with the
  previous event's), or that is ``done``;
- an event line that is not one JSON object with ``vm, waiting_for, done, error`` in
  that order.

``version`` is done at its first event: its processes get their lines all at once and
must write that one event and exit 0.

    python benchmarks/fuzz.py [--lines 100000] [--drivers generate,config] [--seed 0]
        [--jobs 2]

Nothing here is timed against a target: the figures are how many lines, processes and
seconds it took.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from _common import HERE, python

ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from simulator.scenario import builtin_names, load_scenario  # noqa: E402
from simulator.tools.client import ReferenceClient  # noqa: E402
from statecharts import COMMANDS, load_chart  # noqa: E402

DRIVERS = tuple(COMMANDS)
SCENARIOS = [name for name in builtin_names() if not load_scenario(name).faults]
"""The built-in scenarios without transport faults (a hang, an exit, noise on stdout:
what they do to the stream is what their own tests check)."""
KEYS = ["vm", "waiting_for", "done", "error"]
READ_TIMEOUT = 20.0
BREATH = 0.5
"""How long, at most, the timers of a controlled process run each time they are let go
(until the first event they write)."""
TYPES = sorted({kind for name in DRIVERS for kind in load_chart(name).commands} | {"quit"})
ENDING = frozenset({"quit", "cancel", "save", "skip_all", "restart", "skip_restart"})
LASTING = [kind for kind in TYPES if kind not in ENDING]
PARAM_KEYS = ("wiki_id", "current", "action", "task_id", "fields", "region", "model")
ODDITIES = [
    b'{"type":"quit","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"type":"save","params":{"x":' + b"{" * 3000 + b"}" * 3000 + b"}}",
    b'{"type":"update_fields","params":{"fields":{"max_retries":"' + b"1" * 4301 + b'"}}}',
    b'{"type":"retry","params":{"task_id":' + b"9" * 5000 + b"}}",
    b'{"type":"select_model","params":{"model":"\\ud800"}}',
    b'{"type":"\\udfff"}',
    b'{"type":"quit","params":5}',
    b"\x0b",
    b"\x0c\r",
    b"\xff\xfe{}",
    b"{}",
    b"null",
    b"[]",
    b'{"type":null}',
    b'{"type":5}',
    b'{"type":"_start"}',
    b'{"type":"retry","params":{"task_id":1e400}}',
]


def json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63, -(2**70), rng.randrange(-1000, 1000)])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e300, 1e-7, rng.uniform(-1e6, 1e6)])
    if kind in (4, 5):
        alphabet = 'aé日<>&"\\\n\t\u2028 \x00'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(8)))
    if kind in (6, 7):
        return [json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice((*PARAM_KEYS, "x", "")): json_value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def fuzz_line(rng: random.Random, last: dict[str, Any], client: ReferenceClient) -> bytes:
    """One line (without its newline) to send after the event ``last``."""
    roll = rng.random()
    ends = rng.random() < 0.01  # a command that ends the session, now and then
    if roll < 0.25:
        answer = client.answer(last)
        if answer is not None and (ends or json.loads(answer)["type"] not in ENDING):
            return answer.rstrip(b"\n")
    if roll < 0.55:
        waiting = [w for w in last.get("waiting_for") or [] if w != "quit"] or TYPES
        if not ends:
            waiting = [w for w in waiting if w not in ENDING] or LASTING
        params: Any = {rng.choice(PARAM_KEYS): json_value(rng) for _ in range(rng.randrange(3))}
        if rng.random() < 0.2:
            params = json_value(rng)
        return json.dumps({"type": rng.choice(waiting), "params": params}).encode()
    if roll < 0.75:
        kinds = TYPES if ends else [*LASTING, "", "x"]
        return json.dumps({"type": rng.choice(kinds), "params": json_value(rng)}).encode()
    if roll < 0.85:
        return rng.choice(ODDITIES)
    if roll < 0.9:
        return rng.choice([b"", b" ", b"\t", b"\r", b" \t\r"])
    if roll < 0.95:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).replace(b"\n", b"")
    return json.dumps(json_value(rng)).encode()


@dataclass
class Tally:
    lines: int = 0
    answered: int = 0
    rejected: int = 0
    processes: int = 0
    timer_events: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def problem(self, kind: str, example: str) -> None:
        self.problems[kind] += 1
        self.examples.setdefault(kind, example[:300])

    def add(self, other: Tally) -> None:
        self.lines += other.lines
        self.answered += other.answered
        self.rejected += other.rejected
        self.processes += other.processes
        self.timer_events += other.timer_events
        self.problems.update(other.problems)
        for kind, example in other.examples.items():
            self.examples.setdefault(kind, example)


class Process:
    """One simulator process and a thread reading its stdout line by line."""

    def __init__(self, argv: list[str], cwd: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
        env["HOME"] = cwd
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send(self, data: bytes) -> bool:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            return False
        return True

    def read(self, timeout: float = READ_TIMEOUT) -> bytes | None:
        """The next stdout line; b"" at its end; None when none came in time."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def end(self) -> tuple[int, bytes]:
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._stderr_reader.join(5)
        return code, self.stderr


def event_of(raw: bytes, tally: Tally) -> dict[str, Any] | None:
    try:
        event = json.loads(raw)
    except ValueError:
        tally.problem("a stdout line that is not JSON", repr(raw))
        return None
    if not isinstance(event, dict) or list(event) != KEYS or not raw.endswith(b"\n"):
        tally.problem("an event line of the wrong shape", repr(raw))
        return None
    return event


def head(raw: bytes) -> bytes:
    return raw[: raw.rfind(b',"done":')]


class Driven:
    """One process as the fuzz drives it, with the events it wrote so far."""

    def __init__(self, driver: str, rng: random.Random, work: str, tally: Tally) -> None:
        self.tally, self.rng = tally, rng
        self.controlled = rng.random() < 0.5
        scenario = rng.choice(SCENARIOS)
        argv = [python(), "-m", "simulator", driver, "--stdio", "--no-files"]
        argv += ["--scenario", scenario, "--seed", str(rng.randrange(1000))]
        if driver == "generate" and rng.random() < 0.5:
            argv.append("-y")
        argv += ["--speed", "0.05", "--control", "stdio"] if self.controlled else ["--speed", "1e9"]
        self.name = " ".join(argv[3:])
        self.proc = Process(argv, work)
        self.client = ReferenceClient()
        self.request_id = 0
        self.last_raw = b""
        self.last: dict[str, Any] = {}
        self.done = False
        tally.processes += 1

    # Reading: events, and control frames answered or matched.

    def next_event(self) -> bytes | None:
        """The next event line, control frames seen to on the way."""
        while True:
            raw = self.proc.read()
            if raw is None:
                self.tally.problem("no event within 20 s", self.name)
                return None
            if raw == b"":
                return b""
            if raw.startswith(b'{"type":"control_'):
                self.control_frame(raw)
                continue
            return raw

    def control_frame(self, raw: bytes) -> tuple[str, Any]:
        frame = json.loads(raw)
        if frame["type"] == "control_request":  # login's authorize: play the user
            answer = {"approve": self.rng.random() < 0.7}
            self.proc.send(
                json.dumps(
                    {
                        "type": "control_response",
                        "response": {
                            "subtype": "success",
                            "request_id": frame["request_id"],
                            "response": answer,
                        },
                    }
                ).encode()
                + b"\n"
            )
            return "", None
        if frame["type"] == "control_response":
            response = frame["response"]
            return str(response.get("request_id", "")), response.get("response")
        return "", None

    def control(self, subtype: str) -> Any:
        """Ask for ``subtype``: its answer, or None; the events before it are timer
        events."""
        self.request_id += 1
        rid = f"fuzz-{self.request_id}"
        frame = {"type": "control_request", "request_id": rid, "request": {"subtype": subtype}}
        if not self.proc.send(json.dumps(frame).encode() + b"\n"):
            return None
        while True:
            raw = self.proc.read()
            if raw is None:
                self.tally.problem(f"no answer to {subtype} within 20 s", self.name)
                return None
            if raw == b"":
                return None
            if raw.startswith(b'{"type":"control_'):
                answered, answer = self.control_frame(raw)
                if answered == rid:
                    return answer
                continue
            self.timer_event(raw)

    def start(self) -> bool:
        raw = self.next_event()
        if not raw:
            self.tally.problem("no first event", self.name)
            return False
        event = event_of(raw, self.tally)
        if event is None:
            return False
        self.last_raw, self.last, self.done = raw, event, bool(event["done"])
        if self.controlled and not self.done:
            self.control("pause")
        return True

    def send(self, line: bytes) -> None:
        self.tally.lines += 1
        if not self.proc.send(line + b"\n"):
            self.tally.problem("stdin closed before done", self.name)
            self.done = True
            return
        if not line.strip(b" \t\r"):
            return  # a blank line: no event (the count at the end says if one came)
        raw = self.next_event()
        if not raw:
            self.tally.problem("a line answered by no event", f"{self.name}: {line[:200]!r}")
            self.done = True
            return
        event = event_of(raw, self.tally)
        if event is None:
            return
        self.tally.answered += 1
        if event["error"]:
            self.tally.rejected += 1
            if event["done"] or head(raw) != head(self.last_raw):
                self.tally.problem(
                    "a rejection that changed the vm",
                    f"{self.name}: {line[:200]!r} -> {raw[:200]!r}",
                )
        self.last_raw, self.last = raw, event
        self.done = bool(event["done"])

    def breathe(self) -> None:
        """Controlled: let the timers run for a moment, then pause them again."""
        if self.controlled and not self.done:
            snapshot = self.control("snapshot")
            if not isinstance(snapshot, dict) or not snapshot.get("timers"):
                return  # a gate: only a line moves it on
            self.control("resume")
            deadline = time.monotonic() + BREATH
            while not self.done and (left := deadline - time.monotonic()) > 0:
                raw = self.proc.read(left)
                if not raw:
                    break
                if raw.startswith(b'{"type":"control_'):
                    self.control_frame(raw)
                    continue
                self.timer_event(raw)
                break  # one timer event at least: the session has moved on
            if not self.done:
                self.control("pause")

    def timer_event(self, raw: bytes) -> None:
        event = event_of(raw, self.tally)
        self.tally.timer_events += 1
        if event is not None:
            self.last_raw, self.last = raw, event
            self.done = bool(event["done"])

    def finish(self) -> None:
        if not self.done:
            self.tally.lines += 1
            self.proc.send(b'{"type":"quit"}\n')
            raw = self.next_event()
            if raw:
                event = event_of(raw, self.tally)
                if event is not None and not event["done"]:
                    self.tally.problem("quit did not end the session", self.name)
        while (raw := self.proc.read(5.0)) not in (b"", None):
            if not raw.startswith(b'{"type":"control_'):
                self.tally.problem("an event after done", f"{self.name}: {raw[:200]!r}")
        code, stderr = self.proc.end()
        if b"Traceback" in stderr:
            self.tally.problem("a traceback", f"{self.name}: {stderr[-400:]!r}")
        if b"internal error" in stderr:
            self.tally.problem("an internal error", f"{self.name}: {stderr[-400:]!r}")
        if code != 0:
            self.tally.problem(f"exit {code}", f"{self.name}: {stderr[-300:]!r}")


def fuzz_driver(driver: str, lines: int, seed: int) -> Tally:
    rng = random.Random(f"{driver}-{seed}")
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{driver}-") as work:
        if driver == "version":
            return fuzz_version(rng, lines, work, tally)
        sent = 0
        while sent < lines:
            driven = Driven(driver, rng, work, tally)
            if driven.start():
                count = 0
                while not driven.done and sent < lines and count < 2000:
                    driven.send(fuzz_line(rng, driven.last, driven.client))
                    sent, count = sent + 1, count + 1
                    if count % 20 == 0:
                        driven.breathe()
            driven.finish()
    return tally


def fuzz_version(rng: random.Random, lines: int, work: str, tally: Tally) -> Tally:
    sent = 0
    while sent < lines:
        batch = [fuzz_line(rng, {}, ReferenceClient()) for _ in range(min(5000, lines - sent))]
        argv = [python(), "-m", "simulator", "version", "--stdio", "--no-files"]
        proc = Process(argv, work)
        tally.processes += 1
        proc.send(b"\n".join(batch) + b"\n")
        tally.lines += len(batch)
        sent += len(batch)
        events = []
        while (raw := proc.read(10.0)) not in (b"", None):
            events.append(raw)
        if len(events) != 1 or not json.loads(events[0])["done"]:
            tally.problem("version wrote other than one done event", repr(events[:2]))
        code, stderr = proc.end()
        if code != 0 or b"Traceback" in stderr:
            tally.problem(f"exit {code}", repr(stderr[-300:]))
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000, help="lines per driver")
    parser.add_argument("--drivers", default=",".join(DRIVERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="drivers fuzzed at once")
    args = parser.parse_args(argv)
    drivers = [d for d in args.drivers.split(",") if d]
    unknown = sorted(set(drivers) - set(DRIVERS))
    if unknown:
        parser.error(f"unknown drivers: {', '.join(unknown)}")
    print(
        f"fuzz: {args.lines:,} lines per driver, seed {args.seed}, {args.jobs} at once",
        flush=True,
    )
    started = time.perf_counter()
    total = Tally()
    failed = False
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {d: pool.submit(fuzz_driver, d, args.lines, args.seed) for d in drivers}
        for driver, future in futures.items():
            tally = future.result()
            total.add(tally)
            problems = sum(tally.problems.values())
            failed = failed or problems > 0
            print(
                f"{driver:9} {tally.lines:8,} lines, {tally.answered:8,} answered "
                f"({tally.rejected:,} rejected), {tally.timer_events:6,} timer events, "
                f"{tally.processes:5,} processes: {problems} problems",
                flush=True,
            )
            for kind, count in tally.problems.most_common():
                print(f"    {count:6,} x {kind}: {tally.examples[kind]}")
    elapsed = time.perf_counter() - started
    print(
        f"all:      {total.lines:8,} lines, {total.processes:,} processes in {elapsed:.0f} s; "
        f"tracebacks {total.problems['a traceback']}, exit 70 {total.problems['exit 70']}, "
        f"problems {sum(total.problems.values())}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
