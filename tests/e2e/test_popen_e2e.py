"""End to end: a client's own launches of ``zread`` under the ``zread_popen`` fixture.

The client code in each test is what a user's would be (``subprocess.Popen``, ``run``,
``check_output``, ``asyncio.create_subprocess_exec``), unchanged; the fixture serves
each launch in-process on real pipes, with zread_bin's journal, calls and violations.
The cases where the fixture itself fails a test run with ``pytester``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from simulator.popen import pid_floor
from simulator.pytest_plugin import ZreadExecutable

pytest_plugins = ["pytester"]

GENERATE = ["zread", "generate", "--stdio"]
QUIT = b'{"type":"quit"}\n'


def test_popen_and_readline_answer_live(zread_popen: ZreadExecutable) -> None:
    zread = subprocess.Popen(GENERATE, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert isinstance(zread, subprocess.Popen)
    assert zread.pid >= pid_floor()  # no process: a pid none can have
    assert zread.stdin is not None and zread.stdout is not None
    first = json.loads(zread.stdout.readline())
    assert first["waiting_for"] == ["select_action", "cancel", "quit"]
    zread.stdin.write(b'{"type":"select_action","params":{"action":"generate"}}\n')
    zread.stdin.flush()
    event = first
    while not event["done"]:
        event = json.loads(zread.stdout.readline())
    assert event["vm"]["state"] == "done"
    assert zread.wait(10) == 0
    assert zread.stdout.read() == b""  # the end: its stdout closed when it exited
    zread.stdin.close()
    zread.stdout.close()
    [call] = zread_popen.calls
    assert call.argv == ["zread", "generate", "--stdio"]
    assert call.pid == zread.pid and call.exit_code == 0 and call.how == "done"
    assert call.cwd == str(zread_popen.project)
    assert list((zread_popen.project / ".zread" / "wiki" / "versions").iterdir())


def test_run_with_input_and_text(zread_popen: ZreadExecutable) -> None:
    done = subprocess.run(GENERATE, input='{"type":"quit"}\n', capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(lines[-1])["done"] is True
    assert zread_popen.calls[0].how == "quit"


def test_check_output_and_a_usage_error(zread_popen: ZreadExecutable) -> None:
    out = subprocess.check_output(["zread", "version", "--stdio"])
    assert json.loads(out)["vm"]["version"]
    with pytest.raises(subprocess.CalledProcessError) as raised:
        subprocess.check_output(["zread", "generate", "--nope"], stderr=subprocess.PIPE)
    assert raised.value.returncode == 2
    assert raised.value.stderr == b"zread: generate: unrecognized arguments: --nope\n"
    assert type(raised.value.returncode) is int
    help_text = subprocess.run(["zread", "--help"], capture_output=True, text=True).stdout
    assert "This zread is zread-sim, a stand-in" in help_text


def test_a_path_object_as_the_program_is_served(zread_popen: ZreadExecutable) -> None:
    alone = subprocess.run(Path(zread_popen), capture_output=True, text=True)
    assert (alone.returncode, alone.stderr) == (0, "")
    assert alone.stdout.startswith("Zread turns a code repository into a wiki")
    listed = subprocess.run([Path(zread_popen), "version", "--stdio"], capture_output=True)
    assert json.loads(listed.stdout)["done"] is True
    assert [call.argv[1:] for call in zread_popen.calls] == [["version", "--stdio"]]


def test_communicate_and_iterating_stdout(zread_popen: ZreadExecutable) -> None:
    with subprocess.Popen(
        [*GENERATE, "-y"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as zread:
        assert zread.stdout is not None
        events = [json.loads(line) for line in zread.stdout]
    assert zread.returncode == 0 and events[-1]["done"] is True
    again = subprocess.Popen(
        GENERATE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, err = again.communicate(QUIT, timeout=10)
    assert err is None and again.returncode == 0
    assert json.loads(out.splitlines()[-1])["done"] is True


def test_a_wait_that_times_out_then_terminate_quits(zread_popen: ZreadExecutable) -> None:
    zread_popen.strict = False  # a signal instead of quit is a violation of its call
    zread = subprocess.Popen(GENERATE, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert zread.stdout is not None
    zread.stdout.readline()
    with pytest.raises(subprocess.TimeoutExpired):
        zread.wait(0.2)
    assert zread.poll() is None
    zread.terminate()  # SIGTERM: quit, the final event, exit 0
    out, _ = zread.communicate(timeout=10)
    assert json.loads(out.splitlines()[-1])["done"] is True
    assert zread.returncode == 0
    assert zread_popen.calls[0].how == "signal"


def test_os_kill_on_the_pid_signals_the_call(zread_popen: ZreadExecutable) -> None:
    zread_popen.strict = False
    zread = subprocess.Popen(GENERATE, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert zread.stdout is not None
    zread.stdout.readline()
    os.kill(zread.pid, signal.SIGINT)
    assert zread.wait(10) == 0
    zread.communicate()
    assert zread_popen.calls[0].how == "signal"


def test_kill_leaves_the_draft_as_a_killed_zread_does(
    zread_popen: ZreadExecutable, monkeypatch: pytest.MonkeyPatch
) -> None:
    zread_popen.strict = False  # a SIGKILL is a violation of its call
    monkeypatch.setenv("ZREAD_SIM_SPEED", "0.2")
    zread = subprocess.Popen([*GENERATE, "-y"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert zread.stdout is not None
    event = json.loads(zread.stdout.readline())
    while event["vm"]["pages"]["done"] < 1:
        event = json.loads(zread.stdout.readline())
    zread.kill()
    assert zread.wait(5) == -signal.SIGKILL
    zread.stdout.read()  # whatever was in the pipe, then the end
    wiki = zread_popen.project / ".zread" / "wiki"
    left = sorted(p.name for p in wiki.iterdir())
    assert "drafts" in left and any(name.startswith(".draft-") for name in left), left
    assert not (wiki / "versions").exists() or not list((wiki / "versions").iterdir())
    [call] = zread_popen.calls
    assert call.exit_code is None  # nothing written after the kill: no exit record
    assert any("no exit recorded" in v for v in call.violations)
    # What it held is let go: the next run finds the draft stale and removes it.
    monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
    subprocess.run([*GENERATE, "-y"], stdout=subprocess.DEVNULL, check=True, timeout=30)
    assert not any(p.name.startswith(".draft-") for p in wiki.iterdir())
    assert len(list((wiki / "versions").iterdir())) == 1


def test_asyncio_create_subprocess_exec(zread_popen: ZreadExecutable) -> None:
    zread_popen.strict = False  # the second one is killed

    async def client() -> tuple[list[dict[str, object]], int | None, int | None]:
        proc = await asyncio.create_subprocess_exec(
            *GENERATE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert isinstance(proc, asyncio.subprocess.Process)
        assert proc.stdin is not None and proc.stdout is not None
        first = json.loads(await proc.stdout.readline())
        proc.stdin.write(QUIT)
        await proc.stdin.drain()
        out, _ = await proc.communicate()
        events = [first, *(json.loads(line) for line in out.splitlines())]
        other = await asyncio.create_subprocess_exec(
            *GENERATE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert other.stdout is not None
        await other.stdout.readline()
        other.kill()
        return events, proc.returncode, await other.wait()

    events, code, killed = asyncio.run(client())
    assert events[-1]["done"] is True and code == 0
    assert killed == -signal.SIGKILL


def test_a_shell_launch_and_other_commands_run_for_real(
    zread_popen: ZreadExecutable,
) -> None:
    out = subprocess.run(
        "zread version --stdio; echo $$", shell=True, capture_output=True, check=True
    ).stdout.splitlines()
    assert json.loads(out[0])["vm"]["version"]
    shell_pid = int(out[1])
    [call] = zread_popen.calls  # the real stand-in, journaled as zread_bin journals it
    assert call.pid != shell_pid and call.pid < pid_floor() and call.exit_code == 0
    echo = subprocess.Popen(["echo", "real"], stdout=subprocess.PIPE)
    assert echo.pid < pid_floor()
    assert echo.communicate()[0] == b"real\n"
    with pytest.raises(FileNotFoundError):  # not on this launch's PATH: not served
        subprocess.run(["zread", "version"], env={"PATH": str(zread_popen.project)})


def test_a_stripped_environment_and_another_directory(
    zread_popen: ZreadExecutable, tmp_path: Path
) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(
        [*GENERATE, "-y", "--speed", "0"], env=env, cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0
    assert (tmp_path / ".zread" / "wiki" / "current").exists()
    assert zread_popen.calls == []  # no ZREAD_SIM_JOURNAL in its environment


def test_violations_fail_the_test_and_a_call_left_running_is_killed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import subprocess

        def test_out_of_turn(zread_popen):
            subprocess.run(["zread", "generate", "--stdio"], input=b'{"type":"save"}\\n'
                           b'{"type":"quit"}\\n', capture_output=True)

        def test_left_running(zread_popen, monkeypatch):
            monkeypatch.setenv("ZREAD_SIM_SCENARIO", "hang")
            proc = subprocess.Popen(["zread", "generate", "--stdio"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            proc.stdout.readline()

        def test_timeout(zread_popen):
            zread_popen.timeout = 0.3
            zread_popen.strict = False
            proc = subprocess.Popen(["zread", "generate", "--stdio"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert proc.wait(10) == -9
            [call] = zread_popen.calls
            assert call.how == "killed" and "after the 0.3 s timeout" in call.violations[-1]
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*zread_popen: the zread processes of this test saw mistakes*",
            "*save*",
            "*still running when the test ended (killed)*",
        ]
    )
