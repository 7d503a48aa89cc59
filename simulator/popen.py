"""This process's own launches of ``zread``, served in-process (``zread_popen``).

Owns: :class:`Launches`, which, while installed, serves every launch of ``zread`` that
this process's code makes through ``subprocess.Popen`` (hence ``run``, ``call``,
``check_call``, ``check_output``) or an asyncio loop's ``subprocess_exec`` (hence
``asyncio.create_subprocess_exec``) with a :class:`~simulator.served.
ServedCall` instead of a process; :class:`ServedPopen`, the ``Popen`` such a launch
returns, and :class:`ServedTransport`, what asyncio's ``Process`` sits on. Everything
else, and a launch that would fail as a process (no such program on PATH, no such
working directory), runs for real. ``shell=True`` never is served: ``sh -c 'zread …'``
runs the real ``zread`` found on PATH.

A launch is ``zread``'s when the program it runs (``executable=``, else argv[0]) is
named ``zread``. ``subprocess.Popen`` is rebound to a subclass of the real class whose
``__new__`` hands back a :class:`ServedPopen` for such a launch and a real ``Popen``
otherwise, so ``isinstance(p, subprocess.Popen)`` holds for both. Popen's own code
does the rest (the streams: ``PIPE``, ``DEVNULL``, a file, ``STDOUT``, ``text=``,
``encoding=``, ``bufsize=``; ``communicate``, ``wait``'s ``TimeoutExpired``, the context
manager): only the child is different. Its ``pid`` is above the kernel's ``pid_max``,
so no process ever has it; ``os.kill`` on it signals the served call.

It leans on CPython's own ``subprocess.Popen`` and ``asyncio.base_subprocess`` internals
(``_execute_child``, ``_internal_poll``, ``_wait``, ``BaseSubprocessTransport``), as
they are from Python 3.11 on. A name bound before installing (``from subprocess import
Popen``) and a subclass of ``Popen`` launch for real; so do event loops that are not
asyncio's own (uvloop). Options that only a process has (``preexec_fn``, ``user``,
``umask``, ``pass_fds``, ``start_new_session`` …) are ignored.

Must not: import pytest; change what a launch that is not served does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import subprocess
from asyncio import base_subprocess
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from simulator.served import ServedCall

__all__ = ["Launches", "ServedPopen", "ServedTransport", "pid_floor"]

REAL_POPEN = subprocess.Popen
REAL_KILL = os.kill
REAL_SUBPROCESS_EXEC = asyncio.BaseEventLoop.subprocess_exec
NAME = "zread"
_POSITIONS = {"executable": 2, "shell": 8, "cwd": 9, "env": 10}
"""Where Popen takes these arguments when given by position."""


def pid_floor() -> int:
    """The first pid no process can have: above ``pid_max`` and the kernel's limit."""
    try:
        with open("/proc/sys/kernel/pid_max", encoding="ascii") as file:
            most = int(file.read().strip())
    except (OSError, ValueError):
        most = 0
    return max(most, 1 << 22) + 1


def _program(args: object, executable: object) -> str | None:
    """The program a launch runs, as a path or a name; None when it cannot tell."""
    first: object
    if executable is not None:
        first = executable
    elif isinstance(args, str | bytes | os.PathLike):
        first = args
    elif isinstance(args, Sequence) and args:
        first = args[0]
    else:
        return None
    try:
        return os.fsdecode(first)  # type: ignore[arg-type]
    except TypeError:
        return None


def _runs(program: str, env: Any, cwd: Any) -> bool:
    """A process would start: ``program`` is found (on the launch's PATH) and ``cwd``,
    when given, is a directory. Otherwise the real Popen says what is wrong."""
    where = os.fsdecode(cwd) if cwd is not None else ""
    if where and not os.path.isdir(where):
        return False
    if os.sep in program:
        path = os.path.join(where, program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    search = os.pathsep.join(os.fsdecode(p) for p in os.get_exec_path(env))
    return shutil.which(program, path=search) is not None


class Launches:
    """Serves this process's launches of ``zread`` while installed (:meth:`install`,
    or ``with``); ``on_start`` is told each one served, as it starts."""

    def __init__(self, on_start: Callable[[ServedPopen], None] | None = None) -> None:
        self.on_start = on_start
        self.served: dict[int, ServedPopen] = {}
        """Every call served so far, by its pid."""
        self._pids = itertools.count(pid_floor())
        self.popen: type[InterceptingPopen] = type(
            "Popen", (InterceptingPopen,), {"launches": self}
        )
        self.served_popen: type[ServedPopen] = type("Popen", (ServedPopen, self.popen), {})
        self.transport: type[ServedTransport] = type(
            "ServedTransport", (ServedTransport,), {"popen": self.served_popen}
        )
        self._undo: list[tuple[object, str, object]] = []

    def serves(self, args: object, executable: object, shell: object, env: Any, cwd: Any) -> bool:
        """Whether a launch with these arguments is served (else it runs for real)."""
        if shell:
            return False
        program = _program(args, executable)
        if program is None or os.path.basename(program) != NAME:
            return False
        return isinstance(args, str | bytes | os.PathLike | Sequence) and _runs(program, env, cwd)

    def next_pid(self) -> int:
        return next(self._pids)

    def started(self, popen: ServedPopen) -> None:
        self.served[popen.pid] = popen
        if self.on_start is not None:
            self.on_start(popen)

    # -- installing -----------------------------------------------------------------------

    def patches(self) -> list[tuple[object, str, object]]:
        """(object, attribute, value): what installing sets (a fixture sets them with
        ``monkeypatch.setattr``, which puts them back)."""
        return [
            (subprocess, "Popen", self.popen),
            (os, "kill", self.kill),
            (asyncio.BaseEventLoop, "subprocess_exec", self._subprocess_exec()),
        ]

    def install(self) -> None:
        for target, name, value in self.patches():
            self._undo.append((target, name, getattr(target, name)))
            setattr(target, name, value)

    def uninstall(self) -> None:
        while self._undo:
            target, name, value = self._undo.pop()
            setattr(target, name, value)

    def __enter__(self) -> Launches:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- what is routed -------------------------------------------------------------------

    def kill(self, pid: int, signum: int, /) -> None:
        """``os.kill``: a served call's pid signals it; any other goes to the kernel."""
        popen = self.served.get(pid)
        if popen is None:
            REAL_KILL(pid, signum)
        else:
            popen.send_signal(signum)

    def _subprocess_exec(self) -> Callable[..., Any]:
        launches = self

        async def subprocess_exec(
            loop: asyncio.BaseEventLoop,
            protocol_factory: Callable[[], asyncio.SubprocessProtocol],
            program: Any,
            *args: Any,
            **kwargs: Any,
        ) -> tuple[asyncio.SubprocessTransport, asyncio.SubprocessProtocol]:
            argv = (program, *args)
            options = {k: kwargs.get(k) for k in ("executable", "env", "cwd")}
            plain = not any(kwargs.get(k) for k in ("universal_newlines", "shell", "text"))
            plain = plain and not kwargs.get("bufsize") and kwargs.get("encoding") is None
            if (
                not plain
                or kwargs.get("errors") is not None
                or not launches.serves(
                    argv, options["executable"], False, options["env"], options["cwd"]
                )
            ):  # runs for real, and the real one says what is wrong with the arguments
                return await REAL_SUBPROCESS_EXEC(loop, protocol_factory, *argv, **kwargs)
            for key in ("universal_newlines", "shell", "bufsize", "encoding", "errors", "text"):
                kwargs.pop(key, None)
            stdin, stdout, stderr = (
                kwargs.pop(k, subprocess.PIPE) for k in ("stdin", "stdout", "stderr")
            )
            protocol = protocol_factory()
            waiter = loop.create_future()
            transport = launches.transport(
                loop, protocol, argv, False, stdin, stdout, stderr, 0, waiter=waiter, **kwargs
            )
            try:
                await waiter
            except BaseException:
                transport.close()
                await transport._wait()
                raise
            return transport, protocol

        return subprocess_exec


class InterceptingPopen(REAL_POPEN):  # type: ignore[type-arg]
    """``subprocess.Popen`` while a :class:`Launches` is installed."""

    launches: ClassVar[Launches]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        launches = cls.launches
        if cls is launches.popen:  # not a subclass of the client's: those run for real
            given = args[0] if args else kwargs.get("args")
            executable, shell, cwd, env = (
                args[at] if len(args) > at else kwargs.get(name) for name, at in _POSITIONS.items()
            )
            if launches.serves(given, executable, shell, env, cwd):
                return object.__new__(launches.served_popen)
        return object.__new__(cls)


class ServedPopen(REAL_POPEN):  # type: ignore[type-arg]
    """A ``Popen`` whose child is a :class:`ServedCall` on this process's threads; Popen's
    own code sets up its streams and runs ``communicate``, ``wait`` and the rest."""

    launches: ClassVar[Launches]
    _call: ServedCall

    def _execute_child(
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: Any,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: Any,
        shell: Any,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *rest: Any,
    ) -> None:
        """Start the call where Popen would fork: it gets its own copies of the child's
        ends (this process's 0, 1, 2 where the launch redirected nothing), and the
        parent's copies are closed as after a fork."""
        single = isinstance(args, str | bytes | os.PathLike)
        argv = [os.fsdecode(a) for a in ([args] if single else args)]
        fds = (_child_end(p2cread, 0), _child_end(c2pwrite, 1), _child_end(errwrite, 2))
        self._close_pipe_fds(  # type: ignore[attr-defined]  # as Popen's own does
            p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite
        )
        if env is None:
            environ = dict(os.environ)
        else:
            environ = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        where = os.path.abspath(os.fsdecode(cwd)) if cwd is not None else os.getcwd()
        self.pid = self.launches.next_pid()
        self._call = ServedCall(argv, environ, where, fds, self.pid)
        self.launches.started(self)

    def _internal_poll(self, *args: Any, **kwargs: Any) -> int | None:
        if self.returncode is None:
            self.returncode = self._call.returncode
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self.returncode is None:
            code = self._call.wait(timeout)
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
            self.returncode = code
        return int(self.returncode)

    def send_signal(self, sig: int) -> None:
        """What ``sig`` does to a zread process: SIGTERM, SIGINT, SIGHUP quit; SIGKILL
        ends the run at once (-9), as it would leave zread's files."""
        self.poll()
        if self.returncode is None:
            self._call.signal(sig)

    def when_exited(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(code)`` from the call's thread when it has exited."""
        self._call.when_exited(callback)


def _child_end(fd: int, standard: int) -> int:
    """The call's own copy of a child's end (``standard``: this process's, inherited)."""
    try:
        return os.dup(standard if fd == -1 else fd)
    except OSError:  # this process has no such stream: the call reads or writes nothing
        return os.open(os.devnull, os.O_RDWR)


class ServedTransport(base_subprocess.BaseSubprocessTransport):
    """asyncio's subprocess transport over a :class:`ServedPopen`: asyncio's own
    ``Process`` and protocols sit on it, as on a process's."""

    popen: ClassVar[type[ServedPopen]]

    def _start(
        self,
        args: Sequence[Any],
        shell: bool,
        stdin: Any,
        stdout: Any,
        stderr: Any,
        bufsize: int,
        **kwargs: Any,
    ) -> None:
        loop = self._loop
        proc = self.popen(
            args,
            shell=shell,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            universal_newlines=False,
            bufsize=bufsize,
            **kwargs,
        )
        self._proc = proc

        def exited(code: int) -> None:  # on the call's thread
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(self._process_exited, code)

        proc.when_exited(exited)
