"""A ``zread`` installed with ``--warm``: the per-user warm server it finds, or starts.

Owns: what the program does when ``ZREAD_SIM_WARM`` is set (``zread-sim install
--warm`` bakes it, the idle seconds; ``ZREAD_SIM_SERVER`` set, even empty, wins over
it): :func:`hand_over_warm`. Where the server lives (:func:`user_folder`,
:func:`server_key`), and how the first launch starts it (:func:`start_server`).

- **The folder**: ``$XDG_RUNTIME_DIR/zread-sim`` when ``XDG_RUNTIME_DIR`` is an
  absolute path to a folder of this uid's that grants nothing to group or others (what
  systemd-logind makes, ``/run/user/UID``); else ``/tmp/zread-sim-UID``. Made 0700 when
  missing; used only when it is a folder (not a link: ``lstat``), this uid's, and
  grants nothing to group or others. Anything else there, and each launch runs by
  itself, as without ``--warm``.
- **The server**: one per interpreter and package folder (a venv's install, a
  checkout), so two venvs never serve each other's code: ``KEY.sock`` and
  ``KEY.lock`` in the folder, ``KEY`` a 64-bit FNV-1a hash of the interpreter's path
  and the package's folder. It is ``zread-sim serve --socket KEY.sock --idle N
  --until-changed`` of that interpreter and package: the socket 0600, every launch's
  uid checked (``SO_PEERCRED``), gone after N idle seconds or once the package's files
  change (:mod:`simulator.warmwatch`).
- **A launch**: hands its run to the server (:func:`simulator.launcher.hand_over`,
  which checks the socket and the folder are this uid's first). When that fails (no
  socket, a stale one, a server that refused it), it takes ``KEY.lock`` with
  ``flock(LOCK_EX | LOCK_NB)``: the server holds that lock for its whole life, on a
  descriptor it inherited from the launch that started it, so a lock taken means no
  server lives (a socket left there is stale, and the new server replaces it), and a
  lock held means one lives or is warming up. Taken, it starts the server
  (:func:`start_server`); either way it then runs the command itself, cold: the
  first launch's run is a cold run, byte for byte, and two first launches at once
  start one server. The kernel drops the lock when the server ends, however it ends.
- **Detached**: the server is forked twice (the middle process calls ``setsid`` and
  exits at once, so the server is nobody's child and has no terminal), in ``/``, its
  standard streams on /dev/null, no descriptor of the launch's but the lock's, the
  signals at their defaults and none blocked, and the environment without any
  ``ZREAD_SIM_*`` variable. So a client that reads the launch's stdout to its end sees
  the end when the launch's own run closes it. The launch waits only for the middle
  process (a fork and an exit).

Must not: import anything but ``os``, ``sys`` and :mod:`simulator.launcher` until it
starts a server (then ``fcntl``), write to a standard stream, or wait for the server.
"""

import os
import sys

from simulator import launcher

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

VARIABLE = "ZREAD_SIM_WARM"
"""Set by a ``zread`` that ``zread-sim install --warm`` wrote: the idle seconds of the
server it starts; unset, empty or ``0``: no warm server."""
DEFAULT_IDLE = 60.0
FOLDER = "zread-sim"
MAX_SOCKET_PATH = 107
"""The longest socket path Linux binds (``sun_path`` is 108 bytes, the last a NUL)."""
SERVER_CODE = (
    "import sys; sys.path[0] = sys.argv.pop(1); from simulator.servecommand import main; "
    "sys.exit(main(sys.argv[1:]))"
)
"""What the server's interpreter runs (``-c``): the package's folder first on its
path, as in the ``zread`` script, then ``zread-sim serve`` with the arguments after."""


def hand_over_warm(setting: str) -> int | None:
    """Run this command in the per-user warm server (started first, when none runs):
    its exit code; None when this process runs it itself (``setting``, the idle
    seconds, is not a number above 0, the folder is not safe, no server serves it)."""
    idle = _idle(setting)
    if idle is None or sys.argv[1:2] == ["serve"]:
        return None
    folder = user_folder(os.environ)
    if folder is None:
        return None
    key = server_key(sys.executable, _package_root())
    path = os.path.join(folder, key + ".sock")
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return None
    code = launcher.hand_over(path)
    if code is None:
        start_server(folder, key, idle)
    return code


def _idle(setting: str) -> float | None:
    try:
        idle = float(setting)
    except ValueError:
        return None
    return idle if 0 < idle < float("inf") else None


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_folder(
    environ: "Mapping[str, str]", uid: int | None = None, tmp: str = "/tmp"
) -> str | None:
    """The folder of this user's warm servers (see the module docstring), made when
    missing; None when what is there is not safe to use."""
    uid = os.getuid() if uid is None else uid
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/") and _private(runtime, uid, follow=True):
        folder = os.path.join(runtime, FOLDER)
    else:
        folder = os.path.join(tmp, f"{FOLDER}-{uid}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    return folder if _private(folder, uid, follow=False) else None


def _private(path: str, uid: int, *, follow: bool) -> bool:
    """Whether ``path`` is a folder of ``uid``'s that grants nothing to group or others
    (a link to one counts only when ``follow``)."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return False
    is_folder = info.st_mode & 0o170000 == 0o040000  # S_ISDIR, without the stat module
    return is_folder and info.st_uid == uid and not info.st_mode & 0o077


def server_key(interpreter: str, root: str) -> str:
    """The name of the server of ``interpreter`` running the package in ``root``: 16
    hex digits of a 64-bit FNV-1a hash."""
    value = 0xCBF29CE484222325
    for byte in os.fsencode(interpreter) + b"\0" + os.fsencode(root):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def server_argv(interpreter: str, root: str, path: str, idle: float) -> list[str]:
    """The server's command line: ``zread-sim serve`` of ``interpreter`` and the package
    in ``root``, at ``path``, ending after ``idle`` seconds or once the package changes."""
    return [
        interpreter,
        "-c",
        SERVER_CODE,
        root,
        "--socket",
        path,
        "--idle",
        repr(idle),
        "--until-changed",
    ]


def start_server(folder: str, key: str, idle: float) -> bool:
    """Start the server ``key`` in ``folder``, detached, unless one lives or starts
    (its lock held); whether this launch started it. Never waits for it."""
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        lock = os.open(os.path.join(folder, key + ".lock"), flags, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: a server lives, or warms up
        os.close(lock)
        return False
    path = os.path.join(folder, key + ".sock")
    argv = server_argv(sys.executable, _package_root(), path, idle)
    env = {name: value for name, value in os.environ.items() if not name.startswith("ZREAD_SIM_")}
    try:
        return _detach(lock, argv, env)
    finally:
        os.close(lock)  # the server's copy holds the lock from now on


def _detach(lock: int, argv: list[str], env: dict[str, str]) -> bool:
    """Fork twice and run ``argv`` in the grandchild (see the module docstring);
    whether the middle process forked it."""
    try:
        middle = os.fork()
    except OSError:
        return False
    if middle == 0:  # never returns into the launch
        code = 1
        try:
            os.setsid()
            if os.fork() == 0:
                _become_server(lock, argv, env)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(middle, 0)
    return status == 0


def _become_server(lock: int, argv: list[str], env: dict[str, str]) -> None:
    """In the grandchild: drop everything of the launch's but the lock, run ``argv``."""
    try:
        import _signal  # type: ignore[import-not-found]  # no stub; loaded already

        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.set_inheritable(lock, True)
        os.closerange(3, lock)
        os.closerange(lock + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir("/")
        os.umask(0o077)
        for name in (
            "SIGTERM",
            "SIGINT",
            "SIGHUP",
            "SIGQUIT",
            "SIGUSR1",
            "SIGUSR2",
            "SIGPIPE",
            "SIGXFSZ",
        ):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
        os.execve(argv[0], argv, env)
    finally:
        os._exit(127)
