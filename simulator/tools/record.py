"""``zread-sim record`` and ``zread-sim check``: a cassette of one real run, checked
against the charts.

Owns:

- **record**: spawn a program (the real zread, or the simulator), sit between the
  client (this process's stdin and stdout) and it, pass every byte through in both
  directions as it comes (one thread a stream; stderr too), and write one cassette
  (JSON, ``docs/record.md``): the argv, the environment's variable *names*, the cwd,
  the start time, every line each way with its time and direction, the exit code, and
  the files under the project's ``.zread/`` and ``$HOME/.zread/`` that the run created,
  changed or deleted (relative path and sha256).
- **redaction** before anything is written (``simulator.core.redaction``): API keys, by
  name in any spelling and by value wherever they occur once known (HOME's
  ``config.yaml``'s, one a line named, one an event showed), the values of
  secret-looking query parameters of any URL (``state=``, ``code=``, ``…token=`` …, the
  tokens of ``authorize_url``), and the user's ``--redact`` regexes; the report too.
- **check**: the conformance check of both sides against the charts
  (``statecharts.load_chart``), live while recording and later on a cassette: zread's
  events (envelope, key order, vm.state, waiting_for, rejected lines repeating the
  vm, the vm fields of the chart's vm Structs) and the client's commands (a type the
  last event offered, or ``quit``; params that fit; nothing after done).
- :func:`record_as_dropin`, what the command line calls when ``ZREAD_SIM_RECORD`` and
  ``ZREAD_SIM_REAL`` are set.

Hand-written, not generated: the checks are the charts' data read the way
``simulator.core.session`` runs it (several chart states may share one vm state; a
chart's ``_start`` state is never shown), so they are derived from the compiled charts
and their vm Structs here rather than from a schema, which the charts do not have.

Must not: write anywhere but the cassette path the user gave (the report goes to
stderr, never to stdout, which is the client's); write a secret, an environment
value or a ``--redact`` pattern itself; change a byte between the client and the
program; let a traceback reach a user (bad input is one line on stderr and exit 2).
Must not be imported by the core, scenarios, runners or hosts.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from simulator.core import redaction
from simulator.core.envelope import Command, RejectedLine, decode_command, decode_params
from simulator.core.secrets import Secrets
from simulator.errors import ConfigurationError
from simulator.formats.bounds import (
    LIMITS,
    FormatError,
    check_json_nesting,
    check_size,
    in_words,
)
from simulator.tools.arguments import raising
from statecharts import COMMANDS, load_chart

__all__ = [
    "CASSETTE_FORMAT",
    "CASSETTE_VERSION",
    "Checker",
    "Deviation",
    "RecordError",
    "Redactor",
    "check_cassette",
    "command_of",
    "main",
    "read_cassette",
    "record",
    "record_as_dropin",
]

PROG: Final = "zread-sim"
CASSETTE_FORMAT: Final = "zread-sim-cassette"
CASSETTE_VERSION: Final = 1
ENVELOPE_KEYS: Final = ("vm", "waiting_for", "done", "error")
DIRECTIONS: Final = {"in": "stdin", "out": "stdout", "err": "stderr"}
"""A line's direction in a cassette, and the stream it travelled on."""

RECORD_VAR: Final = "ZREAD_SIM_RECORD"
REAL_VAR: Final = "ZREAD_SIM_REAL"

_CHUNK: Final = 65536
_POLL: Final = 0.05
"""How often the stdin pump looks whether the program is gone (seconds)."""
_DRAIN: Final = 2.0
"""How long, after the program exits, its output may take to reach end of file (a
grandchild holding the pipe open must not hang the recorder)."""
_SHOWN: Final = 1000
"""A reported line longer than this is cut (the cassette has it whole)."""


class RecordError(ConfigurationError):
    """Bad input to record or check (a flag, a pattern, a program, a cassette): one
    line on stderr, exit 2."""


# -- redaction ----------------------------------------------------------------------------


class Redactor(redaction.Redactor):
    """Everything written into a cassette or a report goes through :meth:`text` or
    :meth:`line` first (:class:`simulator.core.redaction.Redactor`); a bad ``--redact``
    pattern is a :class:`RecordError`."""

    def __init__(self, patterns: Sequence[str] = (), keys: Sequence[str] = ()) -> None:
        try:
            super().__init__(patterns, keys)
        except ValueError as exc:
            raise RecordError(f"--redact: {exc}") from None


# -- the conformance check ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deviation:
    """One line that is not what the charts allow; ``n`` counts the lines of its stream
    from 1 (0: the run as a whole, at its end)."""

    direction: str
    n: int
    t: float
    message: str
    line: str

    def __str__(self) -> str:
        where = f"{DIRECTIONS[self.direction]} line {self.n}" if self.n else "at exit"
        shown = self.line if len(self.line) <= _SHOWN else self.line[:_SHOWN] + "..."
        return f"{where} (t={self.t:.3f}s): {self.message}" + (f": {shown}" if shown else "")


def _decode(raw: bytes) -> Any:
    """One JSON text; ValueError in the simulator's words (msgspec's) when it is not."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.ValidationError as exc:  # a number msgspec cannot hold
        raise ValueError(in_words(exc)) from None
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("nested too deep") from None


def _fmt(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """``tp`` without ``| UnsetType``, and whether it had it (the field may be left out)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not msgspec.UnsetType]
        optional = len(args) < len(typing.get_args(tp))
        return (args[0] if len(args) == 1 else tp), optional
    return tp, False


@dataclass(frozen=True, slots=True)
class _Shape:
    """The fields of one vm Struct: name -> (nested shape or None, may be left out)."""

    struct: str
    fields: dict[str, tuple[_Shape | None, bool]]


def _shape_of(struct: type[Any]) -> _Shape:
    fields: dict[str, tuple[_Shape | None, bool]] = {}
    for info in msgspec.structs.fields(struct):
        tp, optional = _unwrap(info.type)
        if typing.get_origin(tp) is list and typing.get_args(tp):
            tp = typing.get_args(tp)[0]
        nested = _shape_of(tp) if isinstance(tp, type) and issubclass(tp, msgspec.Struct) else None
        fields[info.encode_name] = (nested, optional)
    return _Shape(struct.__name__, fields)


def _field_deviations(value: Any, shape: _Shape, path: str) -> Iterator[str]:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, dict):
            continue
        for key in item:
            if key not in shape.fields:
                known = ", ".join(shape.fields)
                yield (
                    f"zread did show the vm field {_fmt(path + key)} where the chart expects "
                    f"only the fields of {shape.struct} ({known})"
                )
        for key, (nested, optional) in shape.fields.items():
            if key not in item:
                if not optional:
                    yield (
                        f"zread did leave out the vm field {_fmt(path + key)} where the chart "
                        "expects it in every event"
                    )
            elif nested is not None:
                yield from _field_deviations(item[key], nested, f"{path}{key}.")


def command_of(argv: Sequence[str]) -> str | None:
    """The zread command an argv runs: its first word after the program that names one."""
    for word in argv[1:]:
        if word in COMMANDS:
            return word
    return None


class Checker:
    """The conformance check, fed one line at a time in the order the lines passed.

    A command is judged against the last event written before it arrived (what the
    client could have read); an event against the chart of ``command`` (None: the
    envelope only).
    """

    def __init__(self, command: str | None) -> None:
        self.command = command
        self.deviations: list[Deviation] = []
        self._last: dict[str, Any] | None = None
        self._done = False
        self._events = 0
        self._states: dict[str, list[tuple[tuple[str, ...], bool]]] = {}
        self._shape: _Shape | None = None
        self._shows_state = False
        self._params: dict[str, type[Any] | None] = {}
        if command is not None:
            chart = load_chart(command)
            self._shows_state = chart.shows_state
            for spec in chart.states.values():
                if chart.has_start and spec.name == chart.initial:
                    continue  # left by _start before the first event
                self._states.setdefault(spec.vm_state, []).append((spec.waiting_for, spec.terminal))
            self._shape = _shape_of(chart.model.vm_type)
            self._params = {name: spec.params for name, spec in chart.commands.items()}

    @property
    def clean(self) -> bool:
        return not self.deviations

    def feed(self, direction: str, n: int, t: float, raw: bytes) -> None:
        if direction == "out":
            messages = list(self._event(raw))
        elif direction == "in":
            messages = list(self._command(raw))
        else:
            return
        shown = raw.decode("utf-8", "replace")
        self.deviations.extend(Deviation(direction, n, t, m, shown) for m in messages)

    def finish(self, exit_code: int | None, t: float) -> None:
        if not self._done:
            how = "end" if exit_code is None else f"exit with code {exit_code}"
            self.deviations.append(
                Deviation(
                    "out",
                    0,
                    t,
                    f"zread did {how} without a done:true event where the chart expects "
                    "the last event to have done:true",
                    "",
                )
            )

    # -- zread's side ---------------------------------------------------------------------

    def _event(self, raw: bytes) -> Iterator[str]:
        if self._done:
            yield "zread did write a line after its done:true event where the chart expects nothing"
            return
        try:
            doc = _decode(raw)
        except ValueError as exc:
            yield f"zread did write a line that is not JSON ({exc}) where the chart expects events"
            return
        if not isinstance(doc, dict):
            yield "zread did write JSON that is not an object where the chart expects an event"
            return
        if tuple(doc) != ENVELOPE_KEYS:
            yield (
                f"zread did write the keys {_fmt(list(doc))} where the chart expects "
                f"{_fmt(list(ENVELOPE_KEYS))} in that order"
            )
        vm, waiting_for = doc.get("vm"), doc.get("waiting_for")
        done, error = doc.get("done"), doc.get("error")
        bad = False
        for key, value, ok, want in (
            ("vm", vm, isinstance(vm, dict), "an object"),
            (
                "waiting_for",
                waiting_for,
                isinstance(waiting_for, list) and all(isinstance(w, str) for w in waiting_for),
                "a list of strings",
            ),
            ("done", done, isinstance(done, bool), "true or false"),
            ("error", error, isinstance(error, str), "a string"),
        ):
            if not ok:
                bad = True
                yield f"zread did write {_fmt(key)}:{_fmt(value)} where the chart expects {want}"
        self._events += 1
        if bad:
            self._done = self._done or done is True
            return
        assert isinstance(vm, dict)
        assert isinstance(waiting_for, list)
        if error:
            yield from self._rejected(vm, waiting_for, done)
        else:
            yield from self._against_chart(vm, waiting_for, bool(done))
        self._last = {"vm": vm, "waiting_for": waiting_for}
        self._done = bool(done)

    def _rejected(self, vm: dict[str, Any], waiting_for: list[str], done: Any) -> Iterator[str]:
        if self._last is None:
            yield "zread did reject a command in its first event where the chart expects a state"
            return
        if done:
            yield "zread did write done:true with an error where the chart expects done:false"
        if vm != self._last["vm"]:
            yield (
                "zread did change the vm in an error event where the chart expects the "
                "previous event's vm repeated"
            )
        if waiting_for != self._last["waiting_for"]:
            yield (
                f"zread did offer waiting_for {_fmt(waiting_for)} in an error event where the "
                f"chart expects the previous {_fmt(self._last['waiting_for'])} repeated"
            )

    def _against_chart(
        self, vm: dict[str, Any], waiting_for: list[str], done: bool
    ) -> Iterator[str]:
        if done and waiting_for:
            yield (
                f"zread did offer waiting_for {_fmt(waiting_for)} with done:true where the "
                "chart expects []"
            )
        if self.command is None:
            return
        if self._shape is not None:
            yield from _field_deviations(vm, self._shape, "")
        if self._shows_state:
            state = vm.get("state")
            candidates = self._states.get(state) if isinstance(state, str) else None
            if candidates is None:
                known = ", ".join(_fmt(s) for s in self._states)
                yield (
                    f"zread did show vm.state {_fmt(state)} where the chart expects one of {known}"
                )
                return
        else:
            state = None
            candidates = [c for cs in self._states.values() for c in cs]
        if done:
            return  # quit ends in any state; a terminal state has done:true, []
        offered: list[list[str]] = []
        for gate, terminal in candidates:
            if not terminal and list(gate) not in offered:
                offered.append(list(gate))
        where = f" in state {state}" if state is not None else ""
        if not offered:
            yield f"zread did write done:false{where} where the chart expects done:true (terminal)"
        elif waiting_for not in offered:
            expected = " or ".join(_fmt(w) for w in offered)
            yield (
                f"zread did offer waiting_for {_fmt(waiting_for)}{where} where the chart "
                f"expects {expected}"
            )

    # -- the client's side ----------------------------------------------------------------

    def _command(self, raw: bytes) -> Iterator[str]:
        """What is wrong with one line the client sent, decoded as zread decodes it
        (Go's rules: :func:`~simulator.core.envelope.decode_command`)."""
        if not raw.strip(b" \t\r\n"):
            return  # blank lines are ignored
        try:
            command: Command | None = decode_command(raw)
        except RejectedLine:
            command = None
        sent = "a line" if command is None or not command.type else _fmt(command.type)
        if self._done:
            yield f"the client sent {sent} after done:true where zread waits for nothing"
            return
        if command is None:
            yield "the client sent a line that is not a JSON object where zread waits for a command"
            return
        if not command.type:
            yield "the client sent an object without a string type where zread waits for a command"
            return
        yield from self._against_last(command, sent)

    def _against_last(self, command: Command, sent: str) -> Iterator[str]:
        kind = command.type
        if kind == "quit":
            return
        if self._last is None:
            yield f"the client sent {sent} before the first event where zread waits for nothing yet"
            return
        waiting = [w for w in self._last["waiting_for"] if w != "quit"]
        if kind not in self._last["waiting_for"]:
            if waiting:
                expected = ", ".join(_fmt(w) for w in self._last["waiting_for"])
                yield f"the client sent {sent} where zread waits for one of {expected}"
            else:
                yield (
                    f"the client sent {sent} where zread waits for nothing "
                    "(an internal result is pending; only quit is accepted)"
                )
            return
        if not command.params.lstrip().startswith(b"{"):
            shown = command.params.decode("utf-8", "replace")
            yield f"the client sent {sent} with params {shown} where zread waits for an object"
            return
        struct = self._params.get(kind)
        if struct is not None:
            try:
                decode_params(command.params, struct)
            except RejectedLine as exc:
                reason = in_words(str(exc).removeprefix("invalid params: "))
                yield (
                    f"the client sent {sent} with params that do not fit ({reason}) where "
                    f"zread waits for {struct.__name__}"
                )


# -- recording ----------------------------------------------------------------------------


def _encode_line(raw: bytes) -> dict[str, Any]:
    try:
        return {"line": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"line_b64": base64.b64encode(raw).decode("ascii")}


def _decode_line(entry: Mapping[str, Any]) -> bytes:
    if isinstance(entry.get("line"), str):
        return str(entry["line"]).encode("utf-8", "surrogateescape")
    if isinstance(entry.get("line_b64"), str):
        return base64.b64decode(str(entry["line_b64"]), validate=True)
    raise ValueError("a line has neither line nor line_b64")


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
            entry: dict[str, Any] = {"t": t, "dir": direction, "n": n, **_encode_line(line)}
            if not complete:
                entry["eol"] = False
            self.lines.append(entry)
            self.checker.feed(direction, n, t, line)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Splitter:
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


def _digest(path: Path) -> str:
    if path.is_symlink():
        return hashlib.sha256(os.readlink(path).encode("utf-8", "surrogateescape")).hexdigest()
    sha = hashlib.sha256()
    with path.open("rb") as handle:
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
                with contextlib.suppress(OSError):
                    found[(name, path.relative_to(root).as_posix())] = _digest(path)
    return found


def _file_changes(
    before: Mapping[tuple[str, str], str], after: Mapping[tuple[str, str], str], redactor: Redactor
) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        change = "created" if old is None else "deleted" if new is None else "changed"
        root, path = key
        changes.append({"root": root, "path": redactor.text(path), "sha256": new, "change": change})
    return changes


def _roots(cwd: Path, environ: Mapping[str, str]) -> dict[str, Path]:
    roots = {"project": cwd}
    home = environ.get("HOME")
    if home and Path(home).resolve() != cwd.resolve():
        roots["home"] = Path(home)
    return roots


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


def _home_keys(home: str | None) -> list[str]:
    """The API key in HOME's ``config.yaml`` (what the program will read), if any."""
    from simulator.hosts.userfiles import UserFiles
    from simulator.scenario.world import World

    with contextlib.suppress(Exception):  # a config it cannot read is the program's to say
        return [UserFiles(Path(home)).world(World()).config.llm_api_key] if home else []
    return []


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _check_out_path(out: Path) -> None:
    if out.is_dir():
        raise RecordError(f"--out {out}: is a directory")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise RecordError(f"--out {out}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise RecordError(f"--out {out}: not writable")


@dataclass
class Recording:
    """What :func:`record` made: the cassette (as written) and the check of the run."""

    cassette: dict[str, Any]
    checker: Checker
    exit_code: int = 0
    report: list[str] = field(default_factory=list)


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
    redactor = Redactor(patterns, _home_keys(env.get("HOME")))
    _check_out_path(out)
    command = command or command_of(program)
    if command is not None and command not in COMMANDS:
        raise RecordError(f"--command {command}: not a zread command ({', '.join(COMMANDS)})")
    cwd = Path.cwd()
    roots = _roots(cwd, env)
    before = _snapshot(roots)
    checker = Checker(command)
    started = datetime.datetime.now(datetime.UTC)
    tape = _Tape(redactor, checker)
    try:
        proc = subprocess.Popen(
            list(program),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot run {program[0]}: {exc}") from None
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
    duration = tape.now()
    exit_code = _exit_code(returncode)
    checker.finish(exit_code, duration)
    cassette: dict[str, Any] = {
        "format": CASSETTE_FORMAT,
        "version": CASSETTE_VERSION,
        "argv": [redactor.text(word) for word in program],
        "command": command,
        "env": sorted(env),
        "cwd": redactor.text(str(cwd)),
        "started": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "duration": duration,
        "exit_code": exit_code,
        "redacted": {"api_keys": True, "url_tokens": True, "patterns": len(patterns)},
        "files": _file_changes(before, _snapshot(roots), redactor),
        "lines": list(tape.lines),
    }
    try:  # 0600: a cassette holds what both sides said, redacted or not
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "w", encoding="utf-8") as file:
            file.write(dumps(cassette))
    except OSError as exc:
        raise RecordError(f"--out {out}: cannot write the cassette ({exc.strerror})") from None
    return Recording(cassette, checker, exit_code, report(checker, cassette, redactor.secrets))


def record_as_dropin(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """The command line's drop-in recording: ``ZREAD_SIM_REAL argv...`` recorded into
    ``ZREAD_SIM_RECORD``; both variables are kept from the program (so a real binary that
    is itself a simulator does not record again). ``argv`` is zread's arguments, without
    the program name. Returns the exit code; the report is on stderr."""
    out, real = environ.get(RECORD_VAR, ""), environ.get(REAL_VAR, "")
    try:
        if not out:
            raise RecordError(f"{RECORD_VAR} is not set: no cassette to write")
        if not real:
            raise RecordError(f"{RECORD_VAR} is set but {REAL_VAR} does not name the real zread")
        env = {k: v for k, v in environ.items() if k not in (RECORD_VAR, REAL_VAR)}
        done = record([real, *argv], Path(out), environ=env)
    except RecordError as exc:
        _say(f"{PROG} record: {exc}")
        return 2
    _say("\n".join(done.report))
    return done.exit_code


# -- the cassette -------------------------------------------------------------------------


def dumps(cassette: Mapping[str, Any]) -> str:
    """The cassette's JSON: one key a line, one line or file entry a line (ASCII)."""
    parts = []
    for key, value in cassette.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            items = ",\n    ".join(json.dumps(item) for item in value)
            text = "[\n    " + items + "\n  ]"
        else:
            text = json.dumps(value)
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def read_cassette(path: Path) -> dict[str, Any]:
    """The cassette at ``path``; :class:`RecordError` when it cannot be read as one."""
    try:
        with path.open("rb") as file:
            data = file.read(LIMITS["cassette"] + 1)
        check_size(data, "cassette", str(path))
        check_json_nesting(data, str(path))
        doc = _decode(data)
    except OSError as exc:
        raise RecordError(f"{path}: cannot read ({exc.strerror})") from None
    except FormatError as exc:
        raise RecordError(str(exc)) from None
    except ValueError as exc:
        raise RecordError(f"{path}: not a cassette (not JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != CASSETTE_FORMAT:
        raise RecordError(f"{path}: not a cassette (no format {_fmt(CASSETTE_FORMAT)})")
    if doc.get("version") != CASSETTE_VERSION:
        raise RecordError(f"{path}: cassette version {doc.get('version')!r} is not supported")
    lines = doc.get("lines")
    if not isinstance(lines, list):
        raise RecordError(f"{path}: not a cassette (no list of lines)")
    for index, entry in enumerate(lines, 1):
        ok = (
            isinstance(entry, dict)
            and entry.get("dir") in DIRECTIONS
            and isinstance(entry.get("n"), int)
            and isinstance(entry.get("t"), int | float)
        )
        try:
            if not ok:
                raise ValueError("it needs t, dir and n")
            _decode_line(entry)
        except ValueError as exc:
            raise RecordError(f"{path}: line entry {index} is broken ({exc})") from None
    return doc


def check_cassette(cassette: Mapping[str, Any], command: str | None = None) -> Checker:
    """The conformance check of a cassette's lines, as :func:`record` ran it live."""
    command = command or cassette.get("command") or command_of(cassette.get("argv") or [])
    if command is not None and command not in COMMANDS:
        raise RecordError(f"command {command!r}: not a zread command ({', '.join(COMMANDS)})")
    checker = Checker(command)
    for entry in cassette["lines"]:
        checker.feed(entry["dir"], entry["n"], float(entry["t"]), _decode_line(entry))
    exit_code = cassette.get("exit_code")
    checker.finish(
        exit_code if isinstance(exit_code, int) else None, float(cassette.get("duration") or 0)
    )
    return checker


def report(
    checker: Checker, cassette: Mapping[str, Any], secrets: Secrets | None = None
) -> list[str]:
    """The check's report, one line each: the deviations (redacted with ``secrets``, by
    default the keys the cassette's lines name), then the verdict."""
    if secrets is None:
        secrets = Secrets()
        for entry in cassette["lines"]:
            secrets.learn(_decode_line(entry))
    lines = [secrets.redact_text(str(deviation)) for deviation in checker.deviations]
    counted = {d: sum(1 for e in cassette["lines"] if e["dir"] == d) for d in DIRECTIONS}
    what = f"{checker.command} chart" if checker.command else "envelope only (no zread command)"
    summary = (
        f"{counted['out']} events, {counted['in']} commands, {counted['err']} stderr lines; "
        f"checked against the {what}: "
    )
    found = len(checker.deviations)
    lines.append(summary + ("clean" if not found else f"{found} deviation{'s' * (found != 1)}"))
    return lines


# -- the command line ---------------------------------------------------------------------


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _parser() -> argparse.ArgumentParser:
    parser = raising(RecordError)(
        prog=PROG, description="Record a zread --stdio run; check a cassette."
    )
    sub = parser.add_subparsers(dest="tool", required=True, parser_class=raising(RecordError))
    rec = sub.add_parser(
        "record",
        help="run a program between the client and it, writing a cassette",
        description="Pass stdin, stdout and stderr through to PROGRAM unchanged; write every "
        "line each way, redacted, to a cassette; check both sides against the charts "
        "(report on stderr). Exits with the program's exit code.",
    )
    rec.add_argument("--out", required=True, type=Path, help="the cassette to write")
    rec.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a regular expression whose matches are replaced (repeatable)",
    )
    rec.add_argument("--command", choices=sorted(COMMANDS), help="the chart to check against")
    rec.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    chk = sub.add_parser(
        "check",
        help="check a cassette against the charts",
        description="Exit 0 when both sides follow the charts, 1 on deviations, 2 when the "
        "cassette cannot be read.",
    )
    chk.add_argument("cassette", type=Path)
    chk.add_argument("--command", choices=sorted(COMMANDS), help="the chart to check against")
    return parser


def main(argv: list[str]) -> int:
    """``record --out FILE [--redact PATTERN]... -- PROGRAM ...`` or ``check CASSETTE``."""
    tool = argv[0] if argv and argv[0] in ("record", "check") else ""
    try:
        args = _parser().parse_args(argv)
    except RecordError as exc:
        _say(f"{PROG} {tool}".rstrip() + f": {exc}")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    try:
        if args.tool == "record":
            program = list(args.program)
            if program[:1] == ["--"]:
                program = program[1:]
            done = record(program, args.out, patterns=args.redact, command=args.command)
            _say("\n".join(done.report))
            return done.exit_code
        cassette = read_cassette(args.cassette)
        checker = check_cassette(cassette, args.command)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write("\n".join(report(checker, cassette)) + "\n")
            sys.stdout.flush()
        return 0 if checker.clean else 1
    except RecordError as exc:
        _say(f"{PROG} {args.tool}: {exc}")
        return 2
    except Exception as exc:  # the tool's own bug: one line, as the command line does
        _say(f"{PROG} {args.tool}: internal error: {type(exc).__name__}: {exc}")
        return 70


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
