"""Tests for simulator.warmlaunch: a ``zread`` installed with ``--warm``, with real
processes, a real per-user folder (``XDG_RUNTIME_DIR`` pointed at a private folder of
the test's) and the real server it starts: the first launch runs cold and starts it,
the next are served, it ends by itself when idle and when its package changes, two
first launches start one, a stale socket is replaced, a killed server means a cold
run, another uid is refused. Every test ends with no server of its own left running."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simulator import launcher
from simulator.warmlaunch import (
    FOLDER,
    MAX_SOCKET_PATH,
    hand_over_warm,
    server_argv,
    server_key,
    user_folder,
)

ROOT = Path(__file__).resolve().parents[1]
MARK = "zwarm-"
"""The prefix of each test's runtime folder: a server of this module's names it."""
MADE: list[Path] = []
"""The runtime folders this process's tests made (tests of other workers run beside)."""
WAIT = 60.0
"""The longest wait for a server to come up or to go (a loaded machine)."""


# -- helpers ----------------------------------------------------------------------------------


def _servers(where: str) -> list[int]:
    """The live (not zombie) server processes whose command line names ``where`` (not
    their children, forked with the same command line)."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state, parent = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if b"servecommand" in cmdline and where.encode() in cmdline and state != "Z":
            found[int(entry)] = int(parent)
    return sorted(pid for pid, parent in found.items() if parent not in found)


def _until(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.01)


def _reachable(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _runtime() -> Path:
    """A private runtime folder (short: a socket path has 107 bytes at most)."""
    made = Path(tempfile.mkdtemp(prefix=MARK, dir="/tmp"))
    MADE.append(made)
    return made


class Place:
    """A test's per-user folder (``XDG_RUNTIME_DIR``) and a ``zread`` installed --warm."""

    def __init__(self, runtime: Path, package: Path = ROOT) -> None:
        self.runtime = runtime
        self.package = package
        self.folder = runtime / FOLDER
        key = server_key(sys.executable, str(package))
        self.socket = self.folder / f"{key}.sock"
        self.lock = self.folder / f"{key}.lock"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ZREAD_SIM_")}
        self.env["XDG_RUNTIME_DIR"] = str(runtime)
        self.zread = runtime / "bin" / "zread"

    def install(self, idle: float) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "simulator", "install", str(self.zread.parent), "--warm"]
            + ["--warm-idle", str(idle)],
            cwd=self.package,  # -m finds the package there
            env=self.env,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr

    def run(self, *extra: str, env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
        """``zread version --stdio``, stdout read to its end (as a client reads it)."""
        done = subprocess.run(
            [str(self.zread), "version", "--stdio", *extra],
            cwd=self.runtime,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
        return done.returncode, done.stdout, done.stderr

    def served(self) -> bool:
        """Whether a launch now is served (the launcher's own answer, through a pipe)."""
        read_end, write_end = os.pipe()
        code = (
            "import os, sys\n"
            "sys.argv = ['zread', 'version', '--stdio']\n"
            "from simulator.warmlaunch import hand_over_warm\n"
            f"os.write({write_end}, repr(hand_over_warm(os.environ['ZREAD_SIM_WARM'])).encode())\n"
        )
        with subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=self.package,
            env=self.env | {"ZREAD_SIM_WARM": "5"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(write_end,),
        ) as proc:
            os.close(write_end)
            with os.fdopen(read_end, "rb") as said:
                answer = said.read()
            proc.wait(60)
        return answer == b"0"

    def servers(self) -> list[int]:
        return _servers(str(self.runtime))

    def up(self) -> int:
        """The one server, once it listens: its pid."""
        _until(lambda: _reachable(self.socket) and self.servers(), "the server listening")
        (pid,) = self.servers()
        return pid


@pytest.fixture
def place() -> Iterator[Place]:
    """A private runtime folder; at the end, no server of its own may be left running
    (each ends once idle)."""
    runtime = _runtime()
    made = Place(runtime)
    try:
        yield made
    finally:
        deadline = time.monotonic() + WAIT
        while made.servers() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = made.servers()
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(runtime, ignore_errors=True)
        assert not left, f"servers left running after their idle time: {left}"


@pytest.fixture(scope="module", autouse=True)
def nothing_left_running() -> Iterator[None]:
    """After the module: no server of any of its tests (in this process) is running."""
    yield
    assert not [pid for runtime in MADE for pid in _servers(str(runtime))]


def _cold(place: Place) -> tuple[int, bytes, bytes]:
    """The same command run cold: ``ZREAD_SIM_SERVER`` set and empty wins over --warm."""
    return place.run(env=place.env | {launcher.VARIABLE: ""})


# -- the folder, the key ----------------------------------------------------------------------


def test_the_folder_is_under_a_private_runtime_dir(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    folder = user_folder({"XDG_RUNTIME_DIR": str(runtime)}, tmp=str(tmp_path))
    assert folder == str(runtime / FOLDER)
    assert (runtime / FOLDER).stat().st_mode & 0o777 == 0o700
    assert user_folder({"XDG_RUNTIME_DIR": str(runtime)}, tmp=str(tmp_path)) == folder  # again


@pytest.mark.parametrize("how", ["unset", "relative", "open", "missing"])
def test_without_a_private_runtime_dir_the_folder_is_under_tmp_named_by_uid(
    tmp_path: Path, how: str
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o755 if how == "open" else 0o700)
    runtime.chmod(0o755 if how == "open" else 0o700)
    environ = {
        "unset": {},
        "relative": {"XDG_RUNTIME_DIR": "run"},
        "open": {"XDG_RUNTIME_DIR": str(runtime)},
        "missing": {"XDG_RUNTIME_DIR": str(tmp_path / "nowhere")},
    }[how]
    folder = user_folder(environ, tmp=str(tmp_path))
    assert folder == str(tmp_path / f"{FOLDER}-{os.getuid()}")
    assert Path(folder).stat().st_mode & 0o777 == 0o700


def test_a_folder_that_is_a_link_open_to_others_or_another_users_is_not_used(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    mine = tmp_path / f"{FOLDER}-{os.getuid()}"
    mine.symlink_to(target)
    assert user_folder({}, tmp=str(tmp_path)) is None  # a link: someone else's doing
    mine.unlink()
    mine.mkdir(mode=0o700)
    mine.chmod(0o770)
    assert user_folder({}, tmp=str(tmp_path)) is None
    mine.chmod(0o700)
    assert user_folder({}, tmp=str(tmp_path)) == str(mine)
    # Seen as uid 65534: this runtime folder and the one under tmp are another's (root's).
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    other = 65534 if os.getuid() != 65534 else 0
    (tmp_path / f"{FOLDER}-{other}").mkdir(mode=0o700)
    assert user_folder({"XDG_RUNTIME_DIR": str(runtime)}, uid=other, tmp=str(tmp_path)) is None


def test_the_key_names_one_interpreter_and_one_package_folder() -> None:
    key = server_key("/v/bin/python", "/v/lib/site-packages")
    assert len(key) == 16 and int(key, 16) >= 0
    assert key == server_key("/v/bin/python", "/v/lib/site-packages")
    assert key != server_key("/w/bin/python", "/v/lib/site-packages")
    assert key != server_key("/v/bin/python", "/w/lib/site-packages")


def test_the_server_is_serve_of_the_same_interpreter_with_its_own_ends() -> None:
    argv = server_argv("/v/bin/python", "/root", "/run/k.sock", 60.0)
    assert argv[0] == "/v/bin/python" and argv[3] == "/root"
    assert argv[4:] == ["--socket", "/run/k.sock", "--idle", "60.0", "--until-changed"]


@pytest.mark.parametrize("setting", ["0", "-1", "nan", "inf", "soon"])
def test_a_setting_that_is_no_idle_time_is_a_cold_run_and_starts_nothing(
    place: Place, setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(place.runtime))
    assert hand_over_warm(setting) is None
    assert not place.folder.exists() and not place.servers()


def test_a_socket_path_too_long_to_bind_is_a_cold_run_and_starts_nothing(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = place.runtime / ("d" * (MAX_SOCKET_PATH - len(str(place.runtime))))
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    assert hand_over_warm("5") is None
    assert not (deep / FOLDER / place.lock.name).exists() and not place.servers()


# -- the server it starts ---------------------------------------------------------------------


def test_the_first_launch_runs_cold_and_the_next_are_served_until_idle(place: Place) -> None:
    place.install(idle=1)
    cold = _cold(place)
    assert not place.folder.exists()  # a cold run starts nothing
    first = place.run()  # read to its end: the server it starts holds none of its pipes
    assert first == cold and first[0] == 0 and json.loads(first[1])["done"] is True
    assert place.folder.stat().st_mode & 0o777 == 0o700
    pid = place.up()
    assert place.socket.stat().st_mode & 0o777 == 0o600
    fds = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1, 2)}
    assert fds == {os.devnull}
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(fields[3]) != os.getsid(0) and fields[4] == "0"  # its own session, no terminal
    assert place.served()
    assert place.run() == cold  # served: the same bytes, the same code
    _until(lambda: not place.servers(), "the server ending once idle")
    assert not place.socket.exists()  # it removed its socket


def test_two_first_launches_at_once_start_one_server(place: Place) -> None:
    place.install(idle=2)
    launches = [
        subprocess.Popen(
            [str(place.zread), "version", "--stdio"],
            cwd=place.runtime,
            env=place.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    seen: set[int] = set()
    for proc in launches:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and json.loads(out)["done"] is True
        seen.update(place.servers())
    deadline = time.monotonic() + WAIT
    while not _reachable(place.socket) and time.monotonic() < deadline:
        seen.update(place.servers())
        time.sleep(0.01)
    for _ in range(50):  # a second one, had it started, would still be warming up
        seen.update(place.servers())
        time.sleep(0.01)
    assert len(seen) == 1


def test_a_launch_that_finds_the_lock_held_runs_cold_and_starts_nothing(place: Place) -> None:
    place.install(idle=1)
    place.folder.mkdir(mode=0o700)
    with open(place.lock, "w") as held:  # as a server warming up holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        code, out, _ = place.run()
        assert code == 0 and json.loads(out)["done"] is True
        time.sleep(0.5)
        assert not place.servers() and not place.socket.exists()


def test_a_stale_socket_is_replaced(place: Place) -> None:
    place.install(idle=2)
    place.folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(place.socket))  # bound, never listening, then closed: a dead server's
    stale.close()
    assert place.socket.exists() and not _reachable(place.socket)
    assert place.run() == _cold(place)
    place.up()  # reachable now: the server bound a socket of its own at the name
    assert place.served()


def test_a_killed_server_means_a_cold_run_and_a_new_server(place: Place) -> None:
    place.install(idle=2)
    place.run()
    pid = place.up()
    os.kill(pid, signal.SIGKILL)
    _until(lambda: not place.servers(), "the killed server gone")
    assert place.socket.exists()  # left behind: stale
    assert place.run() == _cold(place)  # cold, as any launch without a server
    assert place.up() != pid  # and it started another
    assert place.served()


def test_the_server_ends_when_its_package_changes(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for name in ("simulator", "statecharts"):
        shutil.copytree(ROOT / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
    runtime = _runtime()
    place = Place(runtime, package)
    try:
        place.install(idle=2)
        place.run()
        pid = place.up()
        assert place.served()
        module = package / "simulator" / "cli" / "program.py"
        info = module.stat()
        os.utime(module, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))  # an edit
        assert not place.served()  # not one launch more on what the package was
        _until(lambda: pid not in place.servers(), "the server ending once its package changed")
        assert place.run() == _cold(place)
    finally:
        _until(lambda: not place.servers(), "every server ending once idle")
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to launch as another uid")
def test_a_launcher_of_another_uid_is_refused(place: Place) -> None:
    place.install(idle=3)
    place.run()
    place.up()
    # Let the other uid reach the socket, so that the server itself is what refuses.
    place.runtime.chmod(0o711)
    place.folder.chmod(0o711)
    place.socket.chmod(0o666)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  # the child, as uid 65534
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            sys.argv = ["zread", "version", "--stdio"]
            said = [launcher._mine(str(place.socket))]  # its own check: not its socket
            launcher._mine = lambda path: True  # type: ignore[assignment]
            said.append(launcher.hand_over(str(place.socket)) is None)  # the server's check
            os.write(write_end, repr(said).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as said:
        answer = said.read()
    os.waitpid(pid, 0)
    assert answer == b"[False, True]"  # refused by both: the command runs by itself
    place.runtime.chmod(0o700)
    place.folder.chmod(0o700)
    assert place.served()  # and the server serves its own user on
