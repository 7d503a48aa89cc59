"""Tests for simulator.served: the program on a thread, on real pipes."""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.served import ServedCall

PID = 1 << 23


class Ends:
    """The caller's ends of a served call's three pipes."""

    def __init__(self, argv: list[str], cwd: Path, **environ: str) -> None:
        in_r, self.stdin = os.pipe()
        self.stdout, out_w = os.pipe()
        self.stderr, err_w = os.pipe()
        env = {"PATH": os.environ["PATH"], "ZREAD_SIM_SPEED": "0", **environ}
        self.call = ServedCall(argv, env, str(cwd), (in_r, out_w, err_w), PID)

    def read(self, fd: int) -> bytes:
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
        return data

    def line(self) -> dict[str, object]:
        data = b""
        while not data.endswith(b"\n"):
            data += os.read(self.stdout, 1)
        return dict(json.loads(data))

    def close(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr):
            os.close(fd)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Ends]]:
    made: list[Ends] = []
    yield made
    for ends in made:
        ends.call.signal(signal.SIGKILL)
        ends.close()


def test_a_run_writes_its_events_exits_and_closes_its_ends(
    served: list[Ends], tmp_path: Path
) -> None:
    ends = Ends(["zread", "generate", "-y", "--stdio", "--no-files"], tmp_path)
    served.append(ends)
    lines = ends.read(ends.stdout).splitlines()  # EOF: the run closed its stdout
    assert json.loads(lines[-1])["done"] is True
    assert ends.call.wait(10) == 0
    assert ends.read(ends.stderr) == b""


def test_a_usage_error_goes_to_its_stderr_with_exit_2(served: list[Ends], tmp_path: Path) -> None:
    ends = Ends(["zread", "generate", "--nope"], tmp_path)
    served.append(ends)
    assert ends.call.wait(10) == 2
    assert type(ends.call.returncode) is int
    assert ends.read(ends.stderr) == b"zread: generate: unrecognized arguments: --nope\n"


def test_sigterm_quits_and_an_ignored_signal_does_nothing(
    served: list[Ends], tmp_path: Path
) -> None:
    ends = Ends(["zread", "generate", "--stdio", "--no-files"], tmp_path)
    served.append(ends)
    assert ends.line()["waiting_for"] == ["select_action", "cancel", "quit"]
    ends.call.signal(signal.SIGWINCH)
    assert ends.call.wait(0.1) is None
    ends.call.signal(signal.SIGTERM)
    assert ends.call.wait(10) == 0
    assert json.loads(ends.read(ends.stdout).splitlines()[-1])["done"] is True


def test_sigkill_ends_it_at_once_and_journals_nothing_more(
    served: list[Ends], tmp_path: Path
) -> None:
    journal = tmp_path / "journal.jsonl"
    ends = Ends(["zread", "generate", "--stdio"], tmp_path, ZREAD_SIM_JOURNAL=str(journal))
    served.append(ends)
    ends.line()
    ends.call.signal(signal.SIGKILL)
    assert ends.call.wait(0) == -signal.SIGKILL
    assert ends.call.join(0)  # it let go of all it held before it counted as exited
    assert ends.read(ends.stdout) == b""  # nothing after the kill, then the end
    kinds = [json.loads(line)["kind"] for line in journal.read_text().splitlines()]
    assert kinds[0] == "start" and "exit" not in kinds
    assert all(json.loads(line)["pid"] == PID for line in journal.read_text().splitlines())


@pytest.mark.parametrize("control", [(), ("--control", "stdio")], ids=["plain", "control"])
def test_after_a_kill_its_ends_are_gone_before_its_parent_can_wait(
    served: list[Ends], tmp_path: Path, control: tuple[str, ...]
) -> None:
    # A killed process's descriptors are closed by the kernel before wait() returns:
    # the reader sees the end at once and nothing more comes, even under --control,
    # where the run quits (and writes a last event) instead of dying; a writer gets EPIPE.
    ends = Ends(["zread", "generate", "--stdio", "--no-files", *control], tmp_path)
    served.append(ends)
    ends.line()
    ends.call.signal(signal.SIGKILL)
    assert ends.call.wait(0) == -signal.SIGKILL
    os.set_blocking(ends.stdout, False)
    assert os.read(ends.stdout, 1 << 16) == b""  # the end, now, without waiting for the run
    assert ends.call.join(5)
    with pytest.raises(BrokenPipeError):
        os.write(ends.stdin, b'{"type":"quit"}\n')


def test_a_signal_while_it_starts_is_taken_once_the_session_exists(
    served: list[Ends], tmp_path: Path
) -> None:
    ends = Ends(["zread", "generate", "--stdio", "--no-files"], tmp_path)
    served.append(ends)
    ends.call.signal(signal.SIGTERM)
    assert ends.call.wait(10) == 0
    assert json.loads(ends.read(ends.stdout).splitlines()[-1])["done"] is True


def test_the_project_is_its_working_directory(served: list[Ends], tmp_path: Path) -> None:
    ends = Ends(["zread", "generate", "-y", "--stdio"], tmp_path, ZREAD_SIM_HOME=str(tmp_path))
    served.append(ends)
    ends.read(ends.stdout)
    assert ends.call.wait(10) == 0
    assert (tmp_path / ".zread" / "wiki" / "current").exists()


def test_relative_paths_start_from_its_working_directory(
    served: list[Ends], tmp_path: Path
) -> None:
    (tmp_path / "mine.toml").write_text(
        'extends = "default"\n[world.release]\ncurrent_version = "9.8.7"\n'
    )
    umask = os.umask(0o022)
    os.umask(umask)
    ends = Ends(
        ["zread", "version", "--stdio", "--scenario", "mine.toml", "--journal", "j.jsonl"],
        tmp_path,
    )
    served.append(ends)
    (event,) = [json.loads(line) for line in ends.read(ends.stdout).splitlines()]
    assert "9.8.7" in json.dumps(event)
    assert ends.call.wait(10) == 0
    assert (tmp_path / "j.jsonl").stat().st_size > 0
    assert not Path("j.jsonl").exists()

    ends = Ends(
        ["zread", "generate", "--stdio", "--no-files", "--control", "unix:c.sock"], tmp_path
    )
    served.append(ends)
    ends.line()  # the first event: the socket listens
    sock = tmp_path / "c.sock"
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sock", "j.jsonl", "mine.toml"]
    assert os.umask(umask) == umask  # the process's umask was never changed
    ends.call.signal(signal.SIGTERM)
    assert ends.call.wait(10) == 0
    assert not sock.exists()


@pytest.mark.parametrize("control", ["stdio", "unix:c.sock"])
def test_sigterm_quits_a_run_under_control(
    served: list[Ends], tmp_path: Path, control: str
) -> None:
    ends = Ends(["zread", "generate", "--stdio", "--no-files", "--control", control], tmp_path)
    served.append(ends)
    assert os.read(ends.stdout, 1)  # the run has begun
    ends.call.signal(signal.SIGTERM)
    assert ends.call.wait(10) == 0
    assert b'"done":true' in ends.read(ends.stdout)
