"""What a session remembers of the lines it reads is bounded, in a real process: its RSS
after the first 10,000 lines and after 40,000 more, refused or accepted.

The bound is 5 MB for 200,000 lines (``benchmarks/memory_bounds.py`` measures that
figure); to stay short, the test sends 40,000 after the first 10,000 and allows
1 MB, the proportional share and some room for the allocator's steps. Before the
bound, a refused line kept ~490 bytes and an accepted one ~220 (40,000 lines: 8.8 to
19.6 MB).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from .test_control_limits_e2e import rss_kb

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.cold,  # the memory read is the process's own
]

WARM = 10_000
MORE = 40_000
BOUND_KB = 1024
PACE = 0.002
"""How long the reader of events waits after each read: a few dozen events at full
speed, well under the 64 KiB a pipe holds (were it full, the process would wait to
write, as it does for any slow reader)."""

REFUSED = b'{"type":"nope","params":{"note":"a line zread refuses, kept as a violation"}}\n'
ACCEPTED = b'{"type":"update_fields","params":{"fields":{"language":"en"}}}\n'


class Fed:
    """A ``--stdio --no-files`` process fed lines in batches, its events counted."""

    def __init__(self, command: str) -> None:
        argv = [sys.executable, "-m", "simulator", command, "--stdio", "--no-files"]
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.events = 0
        self.errors = 0
        self._reader = threading.Thread(target=self._count, daemon=True)
        self._reader.start()

    def _count(self) -> None:
        """Count whole lines, and those whose error is not empty.

        Read by the pipeful, not by the event: after each read the reader lets the pipe
        fill for a few milliseconds (far less than the pipe holds), so 50,000 events
        take a few thousand reads and wake-ups, not 50,000."""
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        rest = b""
        while data := os.read(fd, 1 << 20):
            data = rest + data
            end = data.rfind(b"\n") + 1
            whole, rest = data[:end], data[end:]
            lines = whole.count(b"\n")
            self.errors += lines - whole.count(b'"error":""}\n')
            self.events += lines
            time.sleep(PACE)

    def feed(self, line: bytes, count: int, timeout: float = 60.0) -> None:
        """``count`` lines, then wait until each has its event."""
        assert self.popen.stdin is not None
        target = self.events + count
        batch = line * 1000
        for _ in range(count // 1000):
            self.popen.stdin.write(batch)
        self.popen.stdin.flush()
        deadline = time.monotonic() + timeout
        while self.events < target:
            assert time.monotonic() < deadline, f"{self.events} of {target} events"
            time.sleep(0.01)

    def close(self) -> str:
        assert self.popen.stdin is not None and self.popen.stderr is not None
        self.popen.stdin.write(b'{"type":"quit"}\n')
        self.popen.stdin.close()
        assert self.popen.wait(timeout=10) == 0
        self._reader.join(timeout=5)
        return self.popen.stderr.read().decode()


@pytest.mark.parametrize(
    ("command", "line", "refused"),
    [("generate", REFUSED, True), ("config", ACCEPTED, False)],
    ids=["refused", "accepted"],
)
def test_lines_read_do_not_grow_the_process(command: str, line: bytes, refused: bool) -> None:
    fed = Fed(command)
    try:
        while fed.events < 1:  # the first event: everything imported
            time.sleep(0.01)
        fed.feed(line, WARM)
        before = rss_kb(fed.popen.pid)
        fed.feed(line, MORE)
        grown = rss_kb(fed.popen.pid) - before
        assert grown < BOUND_KB, f"RSS grew by {grown} kB over {MORE:,} lines"
        assert fed.errors == (WARM + MORE if refused else 0)
        assert fed.close() == ""
    finally:
        if fed.popen.poll() is None:
            fed.popen.kill()
            fed.popen.wait()
