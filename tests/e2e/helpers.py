"""Drive ``python -m simulator <command> --stdio`` over real OS pipes.

:class:`Proc` spawns one simulator process with stdin, stdout and stderr piped, reads
its events one line at a time with a timeout (a selector on the stdout fd and a private
buffer, so a missing event fails the test instead of hanging it), keeps every raw line,
and kills the process on exit from its ``with`` block whatever happened.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ENVELOPE_KEYS",
    "MAX_LINE",
    "Proc",
    "Program",
    "assert_envelope_line",
    "assert_envelopes",
    "assert_rejected",
    "encode",
    "go_json",
    "install_zread",
    "run_starved",
    "vm_and_waiting_for_bytes",
    "vm_bytes",
    "write_scenario",
]

ENVELOPE_KEYS = ["vm", "waiting_for", "done", "error"]
NOBODY_ANSWERS = "stdin is closed: nothing can answer"
"""What a session left waiting after the end of its input says on stderr."""

MAX_LINE = 1 << 20
EXIT_WITHIN = 2.0
"""FIDELITY says 100 ms after done; a loaded 2-core CI gets 2 s."""

_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def encode(obj: Any) -> bytes:
    """A command as a client writes it: compact JSON (no newline)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def go_json(obj: Any) -> bytes:
    """``obj`` encoded as Go's encoding/json would: compact, UTF-8, <>& and U+2028/9 escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escape in _GO_ESCAPES.items():
        text = text.replace(char, escape)
    return text.encode("utf-8")


def assert_envelope_line(raw: bytes) -> dict[str, Any]:
    """One stdout line: a compact JSON object, keys exactly vm, waiting_for, done, error."""
    assert raw.endswith(b"\n"), raw
    assert raw.count(b"\n") == 1, raw
    event = json.loads(raw)
    assert isinstance(event, dict), raw
    assert list(event) == ENVELOPE_KEYS, raw
    assert isinstance(event["vm"], dict), raw
    assert isinstance(event["waiting_for"], list), raw
    assert all(isinstance(item, str) for item in event["waiting_for"]), raw
    assert isinstance(event["done"], bool), raw
    assert isinstance(event["error"], str), raw
    # Byte for byte what Go writes: compact, no ".0" on integral numbers, Go escaping.
    assert raw == go_json(event) + b"\n", raw
    if event["done"]:
        assert event["waiting_for"] == [], raw
    return event


def assert_envelopes(raws: Iterable[bytes]) -> None:
    raws = list(raws)
    for raw in raws:
        assert_envelope_line(raw)
    dones = [i for i, raw in enumerate(raws) if json.loads(raw)["done"]]
    assert dones in ([], [len(raws) - 1]), "done:true must be the last event and only once"


def vm_bytes(raw: bytes) -> bytes:
    """The raw ``vm`` of an event line (a quote in a string is always escaped)."""
    start = len(b'{"vm":')
    assert raw.startswith(b'{"vm":'), raw
    return raw[start : raw.index(b',"waiting_for":[')]


def vm_and_waiting_for_bytes(raw: bytes) -> bytes:
    """The raw ``{"vm":…,"waiting_for":[…]`` of an event line."""
    return raw[: raw.rindex(b',"done":')]


def assert_rejected(
    previous: bytes, raw: bytes, error: str | None = None, *, prefix: str = ""
) -> str:
    """``raw`` answers a rejected line: previous vm/waiting_for byte for byte, done false."""
    event = assert_envelope_line(raw)
    assert vm_and_waiting_for_bytes(raw) == vm_and_waiting_for_bytes(previous), (previous, raw)
    assert event["done"] is False
    assert event["error"], raw
    if error is not None:
        assert event["error"] == error, raw
    assert event["error"].startswith(prefix), raw
    return str(event["error"])


def write_scenario(directory: Path, name: str, text: str) -> str:
    """Write a scenario TOML file (it extends ``default``) and return its path."""
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _clean_environ(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    env.update(extra or {})
    return env


def _limit_files(soft: int) -> None:
    """In the child before it runs: ``ulimit -n soft``."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


_STARVE = """
import os as _os
_held = []
while True:
    try:
        _held.append(_os.open(_os.devnull, _os.O_RDONLY))
    except OSError:
        break
for _ in range({spare}):
    _os.close(_held.pop())
"""


def run_starved(setup: str, code: str, spare: int) -> subprocess.CompletedProcess[str]:
    """Python running ``setup`` (its imports: none can be made later), then ``code``
    with only ``spare`` file descriptors left (the rest taken by ``/dev/null``, under a
    limit of 256), and what it printed."""
    program = (
        "import resource\n"
        "_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(_soft, 256), _hard))\n"
        f"{setup}\n{_STARVE.format(spare=spare)}\n{code}\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )


class Proc:
    """One simulator process on pipes. Use as a context manager: it is always killed."""

    def __init__(
        self,
        command: str,
        *args: str,
        speed: float | str | None = 0,
        scenario: str | None = "default",
        seed: int | None = None,
        stdio: bool = True,
        env: Mapping[str, str] | None = None,
        files: bool = False,
        nofile: int | None = None,
    ) -> None:
        """``files``: read and write zread's files in the test's HOME and project; off,
        the process runs ``--no-files``: the protocol alone, the same run after run.
        ``nofile``: the process's soft limit on open files (``ulimit -n``), set as it
        starts; the run is cold then, whatever ``ZREAD_SIM_SERVER`` says (a warm
        server's child would not have the limit)."""
        argv = [sys.executable, "-m", "simulator", command]
        if stdio:
            argv.append("--stdio")
        if not files:
            argv.append("--no-files")
        if speed is not None:
            argv += ["--speed", str(speed)]
        if scenario is not None:
            argv += ["--scenario", scenario]
        if seed is not None:
            argv += ["--seed", str(seed)]
        argv += list(args)
        self.argv = argv
        environ = _clean_environ(env)
        if nofile is not None:
            environ.pop("ZREAD_SIM_SERVER", None)
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environ,
            preexec_fn=None if nofile is None else functools.partial(_limit_files, nofile),
        )
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        self._out_fd = self.popen.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out_fd, selectors.EVENT_READ)
        self._buffer = bytearray()
        self._eof = False
        self.raw: list[bytes] = []
        self.events: list[dict[str, Any]] = []
        self._stderr = bytearray()
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    # -- context manager -------------------------------------------------------------

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        try:
            self.popen.wait(timeout=5)
        finally:
            for stream in (self.popen.stdin, self.popen.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            self._selector.close()
            self._stderr_thread.join(timeout=5)

    # -- stdout ------------------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        """Read more bytes into the buffer; False at end of stdout."""
        if self._eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self._selector.select(remaining):
            raise AssertionError(
                f"no event within the timeout; so far {len(self.raw)} events, "
                f"pending {bytes(self._buffer)[:200]!r}, stderr {self.stderr_so_far()!r}"
            )
        data = os.read(self._out_fd, 1 << 16)
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    def read_raw(self, timeout: float = 5.0) -> bytes:
        """The next stdout line, newline included, as raw bytes."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if not self._fill(deadline):
                raise AssertionError(
                    f"stdout closed after {len(self.raw)} events; "
                    f"unterminated {bytes(self._buffer)[:200]!r}; stderr {self.stderr_so_far()!r}"
                )
        end = self._buffer.index(b"\n") + 1
        raw = bytes(self._buffer[:end])
        del self._buffer[:end]
        self.raw.append(raw)
        return raw

    def read_event(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next event, checked as an envelope line; its raw bytes go to ``raw``."""
        raw = self.read_raw(timeout)
        event = assert_envelope_line(raw)
        self.events.append(event)
        return event

    @property
    def last_raw(self) -> bytes:
        return self.raw[-1]

    def read_until(self, predicate: Any, timeout: float = 5.0) -> dict[str, Any]:
        """Read events until one satisfies ``predicate`` (or done); return that one."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.read_event(max(0.01, deadline - time.monotonic()))
            if predicate(event) or event["done"]:
                return event

    def read_until_done(self, timeout: float = 5.0) -> dict[str, Any]:
        event = self.read_until(lambda e: e["done"], timeout)
        assert event["done"], event
        return event

    def read_rest(self, timeout: float = 5.0) -> bytes:
        """Every byte still to come, until stdout closes."""
        deadline = time.monotonic() + timeout
        while self._fill(deadline):
            pass
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest

    def close_stdout(self) -> None:
        """Close our read end of the process's stdout (the reader goes away)."""
        self._selector.unregister(self._out_fd)
        assert self.popen.stdout is not None
        self.popen.stdout.close()
        self._eof = True

    # -- stdin -------------------------------------------------------------------------

    def send(self, command: Any) -> None:
        """Write one line (a dict/list as compact JSON, bytes as they are) plus a newline."""
        data = command if isinstance(command, bytes) else encode(command)
        self.write(data + b"\n")

    def write(self, data: bytes) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(data)
        self.popen.stdin.flush()

    def close_stdin(self) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.close()

    def wait_stderr(self, text: str, timeout: float = 5.0) -> str:
        """Wait until stderr holds ``text``; everything on stderr so far."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr_so_far():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} on stderr: {self.stderr_so_far()!r}")
            time.sleep(0.01)
        return self.stderr_so_far()

    def assert_waiting(self, quiet: float = 0.3) -> None:
        """Still running, and writing nothing, for ``quiet`` seconds."""
        ready = self._selector.select(quiet)
        assert not ready and not self._buffer, "the process wrote while it should wait"
        assert self.popen.poll() is None, "the process ended while it should wait"

    def terminate(self) -> None:
        """SIGTERM, which a running zread answers as quit."""
        self.popen.terminate()

    # -- exit and stderr ---------------------------------------------------------------

    def wait(self, timeout: float = EXIT_WITHIN) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"process still running {timeout} s later; stderr {self.stderr_so_far()!r}"
            ) from None

    def _drain_stderr(self) -> None:
        assert self.popen.stderr is not None
        fd = self.popen.stderr.fileno()
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            self._stderr += data
        self.popen.stderr.close()

    def stderr_so_far(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """Everything on stderr; waits for the process to end."""
        self.wait(5)
        self._stderr_thread.join(timeout=5)
        return self.stderr_so_far()

    def finish(self, rc: int = 0) -> None:
        """After done: nothing more on stdout, exit ``rc`` within 2 s, no traceback."""
        assert self.events and self.events[-1]["done"], "finish() is for after the done event"
        assert self.wait() == rc
        assert self.read_rest(2.0) == b"", "nothing may be written after the done event"
        assert "Traceback" not in self.stderr
        assert_envelopes(self.raw)

    def reject(self, command: Any, error: str | None = None, *, prefix: str = "") -> str:
        """Send a line that must be rejected; check its one answer; return the error text."""
        previous = self.last_raw
        self.send(command)
        raw = self.read_raw()
        self.events.append(assert_envelope_line(raw))
        return assert_rejected(previous, raw, error, prefix=prefix)

    # -- driving -----------------------------------------------------------------------

    def _play(self, script: Iterable[Any], timeout: float) -> None:
        if not self.events:
            self.read_event(timeout)
        for command in script:
            wanted = command["type"]
            while wanted not in self.events[-1]["waiting_for"]:
                assert not self.events[-1]["done"], f"done before {wanted!r} was accepted"
                self.read_event(timeout)
            self.send(command)
            answer = self.read_event(timeout)
            assert answer["error"] == "", answer

    def drive(self, script: Iterable[Any], timeout: float = 5.0) -> list[bytes]:
        """Like a client: send each command once its type is in waiting_for; until done."""
        self._play(script, timeout)
        if not self.events[-1]["done"]:
            self.read_until_done(timeout)
        return list(self.raw)

    def drive_until(
        self, script: Iterable[Any], predicate: Any, timeout: float = 5.0
    ) -> dict[str, Any]:
        """Play ``script`` like :meth:`drive`, then read until an event satisfies ``predicate``."""
        self._play(script, timeout)
        event = self.events[-1]
        if not predicate(event):
            event = self.read_until(predicate, timeout)
        assert predicate(event), event
        return event


def install_zread(folder: Path, *options: str) -> Path:
    """``zread-sim install folder *options`` as a real process (no ``ZREAD_SIM_*``
    variable passed on); the folder holding the ``zread`` it wrote."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "install", str(folder), *options],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    made = f"zread-sim install: created the folder {folder.absolute()}\n".encode()
    assert done.returncode == 0 and done.stderr in (b"", made), done.stderr  # made: said
    script = folder.absolute() / "zread"
    assert done.stdout == f"{script}\n".encode()
    assert os.access(script, os.X_OK)
    return script.parent


class Program(Proc):
    """A :class:`Proc` for any command line: an installed ``zread`` by path or found on
    PATH, or a whole line run by ``/bin/sh`` (``shell``), in the working directory
    ``cwd`` and with exactly the environment ``env`` (nothing of this process's is
    added). It runs in a process group of its own, and leaving the ``with`` block kills
    the group while its leader runs, so nothing a shell started is left behind."""

    def __init__(
        self,
        argv: Sequence[str] | str,
        *,
        env: Mapping[str, str],
        cwd: Path,
        shell: bool = False,
    ) -> None:
        self.argv = [argv] if isinstance(argv, str) else list(argv)
        self.popen = subprocess.Popen(
            argv,
            shell=shell,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        self._out_fd = self.popen.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out_fd, selectors.EVENT_READ)
        self._buffer = bytearray()
        self._eof = False
        self.raw = []
        self.events = []
        self._stderr = bytearray()
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    def kill(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        super().kill()


def held_ports(count: int) -> tuple[int, list[socket.socket]]:
    """A base port (far from 9681: tests running at once may use those) with ``count``
    ports from it held by listening sockets; the caller closes them."""
    for base in range(23_000, 60_000, 617):
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
                sock.listen()
        except OSError:
            for sock in held:
                sock.close()
            continue
        return base, held
    raise AssertionError("no free run of ports")


def process_running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().split()[2] != "Z"
    except OSError:
        return False
