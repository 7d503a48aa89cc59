"""Transport faults as a client sees them: real processes on real pipes.

Every test spawns ``python -m simulator CMD --stdio --speed 0 --scenario X`` and reads
its stdout and stderr through the small selector-based reader below (self-contained on
purpose: it relies on no other test module). The events a fault leaves alone are
compared byte for byte with the same session run in-process without faults.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.core.session import Session
from simulator.scenario import load_scenario
from statecharts import load_chart

SILENCE = 0.5
"""How long "nothing more arrives" is watched for: at speed 0 a process that is not
stuck writes its next event within milliseconds."""


class Child:
    """One simulator process with its three pipes; always killed on leaving ``with``."""

    def __init__(
        self, command: str, scenario: str, *flags: str, speed: str = "0", seed: int = 0
    ) -> None:
        argv = [sys.executable, "-m", "simulator", command, *flags, "--stdio"]
        argv += ["--speed", speed, "--scenario", scenario, "--seed", str(seed)]
        env = {
            k: v
            for k, v in os.environ.items()
            if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
        }
        env["ZREAD_SIM_FILES"] = "0"  # the bytes on stdout alone, run after run
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        self._selector = selectors.DefaultSelector()
        self._names: dict[int, str] = {}
        for stream, name in ((self.popen.stdout, "out"), (self.popen.stderr, "err")):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
            self._names[fd] = name
        self.data = {"out": bytearray(), "err": bytearray()}
        self.eof = {"out": False, "err": False}
        self.reads: list[bytes] = []
        """Every chunk one os.read returned from stdout, in order."""
        self._taken = 0

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=5)
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._selector.close()

    # -- reading ---------------------------------------------------------------------

    def _pump(self, deadline: float) -> None:
        """Wait for bytes or end of file on stdout or stderr, until ``deadline``."""
        if all(self.eof.values()):
            time.sleep(max(0.0, min(0.05, deadline - time.monotonic())))
            return
        for key, _ in self._selector.select(max(0.0, deadline - time.monotonic())):
            name = self._names[key.fd]
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if chunk:
                self.data[name] += chunk
                if name == "out":
                    self.reads.append(chunk)
            else:
                self.eof[name] = True
                self._selector.unregister(key.fd)

    def line(self, timeout: float = 5.0) -> bytes:
        """The next stdout line with its newline; at end of file the incomplete rest."""
        deadline = time.monotonic() + timeout
        out = self.data["out"]
        while True:
            end = out.find(b"\n", self._taken)
            if end >= 0:
                line = bytes(out[self._taken : end + 1])
                self._taken = end + 1
                return line
            if self.eof["out"]:
                rest = bytes(out[self._taken :])
                self._taken = len(out)
                return rest
            if time.monotonic() >= deadline:
                raise AssertionError(f"no line within {timeout}s; have {bytes(out[-300:])!r}")
            self._pump(deadline)

    def silent_for(self, seconds: float) -> bool:
        """True when no byte and no end of file arrived on stdout for ``seconds``."""
        before, deadline = len(self.data["out"]), time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._pump(deadline)
        return len(self.data["out"]) == before and not self.eof["out"]

    def wait_stdout_eof(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.eof["out"]:
            assert time.monotonic() < deadline, "stdout still open"
            self._pump(deadline)

    def finish(self, timeout: float = 10.0) -> tuple[list[bytes], bytes, int]:
        """Read both streams to their end; (stdout lines, stderr, exit code)."""
        deadline = time.monotonic() + timeout
        while not all(self.eof.values()):
            assert time.monotonic() < deadline, f"still open: {self.eof}"
            self._pump(deadline)
        code = self.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        return bytes(self.data["out"]).splitlines(keepends=True), bytes(self.data["err"]), code

    # -- writing -------------------------------------------------------------------

    def send(self, command: dict[str, Any]) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps(command, separators=(",", ":")).encode() + b"\n")
        self.popen.stdin.flush()

    def alive(self) -> bool:
        return self.popen.poll() is None


# -- helpers -------------------------------------------------------------------------


def scenario_file(tmp_path: Path, faults: str, name: str = "faulty") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'extends = "default"\n\n{faults}', encoding="utf-8")
    return str(path)


def baseline(command: str, scenario: str, *, seed: int = 0, **flags: Any) -> list[bytes]:
    """The events of ``command`` run to its end in-process at speed 0, without faults."""
    loaded = msgspec.structs.replace(load_scenario(scenario), faults=[])
    session = Session(
        load_chart(command),
        loaded,
        flags=load_chart(command).flags_type(**flags),
        seed=seed,
        speed=0,
    )
    out = session.start()
    while not session.done and (deadline := session.next_deadline()) is not None:
        out += session.advance(deadline)
    return out


def event(line: bytes) -> dict[str, Any]:
    """A complete, valid event line."""
    assert line.endswith(b"\n") and line.count(b"\n") == 1, line
    parsed = json.loads(line)
    assert list(parsed) == ["vm", "waiting_for", "done", "error"], line
    return dict(parsed)


def is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def run_generate(scenario: str, seed: int = 0) -> tuple[list[bytes], bytes, int]:
    with Child("generate", scenario, "-y", seed=seed) as child:
        return child.finish()


def test_baseline_matches_a_process_without_faults() -> None:
    lines, err, code = run_generate("default")
    assert code == 0 and err == b""
    assert lines == baseline("generate", "default", yes=True)
    assert event(lines[-1])["done"] is True


# -- every kind --------------------------------------------------------------------


def test_diagnostic_is_a_non_json_line_between_intact_events(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path, '[[faults]]\nkind = "diagnostic"\nafter_event = 2\ntext = "warning: x"\n'
    )
    lines, err, code = run_generate(path)
    expected = baseline("generate", path, yes=True)
    assert code == 0 and err == b""
    assert lines[2] == b"warning: x\n" and not is_json(lines[2])
    assert lines[:2] + lines[3:] == expected
    assert event(lines[-1])["done"] is True


def test_stderr_lines_go_to_stderr_and_stdout_has_only_events(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "stderr"\ntext = "zread: note"\n')
    lines, err, code = run_generate(path)
    expected = baseline("generate", path, yes=True)
    assert code == 0
    assert lines == expected
    # One stderr line after every event, done included.
    assert err == b"zread: note\n" * len(expected)


def test_split_event_arrives_in_several_reads_and_reads_back_intact(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path,
        '[[faults]]\nkind = "split"\nafter_event = 1\npieces = 4\npause = 0.05\n',
    )
    with Child("config", path, speed="1") as child:
        first = child.line()
        assert first == baseline("config", path)[0]
        assert event(first)["waiting_for"] == ["update_fields", "save", "reload_llm", "quit"]
        # 3 pauses of 50 ms: a reader waiting on the pipe sees more than one chunk.
        assert len(child.reads) >= 2, child.reads
        assert b"".join(child.reads) == first
        child.send({"type": "quit"})
        final = event(child.line())
        lines, _, code = child.finish()
    assert final["done"] is True and code == 0 and lines[-1].endswith(b"\n")


def test_truncate_leaves_an_invalid_line_then_intact_events(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "truncate"\nafter_event = 2\n')
    lines, err, code = run_generate(path)
    expected = baseline("generate", path, yes=True)
    assert code == 0 and err == b""
    assert len(lines) == len(expected)
    assert lines[1].endswith(b"\n") and not is_json(lines[1])
    assert expected[1].startswith(lines[1][:-1])
    assert lines[:1] + lines[2:] == expected[:1] + expected[2:]
    assert event(lines[-1])["done"] is True


def test_invalid_utf8_is_a_line_that_does_not_decode(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "invalid_utf8"\nafter_event = 1\n')
    lines, _, code = run_generate(path)
    expected = baseline("generate", path, yes=True)
    assert code == 0
    with pytest.raises(UnicodeDecodeError):
        lines[1].decode("utf-8")
    assert lines[:1] + lines[2:] == expected


def test_duplicate_sends_the_same_event_bytes_twice_in_a_row(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "duplicate"\nafter_event = 3\n')
    lines, _, code = run_generate(path)
    expected = baseline("generate", path, yes=True)
    assert code == 0
    assert lines[2] == lines[3] == expected[2]
    assert lines[:3] + lines[4:] == expected


def test_exit_between_lines(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "exit"\nafter_event = 4\ncode = 5\n')
    lines, _, code = run_generate(path)
    assert code == 5
    assert lines == baseline("generate", path, yes=True)[:4]
    assert lines[-1].endswith(b"\n")
    assert not any(event(line)["done"] for line in lines)


def test_exit_mid_line(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path, '[[faults]]\nkind = "exit"\nafter_event = 2\nmid_line = true\ncode = 9\n'
    )
    lines, _, code = run_generate(path)
    expected = baseline("generate", path, yes=True)
    assert code == 9
    assert len(lines) == 2 and lines[0] == expected[0]
    assert not lines[-1].endswith(b"\n") and lines[-1]
    assert expected[1].startswith(lines[-1])


def test_hang_goes_silent_and_stays_alive(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "hang"\nafter_event = 2\n')
    expected = baseline("generate", path, yes=True)
    with Child("generate", path, "-y") as child:
        assert [child.line(), child.line()] == expected[:2]
        assert child.silent_for(SILENCE)
        child.send({"type": "quit"})  # not read either
        assert child.silent_for(0.2)
        assert child.alive()
        # A hung process is stuck: SIGTERM no longer means quit, it kills.
        child.popen.terminate()
        assert child.popen.wait(timeout=5) == -signal.SIGTERM


def test_close_stdout_gives_eof_while_the_process_lives_on(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "close_stdout"\nafter_event = 1\n')
    with Child("config", path) as child:
        assert child.line() == baseline("config", path)[0]
        child.wait_stdout_eof()
        assert child.line() == b""
        assert child.alive()
        child.send({"type": "quit"})
        lines, _, code = child.finish()
    assert code == 0
    assert len(lines) == 1


def test_stop_reading_leaves_commands_unanswered(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, '[[faults]]\nkind = "stop_reading"\nafter_event = 1\n')
    with Child("config", path) as child:
        event(child.line())
        child.send({"type": "save"})
        child.send({"type": "quit"})
        assert child.silent_for(SILENCE)
        assert child.alive()
        # Signals are still heard: SIGTERM is quit, the final event and exit 0.
        child.popen.terminate()
        lines, _, code = child.finish()
    assert code == 0
    assert event(lines[-1])["done"] is True and len(lines) == 2


def test_on_state_fault_fires_when_the_state_is_entered(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path, '[[faults]]\nkind = "diagnostic"\non_state = "has_update"\ntext = "hi"\n'
    )
    with Child("update", path) as child:
        assert event(child.line())["vm"]["state"] == "checking"
        assert event(child.line())["vm"]["state"] == "has_update"
        assert child.line() == b"hi\n"
        child.send({"type": "quit"})
        lines, _, code = child.finish()
    assert code == 0 and event(lines[-1])["done"] is True
    assert lines.count(b"hi\n") == 1


# -- the built-ins --------------------------------------------------------------------


def test_noisy_keeps_every_event_intact_and_reaches_done() -> None:
    lines, err, code = run_generate("noisy")
    assert code == 0
    events = [line for line in lines if line.startswith(b"{")]
    noise = [line for line in lines if not line.startswith(b"{")]
    assert events == baseline("generate", "default", yes=True)
    assert all(event(line) for line in events)
    assert noise and not any(is_json(line) for line in noise)
    assert err.count(b"\n") >= 1
    assert event(events[-1])["done"] is True


def test_crash_exits_3_mid_line_without_done() -> None:
    lines, _, code = run_generate("crash")
    expected = baseline("generate", "default", yes=True)
    assert code == 3
    assert len(lines) == 3 and lines[:2] == expected[:2]
    assert not lines[-1].endswith(b"\n") and expected[2].startswith(lines[-1])
    assert b'"done":true' not in b"".join(lines)


def test_hang_builtin_is_silent_after_three_events() -> None:
    expected = baseline("generate", "default", yes=True)
    with Child("generate", "hang", "-y") as child:
        assert [child.line() for _ in range(3)] == expected[:3]
        assert child.silent_for(SILENCE)
        assert child.alive()


def test_slow_multiplies_the_first_deadline_by_ten() -> None:
    def first_deadline(name: str) -> float:
        session = Session(load_chart("update"), load_scenario(name), seed=0)
        session.start()
        deadline = session.next_deadline()
        assert deadline is not None
        return deadline

    slow, default = first_deadline("slow"), first_deadline("default")
    assert default > 0
    assert slow == pytest.approx(10 * default)


# -- reproducibility ------------------------------------------------------------------


def assert_reproducible(scenario: str) -> None:
    first, again, other = (
        run_generate(scenario, 1),
        run_generate(scenario, 1),
        run_generate(scenario, 2),
    )
    assert first[2] == again[2] == other[2] == 0
    assert first[0] == again[0] and first[1] == again[1]
    assert first[0] != other[0]

    def shape(lines: list[bytes]) -> list[bool]:
        return [is_json(line) for line in lines]

    assert shape(first[0]) != shape(other[0]) or first[1] != other[1]


def test_noisy_is_reproducible_from_the_seed() -> None:
    assert_reproducible("noisy")


def test_probability_faults_are_reproducible_from_the_seed(tmp_path: Path) -> None:
    path = scenario_file(
        tmp_path,
        '[[faults]]\nkind = "duplicate"\nprobability = 0.3\n\n'
        '[[faults]]\nkind = "truncate"\nprobability = 0.2\n\n'
        '[[faults]]\nkind = "stderr"\nprobability = 0.5\n',
    )
    assert_reproducible(path)
