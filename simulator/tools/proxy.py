"""The recorder between a client and a program: ``zread-sim record``'s run.

Owns: :func:`record`, which spawns a program (the real zread, or the simulator), sits
between the client (the streams it is given: this process's stdin and stdout) and it,
passes every byte through in both directions as it comes (one thread a stream; stderr
too), puts every line on a tape (redacted, then fed to a
:class:`~simulator.tools.conformance.Checker`, with its time, direction and number) as
it passes, forwards SIGINT, SIGTERM and SIGHUP to the program, notes the files under the
project's ``.zread/`` and ``$HOME/.zread/`` that the run created, changed or deleted
(relative path and sha256), and writes the cassette
(:mod:`simulator.tools.cassette`) when the program has exited. :class:`Recording` is
what it made.

Must not: change a byte between the client and the program, or hold one back for the
tape's sake; write anywhere but the cassette path it is given (the report is the
caller's to print, never on stdout, which is the client's); write a secret or an
environment value; hang on a grandchild that keeps the program's pipes open.
Must not be imported by the core, scenarios, runners or hosts.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import select
import signal
import subprocess
import threading
import time
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from simulator.regularfile import NotRegularFile, open_regular
from simulator.tools.cassette import (
    DIRECTIONS,
    RecordError,
    Redactor,
    assemble,
    check_out_path,
    encode_line,
    home_keys,
    write_cassette,
)
from simulator.tools.conformance import Checker, command_of, report
from statecharts import COMMANDS

_CHUNK: Final = 65536
_POLL: Final = 0.05
"""How often the stdin pump looks whether the program is gone (seconds)."""
_DRAIN: Final = 2.0
"""How long, after the program exits, its output may take to reach end of file (a
grandchild holding the pipe open must not hang the recorder)."""


# -- the tape -----------------------------------------------------------------------------


class _Tape:
    """The lines of one run, redacted and checked as they pass, in the order they pass."""

    def __init__(self, redactor: Redactor, checker: Checker) -> None:
        self.start = time.monotonic()
        self.redactor = redactor
        self.checker = checker
        self.lines: list[dict[str, Any]] = []
        self._counts = dict.fromkeys(DIRECTIONS, 0)
        self._lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self.start, 6)

    def add(self, direction: str, raw: bytes, *, complete: bool = True) -> None:
        line = self.redactor.line(raw.removesuffix(b"\n"))
        with self._lock:
            t = self.now()
            self._counts[direction] += 1
            n = self._counts[direction]
            entry: dict[str, Any] = {"t": t, "dir": direction, "n": n, **encode_line(line)}
            if not complete:
                entry["eol"] = False
            self.lines.append(entry)
            self.checker.feed(direction, n, t, line)


class _Splitter:
    """One stream's bytes cut into lines for the tape; a last line without its newline
    goes on at :meth:`close`."""

    def __init__(self, tape: _Tape, direction: str) -> None:
        self.tape, self.direction, self.buffer = tape, direction, bytearray()

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\n")) >= 0:
            self.tape.add(self.direction, bytes(self.buffer[: end + 1]))
            del self.buffer[: end + 1]

    def close(self) -> None:
        if self.buffer:
            self.tape.add(self.direction, bytes(self.buffer), complete=False)
            self.buffer.clear()


# -- the pumps ----------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _pump_out(source: IO[bytes], target: int, splitter: _Splitter) -> None:
    """The program's stdout or stderr to ours, as it comes; a reader gone on our side
    closes the pipe, so the program meets a gone reader too."""
    fd = source.fileno()
    try:
        while data := os.read(fd, _CHUNK):
            splitter.feed(data)  # first: a line is on the tape before the client can answer it
            try:
                _write_all(target, data)
            except OSError:
                break
    except OSError:
        pass
    finally:
        splitter.close()
        with contextlib.suppress(OSError):
            source.close()


def _pump_in(source: int, target: IO[bytes], splitter: _Splitter, stop: threading.Event) -> None:
    """Our stdin to the program's, as it comes; our end of input is the program's."""
    fd = target.fileno()
    broken = False
    try:
        while not stop.is_set():
            ready, _, _ = select.select([source], [], [], _POLL)
            if not ready:
                continue
            data = os.read(source, _CHUNK)
            if not data:
                break
            splitter.feed(data)
            if not broken:
                try:
                    _write_all(fd, data)
                except OSError:
                    broken = True  # the program is gone: what follows is still recorded
    except (OSError, ValueError):
        pass
    finally:
        splitter.close()
        with contextlib.suppress(OSError):
            target.close()


@contextlib.contextmanager
def _forwarding_signals(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP to the recorder go to the program (zread takes them as
    quit); the recorder goes on until the program exits, and writes its cassette."""

    def forward(signum: int, _: types.FrameType | None) -> None:
        with contextlib.suppress(OSError):
            proc.send_signal(signum)

    saved: dict[int, Any] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        with contextlib.suppress(ValueError, OSError):  # not the main thread: not ours
            saved[signum] = signal.signal(signum, forward)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, handler)


def _spawn(program: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``program`` on three pipes of its own, unbuffered."""
    try:
        return subprocess.Popen(
            list(program),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot run {program[0]}: {exc}") from None


def _pass_through(
    proc: subprocess.Popen[bytes], tape: _Tape, stdin: int, stdout: int, stderr: int
) -> int:
    """Pump the client's streams and the program's until the program exits (and its
    output drains, for at most :data:`_DRAIN` seconds); its return code."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    stop = threading.Event()
    pumps = [
        threading.Thread(
            target=_pump_out, args=(proc.stdout, stdout, _Splitter(tape, "out")), daemon=True
        ),
        threading.Thread(
            target=_pump_out, args=(proc.stderr, stderr, _Splitter(tape, "err")), daemon=True
        ),
    ]
    feeder = threading.Thread(
        target=_pump_in, args=(stdin, proc.stdin, _Splitter(tape, "in"), stop), daemon=True
    )
    with _forwarding_signals(proc):
        for pump in [*pumps, feeder]:
            pump.start()
        returncode = proc.wait()
        for pump in pumps:
            pump.join(_DRAIN)
        stop.set()
        feeder.join(_DRAIN)
    return returncode


def _exit_code(returncode: int) -> int:
    """A return code as a shell reports it: 128+N for a program killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


# -- the files ----------------------------------------------------------------------------


def _digest(path: Path) -> str:
    if path.is_symlink():
        return hashlib.sha256(os.readlink(path).encode("utf-8", "surrogateescape")).hexdigest()
    sha = hashlib.sha256()
    with open(open_regular(str(path), str(path)), "rb") as handle:  # a FIFO: skipped
        while chunk := handle.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _snapshot(roots: Mapping[str, Path]) -> dict[tuple[str, str], str]:
    """(root name, path relative to the root) -> sha256 of every file under each
    root's ``.zread/``; a file that cannot be read is skipped."""
    found: dict[tuple[str, str], str] = {}
    for name, root in roots.items():
        top = root / ".zread"
        if not top.is_dir():
            continue
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for leaf in sorted(files) + [d for d in dirs if (Path(folder) / d).is_symlink()]:
                path = Path(folder) / leaf
                with contextlib.suppress(OSError, NotRegularFile):
                    found[(name, path.relative_to(root).as_posix())] = _digest(path)
    return found


def _file_changes(
    before: Mapping[tuple[str, str], str], after: Mapping[tuple[str, str], str]
) -> list[dict[str, Any]]:
    """What differs between two snapshots: one entry a file, in path order (the path
    as it is: the cassette redacts it)."""
    changes: list[dict[str, Any]] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        change = "created" if old is None else "deleted" if new is None else "changed"
        root, path = key
        changes.append({"root": root, "path": path, "sha256": new, "change": change})
    return changes


def _roots(cwd: Path, environ: Mapping[str, str]) -> dict[str, Path]:
    roots = {"project": cwd}
    home = environ.get("HOME")
    if home and Path(home).resolve() != cwd.resolve():
        roots["home"] = Path(home)
    return roots


# -- one recording ------------------------------------------------------------------------


@dataclass
class Recording:
    """What :func:`record` made: the cassette (as written) and the check of the run."""

    cassette: dict[str, Any]
    checker: Checker
    exit_code: int = 0
    report: list[str] = field(default_factory=list)


def _command(program: Sequence[str], command: str | None) -> str | None:
    """The chart to check against: ``command``, else the one ``program`` runs."""
    command = command or command_of(program)
    if command is not None and command not in COMMANDS:
        raise RecordError(f"--command {command}: not a zread command ({', '.join(COMMANDS)})")
    return command


def record(
    program: Sequence[str],
    out: Path,
    *,
    environ: Mapping[str, str] | None = None,
    patterns: Sequence[str] = (),
    command: str | None = None,
    stdin: int = 0,
    stdout: int = 1,
    stderr: int = 2,
) -> Recording:
    """Run ``program`` between the streams ``stdin``/``stdout``/``stderr`` (fds), write
    the cassette to ``out``; raises :class:`RecordError` before running anything when
    the program or ``out`` cannot be used."""
    if not program:
        raise RecordError("no program given (record --out FILE -- PROGRAM ...)")
    env = dict(os.environ if environ is None else environ)
    redactor = Redactor(patterns, home_keys(env.get("HOME")))
    check_out_path(out)
    command = _command(program, command)
    cwd = Path.cwd()
    roots = _roots(cwd, env)
    before = _snapshot(roots)
    checker = Checker(command)
    started = datetime.datetime.now(datetime.UTC)
    tape = _Tape(redactor, checker)
    proc = _spawn(program, env)
    exit_code = _exit_code(_pass_through(proc, tape, stdin, stdout, stderr))
    duration = tape.now()
    checker.finish(exit_code, duration)
    cassette = assemble(
        program=program,
        command=command,
        env=env,
        cwd=cwd,
        started=started,
        duration=duration,
        exit_code=exit_code,
        patterns=len(patterns),
        files=_file_changes(before, _snapshot(roots)),
        lines=list(tape.lines),
        redactor=redactor,
    )
    write_cassette(out, cassette)
    return Recording(cassette, checker, exit_code, report(checker, cassette, redactor.secrets))
