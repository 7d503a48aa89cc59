"""The command line of the load test: ``zread-sim load COMMAND ...``, run by Locust.

Owns: :func:`main` (argv to an exit code: Locust's, 0 or 1 when a request failed; 2 for
a bad argument, one line on stderr; 128 + N after signal N, SIGTERM or SIGHUP, which
stops Locust first and removes the run's folder), the arguments (:func:`parse_args`,
checked here: the command, zread's flags, the scenario), :func:`locustfile` (the small
locustfile of one run: a :class:`~simulator.locust.ZreadUser` subclass built from the
options) and :func:`locust_argv` (the options mapped to Locust's own). The run itself is ``python -m
locust -f FILE ...`` in a child process, whose summary goes straight to the terminal,
followed by the memory figure (:func:`simulator.locust.print_memory_at_exit`).

Must not: import Locust (it monkey-patches the process it is imported in; only the
child runs it), measure, or drive sessions (:mod:`simulator.locust` does).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from simulator.launch import integer, number
from simulator.tools.arguments import raising
from simulator.tools.load.common import LoadError

PROG = "zread-sim load"

MAX_COUNT = 100_000_000
"""The most sessions (or processes) a load run takes: past any machine."""


SIDE_BY_SIDE = 10
"""In-process: the most sessions one Locust user runs at once. ``--sessions N`` is run
by N / k users of k sessions each, k the largest divisor of N up to this that leaves
:data:`USERS_AT_LEAST` users (or N, if fewer) and one a process: Locust's cost of a user
(a greenlet and its state, ~10 KB) is then paid once for k sessions, while a small run
keeps a user a session (its ramp starts each at its moment) and every process has one."""
USERS_AT_LEAST = 100
MAX_PORT = 65535
SESSIONS_OPTION = "--zread-sessions-per-user"
"""Locust's option of :mod:`simulator.locust` (not imported here: it imports Locust)."""
SIDE_BY_SIDE_OPTION = "--zread-side-by-side"
"""Another of its options: the sessions a user runs at once."""
STOP_GRACE = 10.0
"""Seconds Locust has to end after the SIGTERM passed on to it, before it is killed."""


def _int_from_1(top: int) -> Callable[[str], int]:
    """A parser of an integer from 1 to ``top``."""

    def parse(text: str) -> int:
        digits = text.strip().removeprefix("+")
        fits = digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) <= 9
        if not fits or not 1 <= int(digits) <= top:
            raise argparse.ArgumentTypeError(
                f"expected an integer from 1 to {top:,}, got {text[:40]!r}"
            )
        return int(digits)

    return parse


_positive_int = _int_from_1(MAX_COUNT)
_port = _int_from_1(MAX_PORT)


@dataclass
class LoadRun:
    """What one ``zread-sim load`` runs; see ``zread-sim load --help``."""

    command: str
    args: list[str] = field(default_factory=list)
    sessions: int | None = None
    ramp: float = 0.0
    duration: float | None = None
    scenario: str = "default"
    seed: int = 0
    speed: float = 1.0
    mode: str = "inprocess"
    timeout: float = 600.0
    processes: int | None = None
    master: bool = False
    worker: bool = False
    master_host: str | None = None
    master_port: int | None = None
    expect_workers: int | None = None
    csv: str | None = None
    html: str | None = None
    web: bool = False


def _parser() -> argparse.ArgumentParser:
    parser = raising(LoadError)(
        prog=PROG,
        description="Run many simulated zread sessions on Locust and measure them: each "
        "Locust user runs one session after another. zread's own flags go after -- (or "
        "among the options).",
    )
    parser.add_argument("command", help="the zread command (generate, login, ...)")
    parser.add_argument("--arg", action="append", default=[], metavar="FLAG", help="a zread flag")
    parser.add_argument(
        "--sessions",
        type=_positive_int,
        metavar="N",
        help="sessions at once (run by Locust users of up to 10 each, in-process)",
    )
    parser.add_argument(
        "--ramp",
        type=number(0, False),
        default=0.0,
        metavar="SECONDS",
        help="start the N sessions over SECONDS (their users at users/SECONDS a second; "
        "default: at once)",
    )
    parser.add_argument(
        "--duration",
        type=number(0, True),
        metavar="SECONDS",
        help="run this long, each user starting a new session when one ends "
        "(default: one session per user, then stop)",
    )
    parser.add_argument("--scenario", default="default", metavar="NAME|PATH")
    parser.add_argument("--seed", type=integer, default=0, help="the n-th session gets seed + n")
    parser.add_argument("--speed", type=number(0, False), default=1.0)
    parser.add_argument("--mode", choices=("inprocess", "process"), default="inprocess")
    parser.add_argument(
        "--timeout",
        type=number(0, True),
        default=600.0,
        metavar="SECONDS",
        help="a session without done:true by then fails (default: 600)",
    )
    parser.add_argument(
        "--processes", type=_positive_int, metavar="P", help="P local worker processes"
    )
    parser.add_argument("--master", action="store_true", help="be the master of remote workers")
    parser.add_argument("--worker", action="store_true", help="be a worker of --master-host")
    parser.add_argument("--master-host", metavar="HOST", help="the master's host (--worker)")
    parser.add_argument(
        "--master-port",
        type=_port,
        metavar="PORT",
        help="the master's port: it binds it (--master), a worker connects to it "
        "(--worker; default 5557)",
    )
    parser.add_argument(
        "--expect-workers", type=_positive_int, metavar="N", help="master: wait for N workers"
    )
    parser.add_argument("--csv", metavar="PREFIX", help="write Locust's CSV files PREFIX_*.csv")
    parser.add_argument("--html", metavar="FILE", help="write Locust's HTML report")
    parser.add_argument("--web", action="store_true", help="Locust's web UI instead of headless")
    return parser


def parse_args(argv: Sequence[str]) -> LoadRun:
    """The run ``argv`` asks for; LoadError says what is wrong with it."""
    from simulator.errors import ConfigurationError
    from simulator.launch import parse_flags
    from simulator.scenario import load_scenario

    argv = list(argv)
    zread_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, zread_args = argv[:cut], argv[cut + 1 :]
    # zread's own flags (-y, --skip-failed, ...) may stand among the load options.
    args, unknown = _parser().parse_known_args(argv)
    zread_args = [*args.arg, *unknown, *zread_args]
    try:
        parse_flags(args.command, zread_args)
    except ValueError as error:
        raise LoadError(f"{args.command}: {error}") from None
    _check_roles(args)
    if args.sessions and args.ramp > 0 and not math.isfinite(args.sessions / args.ramp):
        raise LoadError(f"--ramp {args.ramp:g}: too short to start sessions over")
    try:
        load_scenario(args.scenario)
    except ConfigurationError as error:
        raise LoadError(str(error)) from None
    for path in (args.html, args.csv):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise LoadError(f"{path}: no such directory")
    if args.html is not None and os.path.isdir(args.html):
        raise LoadError(f"--html {args.html}: is a directory (give the report's file)")
    scenario = os.path.abspath(args.scenario) if os.path.isfile(args.scenario) else args.scenario
    return LoadRun(
        command=args.command,
        args=zread_args,
        sessions=args.sessions,
        ramp=args.ramp,
        duration=args.duration,
        scenario=scenario,
        seed=args.seed,
        speed=args.speed,
        mode=args.mode,
        timeout=args.timeout,
        processes=args.processes,
        master=args.master,
        worker=args.worker,
        master_host=args.master_host,
        master_port=args.master_port,
        expect_workers=args.expect_workers,
        csv=args.csv,
        html=args.html,
        web=args.web,
    )


def _check_roles(args: argparse.Namespace) -> None:
    """The options that go together: a worker takes its sessions from the master."""
    if args.worker:
        if args.master or args.processes is not None:
            raise LoadError("--worker goes with neither --master nor --processes")
        if not args.master_host:
            raise LoadError("--worker needs --master-host HOST")
        return
    if args.master_host:
        raise LoadError("--master-host goes with --worker")
    if args.master_port is not None and not args.master:
        raise LoadError("--master-port goes with --master or --worker")
    if args.sessions is None:
        raise LoadError("give --sessions N (the sessions at once)")
    if args.master and args.processes is not None:
        raise LoadError("--master goes without --processes (its workers are started apart)")
    if args.expect_workers is not None and not args.master:
        raise LoadError("--expect-workers goes with --master")


def side_by_side(run: LoadRun) -> int:
    """The sessions each Locust user of ``run`` runs at once (see :data:`SIDE_BY_SIDE`);
    1 in process mode. A master passes it to its workers (:data:`SIDE_BY_SIDE_OPTION`)."""
    sessions = run.sessions
    if run.mode != "inprocess" or not sessions:
        return 1
    users = max(min(sessions, USERS_AT_LEAST), run.processes or 1)
    fits = [k for k in range(1, SIDE_BY_SIDE + 1) if sessions % k == 0 and sessions // k >= users]
    return max(fits, default=1)


def locustfile(run: LoadRun) -> str:
    """The locustfile of ``run``: one :class:`~simulator.locust.ZreadUser` subclass.
    It sets no ``sessions_per_user``: the master's :func:`locust_argv` decides it, for
    its workers too."""
    return (
        '"""zread-sim load: the user of this run."""\n\n'
        "from simulator.locust import ZreadUser, print_memory_at_exit\n\n\n"
        f"class Zread{run.command.capitalize()}(ZreadUser):\n"
        f"    command = {run.command!r}\n"
        f"    args = {tuple(run.args)!r}\n"
        f"    scenario = {run.scenario!r}\n"
        f"    first_seed = {run.seed!r}\n"
        f"    speed = {run.speed!r}\n"
        f"    mode = {run.mode!r}\n"
        f"    timeout = {run.timeout!r}\n\n\n"
        "print_memory_at_exit()\n"
    )


def locust_argv(run: LoadRun, path: str) -> list[str]:
    """``python -m locust`` with the options of ``run``; ``path`` is its locustfile."""
    argv = [sys.executable, "-m", "locust", "-f", path]
    port = [] if run.master_port is None else [str(run.master_port)]
    if run.worker:
        port = ["--master-port", *port] if port else []
        return [*argv, "--worker", "--master-host", str(run.master_host), *port]
    each = side_by_side(run)
    users = (run.sessions or 1) // each
    rate = users / run.ramp if run.ramp > 0 else users
    argv += ["--users", str(users), "--spawn-rate", repr(rate), SIDE_BY_SIDE_OPTION, str(each)]
    # Locust's UI and a --processes master's port are for this machine only: Locust
    # binds them on every interface, where anyone could start a swarm.
    argv += ["--autostart", "--web-host", "127.0.0.1"] if run.web else ["--headless"]
    if run.duration is not None:
        argv += ["--run-time", f"{max(1, round(run.duration))}s"]
    else:  # each user runs its sessions once, and the run ends with the last (workers too)
        argv += [SESSIONS_OPTION, str(each)]
    if run.processes is not None:
        argv += ["--processes", str(run.processes), "--master-bind-host", "127.0.0.1"]
    if run.master:
        argv += ["--master", "--expect-workers", str(run.expect_workers or 1)]
        argv += ["--master-bind-port", *port] if port else []
    if run.csv is not None:
        argv += ["--csv", run.csv]
    if run.html is not None:
        argv += ["--html", run.html]
    return argv


def _locust_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("locust") is not None


def main(argv: Sequence[str] | None = None) -> int:
    """``zread-sim load ...``; returns the exit code (2: a bad argument)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["load"]:
        argv = argv[1:]
    try:
        run = parse_args(argv)
        if not _locust_installed():
            raise LoadError("Locust is not installed: pip install 'zread-sim[load]'")
    except LoadError as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    except SystemExit as exit:  # --help
        return int(exit.code or 0)
    with tempfile.TemporaryDirectory(prefix="zread-load-") as folder:
        path = os.path.join(folder, "zread_locustfile.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(locustfile(run))
        sys.stdout.flush()
        return _run_locust(locust_argv(run, path))


class _Stopped(Exception):
    """SIGTERM or SIGHUP came: the run ends, Locust first."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def _run_locust(argv: list[str]) -> int:
    """Run Locust to its end; its exit code. On SIGTERM or SIGHUP, Locust gets SIGTERM
    (its own orderly stop), :data:`STOP_GRACE` seconds, then SIGKILL: 128 + the signal's
    number, as a shell reports a process the signal ended."""
    handled = (signal.SIGTERM, signal.SIGHUP)
    # Only the main thread may handle signals (a caller's thread runs without).
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, _stop) for signum in handled if main_thread}
    child: subprocess.Popen[bytes] | None = None
    try:
        child = subprocess.Popen(argv, preexec_fn=_die_with_parent)
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # the child had it too: it ends the run, then us
                continue
    except _Stopped as stopped:
        for signum in handled:
            signal.signal(signum, signal.SIG_IGN)  # a second one waits for the first
        if child is not None:
            child.terminate()
            try:
                child.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return 128 + stopped.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _die_with_parent() -> None:
    """In the child, on Linux: SIGTERM when this process dies (SIGKILL gives it no time
    to pass a signal on), so Locust never outlives the command."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)
