"""Tests for simulator.launcher: the wire format, and when a launcher runs its command
itself (no variable, no socket, nobody listening, the ``serve`` command)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator import launcher

ROOT = Path(__file__).resolve().parents[1]


def test_a_request_round_trips_every_byte() -> None:
    argv = [b"zread", b"generate", b"--stdio", b"\xff not utf-8", b""]
    env = [b"HOME=/h", b"EMPTY=", b"WITH=EQUALS=SIGN"]
    data = launcher.encode_request(0o027, argv, env)
    assert launcher.request_size(data[:7]) == len(data)
    umask, decoded, environ = launcher.decode_request(data)
    assert (umask, decoded) == (0o027, argv)
    assert environ == {b"HOME": b"/h", b"EMPTY": b"", b"WITH": b"EQUALS=SIGN"}


def _request(body: bytes) -> bytes:
    return launcher.MAGIC + len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize(
    "data",
    [b"", b"XYZ\0\0\0\1\0", b"ZS3\0\0\0\2a\0", b"ZS2\0\0\0\x05/\x0022\x001\x00z\x00"],
)
def test_what_is_not_a_whole_request_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="launcher's request"):
        launcher.decode_request(data)


@pytest.mark.parametrize("umask", [b"", b"9", b"-1", b"07777"])
def test_a_request_without_a_umask_is_refused(umask: bytes) -> None:
    with pytest.raises(ValueError, match="without its umask"):
        launcher.decode_request(_request(umask + b"\x001\x00zread\x00"))


def test_a_request_without_its_arguments_is_refused() -> None:
    with pytest.raises(ValueError, match="without its arguments"):
        launcher.decode_request(_request(b"22\x000\x00"))


def _hand_over(path: str, *argv: str) -> str:
    """What hand_over returns, in a fresh interpreter with that argv."""
    code = (
        "import sys; from simulator import launcher; "
        f"sys.argv = {['zread', *argv]!r}; print(launcher.hand_over({path!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.stderr == ""
    return done.stdout.strip()


def test_no_server_means_the_command_runs_here(tmp_path: Path) -> None:
    assert _hand_over("", "version") == "None"
    assert _hand_over(str(tmp_path / "missing.sock"), "version") == "None"
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(stale))
    assert _hand_over(str(stale), "version") == "None"
    assert _hand_over(str(tmp_path), "version") == "None"  # not a socket at all


def test_the_serve_command_is_never_handed_over(tmp_path: Path) -> None:
    path = tmp_path / "live.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(path))
        live.listen()
        assert _hand_over(str(path), "serve") == "None"


def test_the_launched_pid_is_this_process_unless_set() -> None:
    code = (
        "import os; from simulator import launcher; "
        "a = launcher.launched_pid() == os.getpid(); launcher.set_launched_pid(4242); "
        "print(a, launcher.launched_pid())"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.split() == ["True", "4242"]


def test_the_launcher_imports_nothing_heavy() -> None:
    code = (
        "import sys; before = set(sys.modules); import simulator.launcher; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    added = set(done.stdout.split())
    assert "simulator.launcher" in added
    heavy = {"socket", "_socket", "struct", "json", "enum", "selectors", "typing", "re", "signal"}
    assert added & heavy == set()


def test_only_a_socket_of_this_user_in_a_folder_closed_to_others_is_tried(
    tmp_path: Path,
) -> None:
    path = tmp_path / "zread.sock"
    with socket.socket(socket.AF_UNIX) as ours:
        ours.bind(str(path))
        assert launcher._mine(str(path))
        tmp_path.chmod(0o770)  # others of the group could put their own socket here
        assert not launcher._mine(str(path))
        tmp_path.chmod(0o700)
    (tmp_path / "file").write_text("")
    assert not launcher._mine(str(tmp_path / "file"))
    assert not launcher._mine(str(tmp_path / "missing.sock"))
    assert not launcher._mine("\0")


@pytest.mark.skipif(not hasattr(os, "setuid") or os.getuid() != 0, reason="needs root to setuid")
def test_a_listener_of_another_user_is_skipped_without_a_connect() -> None:
    import shutil
    import tempfile

    folder = tempfile.mkdtemp()  # a shared place another user can reach, as /tmp is
    os.chmod(folder, 0o1777)
    try:
        _planted_listener_gets_nothing(os.path.join(folder, "planted.sock"))
    finally:
        shutil.rmtree(folder)


def _planted_listener_gets_nothing(path: str) -> None:
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the planted listener, as uid 65534: its backlog full, it never accepts
        try:
            os.setuid(65534)
            server = socket.socket(socket.AF_UNIX)
            server.bind(path)
            server.listen(0)
            filler = socket.socket(socket.AF_UNIX)
            filler.connect(path)  # the one place in the backlog: the next connect waits
            os.write(ready_w, b"!")
            os.read(done_r, 1)
            server.setblocking(False)
            server.accept()  # the filler's
            try:
                server.accept()
            except BlockingIOError:
                os._exit(0)  # nobody else knocked
            os._exit(1)
        finally:
            os._exit(2)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"!"
    started = time.monotonic()
    assert launcher.hand_over(path) is None  # not tried: the command runs here
    assert time.monotonic() - started < launcher.HANDOVER_TIMEOUT / 2  # no wait on a connect
    os.write(done_w, b"!")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # it got no connection, no request, no fd


def test_a_reply_longer_than_a_servers_is_not_waited_on(tmp_path: Path) -> None:
    path = str(tmp_path / "long.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()

    closed: list[bool] = []

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"go\n")
            conn.recv(1 << 20)
            conn.sendall(b"x" * (launcher.MAX_REPLY * 4))  # no newline, and more to come
            try:  # held open until the launcher gives up and closes its end
                closed.append(conn.recv(1) == b"")
            except ConnectionResetError:  # closed with our bytes unread
                closed.append(True)

    import threading

    thread = threading.Thread(target=answer)
    thread.start()
    assert launcher.hand_over(path) is None
    thread.join(10)
    server.close()
    assert closed == [True]


def test_a_server_that_never_answers_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "HANDOVER_TIMEOUT", 0.3)
    path = str(tmp_path / "silent.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        assert launcher.hand_over(path) is None  # accepted by the backlog, never answered
        conn, _ = server.accept()
        with conn:
            # It sent nothing (a stopped server holds none of the client's streams)...
            data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(64))
            assert (data, ancillary) == (b"", [])


def test_a_server_that_says_go_and_then_nothing_is_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "HANDOVER_TIMEOUT", 0.3)
    path = str(tmp_path / "silent.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        import threading

        got: list[bytes] = []

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"go\n")
                got.append(conn.recv(1 << 20))
                got.append(conn.recv(1))  # the launcher closed: a child started would die

        thread = threading.Thread(target=answer)
        thread.start()
        assert launcher.hand_over(path) is None
        thread.join(10)
        assert got[0].startswith(launcher.MAGIC) and got[1] == b""


def test_a_full_backlog_is_waited_on_then_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "HANDOVER_TIMEOUT", 0.5)
    path = str(tmp_path / "full.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(0)
        held = []
        try:
            for _ in range(3):  # fill the backlog: the next connect would wait
                peer = socket.socket(socket.AF_UNIX)
                peer.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    peer.connect(path)
                held.append(peer)
            began = time.monotonic()
            assert launcher.hand_over(path) is None
            assert time.monotonic() - began >= 0.4  # it waited, not refused at once
        finally:
            for peer in held:
                peer.close()
