"""A ``zread`` served by a warm server behaves as one that is not: the same cases, both ways.

Each case runs twice, ``cold`` (no server: the process runs its command itself) and
``warm`` (``ZREAD_SIM_SERVER`` names a running ``zread-sim serve``), over real pipes,
with the ``zread`` script ``zread_bin`` writes. A warm case also checks that it was
served: the process holding the client's stdout is then a child of the server, not
the process the client started. Then what only a server has: the uid check, a stale
socket, the modes of the socket and its folder.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.hosts.executable import write_zread_executable
from simulator.launcher import VARIABLE
from simulator.tools.serve import ServerProcess

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="needs /proc to see the processes"
)
ROOT = Path(__file__).resolve().parents[2]
CAUGHT = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    started = ServerProcess()
    assert started.path, "the warm server did not start"
    yield started
    started.stop()


@pytest.fixture(params=["cold", "warm"])
def zread(
    request: pytest.FixtureRequest, server: ServerProcess, tmp_path: Path
) -> tuple[Path, dict[str, str], int | None]:
    """(the zread script, the environment to run it with, the server's pid or None)."""
    warm = request.param == "warm"
    folder = tmp_path / "bin"
    folder.mkdir()
    script = write_zread_executable(folder, {VARIABLE: server.path} if warm else {})
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    env |= {"HOME": str(tmp_path), "ZREAD_SIM_SPEED": "0"}
    return script, env, server.proc.pid if warm else None


def holders(pipe: int) -> set[int]:
    """The pids of the processes with ``pipe``'s other end (by inode) open on fd 1."""
    inode = os.fstat(pipe).st_ino
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "fd" / "1") == f"pipe:[{inode}]":
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def parent_of(pid: int) -> int:
    stat_line = Path(f"/proc/{pid}/stat").read_text()
    return int(stat_line.rsplit(")", 1)[1].split()[1])


def assert_served(proc: subprocess.Popen[bytes], server_pid: int | None) -> None:
    """The process writing the client's stdout is the server's child when warm, the
    process the client started when cold."""
    assert proc.stdout is not None
    deadline = time.monotonic() + 10
    while len(writers := holders(proc.stdout.fileno())) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # the launcher lets go of its streams once the server said ok
    (writer,) = writers
    if server_pid is None:
        assert writer == proc.pid
    else:
        assert writer != proc.pid and parent_of(writer) == server_pid


def spawn(script: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(script), *args],
        env=env,
        cwd=env["HOME"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, list[dict[str, object]], bytes]:
    if proc.stdin is not None and proc.stdin.closed:
        proc.stdin = None
    out, err = proc.communicate(timeout=30)
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


def first_event(proc: subprocess.Popen[bytes]) -> dict[str, object]:
    assert proc.stdout is not None
    return json.loads(proc.stdout.readline())  # type: ignore[no-any-return]


# -- the same cases, both ways -----------------------------------------------------------------


def test_exit_codes_and_output_are_the_processes(
    zread: tuple[Path, dict[str, str], int | None],
) -> None:
    script, env, _ = zread
    code, events, err = finish(spawn(script, env, "version", "--stdio"))
    assert (code, err, [e["done"] for e in events]) == (0, b"", [True])
    code, events, err = finish(spawn(script, env, "frobnicate"))
    assert (code, events) == (2, [])
    assert err.startswith(b'zread: unknown command "frobnicate"') and err.count(b"\n") == 1


def test_a_generate_writes_the_same_bytes(zread: tuple[Path, dict[str, str], int | None]) -> None:
    script, env, _ = zread
    argv = [str(script), "generate", "--stdio", "-y", "--no-files", "--seed", "7"]
    served = subprocess.run(argv, env=env, capture_output=True, timeout=30, check=True)
    alone = subprocess.run(
        [sys.executable, "-m", "simulator", *argv[1:]],
        env={k: v for k, v in env.items() if k != VARIABLE},
        cwd=ROOT,
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert served.stdout == alone.stdout and served.stdout.count(b"\n") > 3


def test_sigterm_mid_run_is_quit(zread: tuple[Path, dict[str, str], int | None]) -> None:
    script, env, server_pid = zread
    proc = spawn(script, env, "generate", "--stdio", "-y", "--speed", "1", "--no-files")
    assert first_event(proc)["done"] is False
    assert_served(proc, server_pid)
    proc.send_signal(signal.SIGTERM)
    code, events, err = finish(proc)
    assert code == 0 and b"Traceback" not in err
    assert events and events[-1]["done"] is True


def test_sigkill_of_the_launcher_kills_the_child(
    zread: tuple[Path, dict[str, str], int | None],
) -> None:
    script, env, server_pid = zread
    proc = spawn(script, env, "config", "--stdio")
    assert first_event(proc)["waiting_for"]
    assert_served(proc, server_pid)
    assert proc.stdout is not None
    proc.kill()
    assert proc.wait(10) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while holders(proc.stdout.fileno()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert holders(proc.stdout.fileno()) == set()  # no process is left writing it
    assert proc.stdout.read() == b""
    finish(proc)


def test_a_client_closing_its_reader_early(zread: tuple[Path, dict[str, str], int | None]) -> None:
    script, env, _ = zread
    scenario = Path(env["HOME"], "pages.toml")
    scenario.write_text("[world.project]\npages = 200\n")
    proc = spawn(
        script, env, "generate", "--stdio", "-y", "--no-files", "--scenario", str(scenario)
    )
    first_event(proc)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=30)
    assert (proc.returncode, b"Traceback" in err) == (0, False)


def test_a_stripped_environment_finds_the_baked_server(
    zread: tuple[Path, dict[str, str], int | None],
) -> None:
    script, env, server_pid = zread
    stripped = {"HOME": env["HOME"], "PATH": "/usr/bin:/bin", "LANG": "C"}
    proc = spawn(script, stripped, "config", "--stdio", "--no-files")
    assert first_event(proc)["done"] is False
    assert_served(proc, server_pid)
    assert proc.stdin is not None
    proc.stdin.write(b'{"type":"quit"}\n')
    code, events, _ = finish(proc)
    assert code == 0 and events[-1]["done"] is True


@pytest.mark.parametrize("umask", [0o077, 0o002])
def test_the_folders_it_makes_have_the_launchers_umask(
    zread: tuple[Path, dict[str, str], int | None], umask: int
) -> None:
    script, env, _ = zread
    project = Path(env["HOME"], "project")
    project.mkdir()
    done = subprocess.run(
        [str(script), "generate", "--stdio", "-y"],
        env=env,
        cwd=project,
        umask=umask,
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1])["done"] is True
    folders = [p for p in (project / ".zread").rglob("*") if p.is_dir()]  # made 0755
    assert folders and {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o755 & ~umask}


def test_stdin_at_its_end(zread: tuple[Path, dict[str, str], int | None]) -> None:
    script, env, server_pid = zread
    proc = spawn(script, env, "config", "--stdio", "--no-files")
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    first_event(proc)
    assert b"stdin is closed: nothing can answer" in proc.stderr.readline()
    assert_served(proc, server_pid)
    proc.send_signal(signal.SIGTERM)
    code, events, _ = finish(proc)
    assert code == 0 and events[-1]["done"] is True


def _caught(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # gone: nothing left to wait for
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return int(fields.get("SigCgt", "0"), 16) & CAUGHT == CAUGHT


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_at_the_launchers_first_instruction_is_quit(
    zread: tuple[Path, dict[str, str], int | None], signum: int
) -> None:
    script, env, _ = zread
    for _ in range(6):  # at the catch, then a few moments into the hand-over
        proc = spawn(script, env, "generate", "--stdio", "--no-files", "--speed", "1")
        while not _caught(proc.pid):
            time.sleep(0.0002)
        time.sleep(random.random() * 0.01)
        proc.send_signal(signum)
        code, events, err = finish(proc)
        assert (code, b"Traceback" in err) == (0, False), err
        assert events and events[-1]["done"] is True
        assert [e["done"] for e in events].count(True) == 1


# -- what only a server has --------------------------------------------------------------------


def test_the_socket_is_0600_in_a_private_0700_folder(server: ServerProcess) -> None:
    path = Path(server.path)
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.parent.stat().st_uid == os.getuid()


def test_a_stale_socket_runs_the_command_without_a_server(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening: as a killed server leaves it
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "version", "--stdio"],
        env=env | {VARIABLE: str(path)},
        cwd=ROOT,
        capture_output=True,
        timeout=30,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert json.loads(done.stdout)["done"] is True


def test_a_server_stopped_removes_its_socket_and_folder() -> None:
    started = ServerProcess()
    folder = Path(started.path).parent
    assert folder.is_dir()
    started.stop()
    assert started.proc.returncode == 0
    assert not folder.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to launch as another uid")
def test_a_launcher_of_another_uid_is_refused_and_runs_the_command_itself() -> None:
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="zread-sim-uid-"))  # not under pytest's 0700 folder
    path = folder / "zread.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    serve = subprocess.Popen(
        [sys.executable, "-m", "simulator", "serve", "--socket", str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert serve.stdout is not None
        assert serve.stdout.readline().decode().strip() == f"{VARIABLE}={path}"
        # Let the other uid reach the socket, so that the server itself is what refuses.
        folder.chmod(0o711)
        path.chmod(0o666)
        said = _launch_as_nobody(str(path))
        assert said.startswith(b"None\n")  # refused: the launcher runs it itself...
        assert json.loads(said.split(b"\n", 1)[1])["done"] is True  # ...and it runs
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)
    assert b"refused a launcher of uid 65534" in err
    assert serve.returncode == 0


def _launch_as_nobody(path: str) -> bytes:
    """In a forked child that became uid 65534: what the launcher said (its result,
    then the output of the command it then runs itself, as the program does)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  # the child
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            sys.argv = ["zread", "version", "--stdio"]
            from simulator import launcher
            from simulator.cli import main

            # Past the launcher's own check (it would not connect to root's socket), so
            # that the server's check is the one tried: a peer need not be a launcher.
            launcher._mine = lambda path: True  # type: ignore[assignment]
            os.write(write_end, f"{launcher.hand_over(path)!r}\n".encode())
            with open(os.devnull, "rb") as stdin, os.fdopen(write_end, "wb") as out:
                main(["version", "--stdio"], stdin=stdin, stdout=out, prog="zread")
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as said:
        output = said.read()
    os.waitpid(pid, 0)
    return output


def test_a_stopped_server_holds_none_of_the_clients_streams() -> None:
    started = ServerProcess()
    code = (
        "import sys\n"
        "from simulator import launcher\n"
        "launcher.HANDOVER_TIMEOUT = 0.5\n"
        "from simulator.__main__ import main\n"
        "sys.argv = ['zread', 'version', '--stdio']\n"
        "sys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    os.kill(started.proc.pid, signal.SIGSTOP)  # wedged: it accepts nothing, reads nothing
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env | {VARIABLE: started.path},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # The launcher gives up and runs the command itself; its stdout ends with it (no
        # copy of it waits in the stopped server's queue).
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, err) == (0, b"")
        assert json.loads(out)["done"] is True
    finally:
        os.kill(started.proc.pid, signal.SIGCONT)
        started.stop()


def test_a_quit_while_the_launcher_waits_on_a_stopped_server_is_a_quit() -> None:
    started = ServerProcess()
    code = (
        "import sys\n"
        "from simulator import launcher\n"
        "launcher.HANDOVER_TIMEOUT = 4.0\n"  # longer than a start-up's grace of 3 s
        "from simulator.__main__ import main\n"
        "sys.argv = ['zread', 'config', '--stdio', '--no-files']\n"
        "sys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
    os.kill(started.proc.pid, signal.SIGSTOP)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env | {VARIABLE: started.path},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)  # waiting for the server's go, which never comes
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        # it waited its wait out, ran the command itself and quit: never killed meanwhile
        assert proc.returncode == 0
        assert json.loads(out.splitlines()[-1])["done"] is True
    finally:
        os.kill(started.proc.pid, signal.SIGCONT)
        started.stop()
