"""Memory a real process keeps of what it reads: lines into a session, and control
requests from a peer that never reads its responses.

Four figures, each from ``VmRSS`` in ``/proc/<pid>/status`` of one
``python -m simulator ... --stdio --no-files`` process:

- **refused lines**: ``generate`` at its first gate, fed ``--lines`` lines it refuses
  (each a violation); the RSS after the first 10,000 lines against the RSS after all;
- **accepted lines**: the same with ``config`` and an ``update_fields`` it accepts;
- **unread responses, stdio**: ``--control stdio``, a peer writing ``--requests``
  control requests without reading stdout, until its writes have been refused for
  ``--held`` seconds; the RSS before and after, and how much of the requests went in;
- **unread responses, socket**: the same over ``--control unix:PATH``.

Then each peer reads, and every response is counted: held back, none lost.

    python benchmarks/memory_bounds.py [--lines 200000] [--requests 40000] [--held 2]

Targets: < 5 MB of growth for each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from _common import verdict

TARGET_MB = 5.0
WARM = 10_000
REFUSED = b'{"type":"nope","params":{"note":"a line zread refuses, kept as a violation"}}\n'
ACCEPTED = b'{"type":"update_fields","params":{"fields":{"language":"en"}}}\n'
RESPONSE = b'{"type":"control_response"'


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("memory_bounds.py: no VmRSS (this needs Linux's /proc)")


def spawn(*args: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "simulator", *args, "--stdio", "--no-files"]
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


class Counter:
    """Counts the lines of a stream (those starting with ``prefix``) on a thread."""

    def __init__(self, read: Callable[[], bytes], prefix: bytes = b"") -> None:
        self.count = 0
        self._read, self._prefix = read, prefix
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        rest = b""
        while data := self._read():
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            self.count += sum(line.startswith(self._prefix) for line in lines)

    def wait_for(self, count: int, timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"memory_bounds.py: {self.count} of {count} answers")
            time.sleep(0.01)


def lines(command: str, line: bytes, total: int) -> tuple[int, int, float]:
    """(RSS after WARM lines, RSS after ``total``, seconds) for one process."""
    proc = spawn(command)
    assert proc.stdin is not None
    assert proc.stdout is not None
    stdout = proc.stdout
    events = Counter(lambda: stdout.read1(1 << 20))
    events.wait_for(1)
    batch = line * 1000

    def feed(count: int) -> None:
        target = events.count + count
        for _ in range(count // 1000):
            proc.stdin.write(batch)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        events.wait_for(target)

    feed(WARM)
    before = rss_kb(proc.pid)
    started = time.monotonic()
    feed(total - WARM)
    after = rss_kb(proc.pid)
    seconds = time.monotonic() - started
    proc.kill()
    proc.wait()
    return before, after, seconds


def requests(count: int) -> bytes:
    frame = b'{"type":"control_request","request_id":"u%d","request":{"subtype":"%s"}}\n'
    subtypes = (b"snapshot", b"violations", b"pause", b"resume")
    return b"".join(frame % (n, subtypes[n % 4]) for n in range(count))


def push_until_held(fd: int, payload: memoryview, held: float) -> int:
    os.set_blocking(fd, False)
    sent, refused_since = 0, None
    while sent < len(payload):
        try:
            sent += os.write(fd, payload[sent:])
            refused_since = None
        except BlockingIOError:
            now = time.monotonic()
            refused_since = refused_since or now
            if now - refused_since > held:
                break
            time.sleep(0.02)
    os.set_blocking(fd, True)
    return sent


def unread(transport: str, count: int, held: float) -> tuple[int, int, int, int]:
    """(RSS before, RSS held, bytes of requests taken, responses read in the end)."""
    payload = memoryview(requests(count))
    folder = tempfile.mkdtemp(prefix="zmb-")
    path = os.path.join(folder, "c.sock")
    address = "stdio" if transport == "stdio" else f"unix:{path}"
    proc = spawn("generate", "--control", address)
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdout.readline()  # the first event
        if transport == "stdio":
            fd = proc.stdin.fileno()
            out_fd = proc.stdout.fileno()
        else:
            peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            while peer.connect_ex(path) != 0:
                time.sleep(0.02)
            fd = out_fd = peer.fileno()
        time.sleep(0.5)
        before = rss_kb(proc.pid)
        sent = push_until_held(fd, payload, held)
        during = rss_kb(proc.pid)
        answers = Counter(lambda: os.read(out_fd, 1 << 20), RESPONSE)
        rest = payload[sent:]
        while rest:
            rest = rest[os.write(fd, rest) :]
        answers.wait_for(count)
        return before, during, sent, answers.count
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--held", type=float, default=2.0)
    args = parser.parse_args()
    print(f"lines into one session: {WARM:,} first, then up to {args.lines:,}")
    for name, command, line in (("refused", "generate", REFUSED), ("accepted", "config", ACCEPTED)):
        before, after, seconds = lines(command, line, args.lines)
        grown = (after - before) / 1024
        print(
            f"  {name:9} RSS {before / 1024:6.1f} MB -> {after / 1024:6.1f} MB: "
            f"{grown:+.2f} MB over {args.lines - WARM:,} lines ({seconds:.1f} s); "
            f"< {TARGET_MB:g} MB: {verdict(grown < TARGET_MB)}"
        )
    print(f"a control peer sending {args.requests:,} requests, reading nothing for {args.held:g} s")
    for transport in ("stdio", "socket"):
        before, during, sent, answered = unread(transport, args.requests, args.held)
        grown = (during - before) / 1024
        print(
            f"  {transport:9} RSS {before / 1024:6.1f} MB -> {during / 1024:6.1f} MB: "
            f"{grown:+.2f} MB; requests taken before it was held back: {sent:,} bytes of "
            f"{len(requests(args.requests)):,}; then {answered:,} responses read; "
            f"< {TARGET_MB:g} MB: {verdict(grown < TARGET_MB)}"
        )


if __name__ == "__main__":
    main()
