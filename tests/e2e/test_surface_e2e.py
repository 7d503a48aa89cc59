"""The binary's surface end to end: a ``zread`` written by ``zread-sim install``, run as
real processes the way zread's clients run it.

Every test installs its own ``zread`` into ``tmp_path`` and runs it by path or found on
PATH, most of them in the environment a sandboxing client leaves its child (HOME, PATH,
LANG, LC_ALL, TMPDIR and nothing else), with stdin null as a desktop hub spawns it.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import Proc, install_zread

GO_OS = {"linux": "linux", "darwin": "darwin", "win32": "windows"}[sys.platform]
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[
    platform.machine().lower()
]
COMMANDS = ["browse", "config", "generate", "login", "update", "version"]


def install(folder: Path, *options: str) -> Path:
    """``zread-sim install folder *options`` as a real process; the script it wrote."""
    return install_zread(folder, *options) / "zread"


def sandbox(root: Path, **extra: str) -> dict[str, str]:
    """A child environment as a sandboxed wiki job builds it: a fresh HOME and no more."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env["TMPDIR"] = str(root)
    env.update(extra)
    return env


def zread(
    program: Path | str, *argv: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """One run with stdin null, as a hub spawns zread."""
    return subprocess.run(
        [str(program), *argv],
        env=env,
        cwd=cwd or env["HOME"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )


def events_of(done: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    """Every stdout line, each of which must parse as a JSON event (a strict client)."""
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events and all(isinstance(e, dict) for e in events)
    return events


def one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def release(tmp_path: Path, version: str) -> str:
    path = tmp_path / f"release-{version}.toml"
    path.write_text(f'[world.release]\ncurrent_version = "{version}"\n', encoding="utf-8")
    return str(path)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    return tmp_path / "bin"


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``zread`` installed with no option, shared by the module's tests that only run
    it (none writes beside it: its folder holds that one script)."""
    return install(tmp_path_factory.mktemp("bin"))


# -- a sandboxed job: stripped environment, the version pin --------------------------------


def test_the_version_pin_holds_in_a_stripped_environment(tmp_path: Path, plain: Path) -> None:
    script = plain
    env = sandbox(tmp_path)
    done = zread(script, "version", "--stdio", env=env)
    assert done.returncode == 0, done.stderr
    last = events_of(done)[-1]
    assert last["done"] is True and last["vm"]["version"] == "0.2.13"
    assert done.stderr == b""
    assert list(Path(env["HOME"]).iterdir()) == []  # version writes nothing


def test_baked_options_steer_a_stripped_environment(tmp_path: Path, bin_dir: Path) -> None:
    script = install(bin_dir, "--scenario", release(tmp_path, "1.0.0"), "--speed", "0")
    env = sandbox(tmp_path)
    assert events_of(zread(script, "version", "--stdio", env=env))[-1]["vm"]["version"] == "1.0.0"
    # A variable set at run time beats the baked option; a flag beats both.
    env["ZREAD_SIM_SCENARIO"] = release(tmp_path, "2.0.0")
    assert events_of(zread(script, "version", "--stdio", env=env))[-1]["vm"]["version"] == "2.0.0"
    flag = ["--scenario", release(tmp_path, "3.0.0")]
    by_flag = zread(script, "version", "--stdio", *flag, env=env)
    assert events_of(by_flag)[-1]["vm"]["version"] == "3.0.0"


def test_a_baked_scenario_and_speed_run_a_whole_flow(tmp_path: Path, bin_dir: Path) -> None:
    script = install(bin_dir, "--scenario", "up-to-date", "--speed", "0")
    done = zread(script, "update", "--stdio", env=sandbox(tmp_path))
    assert done.returncode == 0, done.stderr
    assert [e["vm"]["state"] for e in events_of(done)] == ["checking", "up_to_date"]


def test_a_relative_scenario_is_baked_as_the_file_it_named(
    tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("mine.toml").write_text('[world.release]\ncurrent_version = "5.6.7"\n')
    script = install(Path("bin"), "--scenario", "mine.toml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = zread(script, "version", "--stdio", env=sandbox(elsewhere))
    assert events_of(done)[-1]["vm"]["version"] == "5.6.7"


def test_generate_with_the_flags_a_sandboxed_job_passes(tmp_path: Path, bin_dir: Path) -> None:
    script = install(bin_dir, "--scenario", "empty", "--speed", "0")
    project = tmp_path / "project"
    project.mkdir()
    done = zread(
        script,
        "generate",
        "--draft",
        "clear",
        "--yes",
        "--stdio",
        env=sandbox(tmp_path),
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done)
    assert events[-1]["done"] is True and events[-1]["vm"]["state"] == "done"
    assert all(e["error"] == "" and e["vm"]["state"] != "error" for e in events)


# -- a desktop hub: found on PATH, the help probes -------------------------------------------


def test_the_help_probes_of_a_desktop_hub(tmp_path: Path, plain: Path) -> None:
    bin_dir = plain.parent
    env = sandbox(tmp_path, PATH=f"{bin_dir}{os.pathsep}{os.defpath}")
    found = shutil.which("zread", path=env["PATH"])
    assert found == str(bin_dir / "zread")
    version = zread(found, "version", "--stdio", env=env)
    json_lines = [json.loads(line) for line in version.stdout.splitlines() if line.startswith(b"{")]
    assert json_lines[-1]["vm"]["version"] == "0.2.13"
    expected = {
        "generate": [
            "Generate wiki documentation",
            "--stdio",
            "-y, --yes",
            "--draft",
            "--skip-failed",
        ],
        "login": ["Login flow", "--custom"],
        "update": ["Update Zread to the latest version"],
    }
    for command, texts in expected.items():
        done = zread(found, command, "--help", env=env)
        assert done.returncode == 0, (command, done.stderr)
        out = done.stdout.decode()
        assert out.startswith(texts[0]), (command, out)
        for text in texts:
            assert text in out, (command, text)


def test_the_program_help_lists_the_six_commands(tmp_path: Path, plain: Path) -> None:
    script = plain
    env = sandbox(tmp_path)
    outputs = []
    for argv in (["--help"], ["-h"], []):
        done = zread(script, *argv, env=env)
        assert done.returncode == 0 and done.stderr == b""
        outputs.append(done.stdout.decode())
    assert outputs[0] == outputs[1] == outputs[2]
    listed = outputs[0].split("Available Commands:\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in listed] == sorted([*COMMANDS, "help"])
    assert "scenarios" not in outputs[0] and "--scenario" not in outputs[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_exits_0(tmp_path: Path, plain: Path, command: str) -> None:
    done = zread(plain, command, "--help", env=sandbox(tmp_path))
    assert done.returncode == 0 and done.stderr == b""
    assert f"  zread {command} [flags]" in done.stdout.decode()


def test_browse_help_lists_its_flags(tmp_path: Path, plain: Path) -> None:
    out = zread(plain, "browse", "--help", env=sandbox(tmp_path)).stdout.decode()
    for flag in ("--host", "--port", "--version", "--generate", "--stdio"):
        assert flag in out


# -- the version, for people and Homebrew's formula test ---------------------------------


def test_version_and_dash_dash_version_print_the_version(tmp_path: Path, plain: Path) -> None:
    script = plain
    env = sandbox(tmp_path)
    done = zread(script, "version", env=env)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.decode() == f"zread version 0.2.13 {GO_OS}/{GO_ARCH}\n"
    flag = zread(script, "--version", env=env)
    assert (flag.returncode, flag.stdout) == (0, b"zread version 0.2.13\n")


def test_the_version_line_follows_the_baked_scenario(tmp_path: Path, bin_dir: Path) -> None:
    script = install(bin_dir, "--scenario", release(tmp_path, "9.8.7"))
    done = zread(script, "version", env=sandbox(tmp_path))
    assert done.stdout.startswith(b"zread version 9.8.7 ")


# -- usage errors name zread ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["scenarios"], 'zread: unknown command "scenarios" for "zread"'),
        (["install", "x"], 'zread: unknown command "install" for "zread"'),
        (["generate", "--stdio", "--bogus"], "zread: generate: unrecognized arguments: --bogus"),
        (["browse", "--stdio", "--host", "0.0.0.0"], "zread: browse: argument --host: refusing"),
        (["browse", "--stdio", "--port", "99999"], "zread: browse: argument --port: expected"),
        (["config"], "zread: the simulator stands in for zread's machine-readable mode only"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(
    tmp_path: Path, plain: Path, argv: list[str], says: str
) -> None:
    done = zread(plain, *argv, env=sandbox(tmp_path))
    assert done.returncode == 2
    assert done.stdout == b""
    assert one_line(done).startswith(says)


def test_zread_sim_keeps_its_own_commands(tmp_path: Path) -> None:
    sim = Path(sys.executable).parent / "zread-sim"
    done = zread(sim, "scenarios", env=sandbox(tmp_path))
    assert done.returncode == 0
    assert done.stdout.decode().splitlines()[0].startswith("default ")
    helped = zread(sim, "--help", env=sandbox(tmp_path)).stdout.decode()
    assert "Simulator Commands:" in helped and "--scenario" in helped


# -- standard streams the environment closed or filled -----------------------------------


def shell(script: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    """``script`` in /bin/sh, ``$PY`` being this interpreter's ``-m simulator``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    env["PY"] = f"{sys.executable} -m simulator"
    return subprocess.run(
        ["/bin/sh", "-c", script], capture_output=True, env=env, timeout=timeout, check=False
    )


def test_a_closed_stdin_is_no_input_at_all() -> None:
    done = shell("$PY generate --stdio -y --speed 0 --no-files <&-")
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["done"] is True and last["vm"]["state"] == "done"
    assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr


def test_a_closed_stdout_is_one_line_and_exit_2() -> None:
    done = shell("$PY version --stdio >&-")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "zread-sim: stdout is closed: there is nowhere to write the events"
    ]


def test_a_full_stdout_is_one_line_and_exit_2() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    done = shell("$PY version --stdio > /dev/full")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == ["zread-sim: No space left on device (stdout)"]


def test_a_delay_of_years_is_waited_for_not_a_crash() -> None:
    """``--speed 1e7`` makes the update check last years: the process waits, quietly,
    with its input open and after its end, until a SIGTERM quits it."""
    with Proc("update", speed="1e7", scenario=None) as proc:
        assert proc.read_event()["vm"]["state"] == "checking"
        proc.assert_waiting(0.5)
        proc.close_stdin()
        proc.assert_waiting(0.5)
        proc.terminate()
        proc.read_until_done()
        proc.finish()
        assert "internal error" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("source", ['printf \'{"type":"quit"}\\n\' |', "< quit.jsonl"])
def test_a_quit_waiting_on_stdin_holds_at_speed_0(tmp_path: Path, source: str) -> None:
    """At ``--speed 0`` every timer is due at once; what waits on stdin is read between
    firings, so a quit ends the run where it is, and the same way every time."""
    (tmp_path / "quit.jsonl").write_bytes(b'{"type":"quit"}\n')
    script = f"cd {tmp_path} && {source} $PY generate -y --stdio --speed 0 --no-files"
    runs = [shell(script) for _ in range(3)]
    for run in runs:
        assert run.returncode == 0, run.stderr
        last = json.loads(run.stdout.splitlines()[-1])
        assert last["done"] is True
        tasks = last["vm"]["pages"]["tasks"]
        assert not tasks or sum(task["status"] == "done" for task in tasks) < len(tasks)
    if source.startswith("<"):  # a file is all there from the start: one outcome
        assert runs[0].stdout == runs[1].stdout == runs[2].stdout


def test_a_script_that_waits_for_nothing_runs_whole_at_speed_0() -> None:
    done = shell("$PY generate -y --stdio --speed 0 --no-files < /dev/null")
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["done"] is True and last["vm"]["state"] == "done"


def test_eof_quit_ends_a_piped_run_with_its_whole_work_and_done(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    select = '{"type":"select_action","params":{"action":"generate"}}'
    done = shell(
        f"printf '{select}\\n' | $PY generate --stdio --eof quit --speed 0 --no-files "
        f"--journal {journal}"
    )
    assert done.returncode == 0 and done.stderr == b""
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["done"] is True and last["vm"]["state"] == "done"  # the whole run, not cut
    left = shell(f"ZREAD_SIM_EOF=quit $PY config --stdio --no-files --journal {journal} </dev/null")
    assert left.returncode == 0 and left.stderr == b""  # at its gate: quit, not a wait
    assert json.loads(left.stdout.splitlines()[-1])["done"] is True
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["how"] for r in records if r["kind"] == "exit"] == ["done", "eof-quit"]


def test_the_default_end_of_stdin_still_waits_and_names_the_option() -> None:
    with Proc("config", scenario=None) as proc:
        proc.read_event()
        proc.close_stdin()
        proc.wait_stderr("--eof quit makes the end of stdin a quit")
        proc.assert_waiting(0.3)
        proc.terminate()
        proc.read_until_done()
        proc.finish()


def test_a_bad_eof_is_one_line_and_exit_2() -> None:
    done = shell("ZREAD_SIM_EOF=never $PY version --stdio")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "zread-sim: ZREAD_SIM_EOF: expected wait or quit, got 'never'"
    ]
