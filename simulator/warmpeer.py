"""Whether a launcher's run can be served, and what its child takes over from it.

Owns: what the warm server learns of a launcher from the kernel once it connects
(:func:`settings`, by its pid), and what a child does with it (:func:`apply`). A served
run must be the run the client would have had, so:

- **Checked, else the launcher runs cold**: what a descriptor cannot carry and a child
  cannot take on. Its namespaces (cgroup, ipc, mount, network, pid, time, user, uts:
  ``/proc/PID/ns/*``), its root directory (``/proc/PID/root``), its cgroup
  (``/proc/PID/cgroup``), and its credentials and privileges as ``/proc/PID/status``
  shows them (uids, gids, groups, capabilities, no_new_privs, seccomp). Any of them
  other than the server's, or unreadable, and :func:`settings` is None: the server
  answers ``refused`` and the launcher runs the command itself.
- **Taken over**: every resource limit (``prlimit``: open files, file size, address
  space, core size, CPU time and the rest, soft and hard), the nice value and the CPU
  affinity. One the child could not take on (a hard limit above the server's, a nice
  value below it, a CPU outside the server's set) also means a cold run.

The working directory (a descriptor), umask, environment, arguments and signal
dispositions come with the request (:mod:`simulator.launcher`).

Must not: be imported by the launcher (its start-up stays four modules).
"""

from __future__ import annotations

import functools
import os
import resource
import struct

NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts")
"""The namespaces a launcher must share with the server (not the ``*_for_children``)."""
STATUS_FIELDS = (
    b"Uid:",
    b"Gid:",
    b"Groups:",
    b"NoNewPrivs:",
    b"Seccomp:",
    b"CapInh:",
    b"CapPrm:",
    b"CapEff:",
    b"CapBnd:",
    b"CapAmb:",
)
"""The lines of ``/proc/PID/status`` a launcher must share with the server."""
LIMITS = tuple(range(16))
"""Every resource limit Linux has (``RLIM_NLIMITS``; Python names all but RLIMIT_LOCKS)."""
_MAX_PROC_FILE = 1 << 16
_HEAD = struct.Struct(f">H{2 * len(LIMITS)}qiH")
"""The settings' size, each limit's soft and hard value, the nice value, the mask's size."""


def settings(pid: int) -> bytes | None:
    """What the child of the launcher ``pid`` takes on (for :func:`apply`); None when
    the launcher lives elsewhere than the server or has what a child cannot take on."""
    if pid <= 0:  # the launcher's pid is not in this server's pid namespace
        return None
    own = _own()
    try:
        if own is None or _world(str(pid)) != own:
            return None
        limits = [resource.prlimit(pid, which) for which in LIMITS]
        nice = os.getpriority(os.PRIO_PROCESS, pid)
        cpus = os.sched_getaffinity(pid)
    except (OSError, ValueError):  # gone, or out of descriptors: it runs cold
        return None
    if not _can_take(limits, nice, cpus):
        return None
    mask = sum(1 << cpu for cpu in cpus)
    mask_bytes = mask.to_bytes((mask.bit_length() + 7) // 8 or 1, "big")
    flat = [value for pair in limits for value in pair]
    return _HEAD.pack(_HEAD.size + len(mask_bytes), *flat, nice, len(mask_bytes)) + mask_bytes


def size(data: bytes) -> int | None:
    """The size of the settings at the start of ``data``; None if it is too short to tell."""
    return int.from_bytes(data[:2], "big") if len(data) >= 2 else None


def apply(data: bytes) -> None:
    """In a served child: take on the launcher's limits, nice value and CPU affinity."""
    fields = _HEAD.unpack(data[: _HEAD.size])
    mask_size = fields[-1]
    nice = fields[-2]
    flat = fields[1:-2]
    mask = int.from_bytes(data[_HEAD.size : _HEAD.size + mask_size], "big")
    for which, index in zip(LIMITS, range(0, len(flat), 2), strict=True):
        resource.setrlimit(which, (flat[index], flat[index + 1]))
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    os.sched_setaffinity(0, {cpu for cpu in range(mask.bit_length()) if mask >> cpu & 1})


def _can_take(limits: list[tuple[int, int]], nice: int, cpus: set[int]) -> bool:
    """Whether this process's child can take on these settings without privilege."""
    own_limits, own_nice, own_cpus = _own_settings()
    for (_soft, hard), (_own_soft, own_hard) in zip(limits, own_limits, strict=True):
        if own_hard != resource.RLIM_INFINITY and (
            hard == resource.RLIM_INFINITY or hard > own_hard
        ):
            return False
    return nice >= own_nice and cpus <= own_cpus


@functools.cache
def _own() -> tuple[object, ...] | None:
    """This server's own world, read once (a server moved to another cgroup after its
    start is not followed); None when ``/proc`` is not its pid namespace's (a pid from
    a peer's credentials would name another process there) or cannot be read."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        return _world("self")
    except OSError:
        return None


def _own_settings() -> tuple[list[tuple[int, int]], int, set[int]]:
    """This server's limits, nice value and CPUs, as they are now (``prlimit`` may have
    changed them since it started: read at each launch, a few system calls)."""
    limits = [resource.getrlimit(which) for which in LIMITS]
    return limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getaffinity(0)


def _world(who: str) -> tuple[object, ...]:
    """What no descriptor carries of process ``who`` (a pid, or ``self``)."""
    base = f"/proc/{who}/"
    namespaces = tuple(_link(base + "ns/" + name) for name in NAMESPACES)
    root = os.stat(base + "root")
    status = _read(base + "status").splitlines()
    kept = tuple(line for line in status if line.startswith(STATUS_FIELDS))
    return namespaces, (root.st_dev, root.st_ino), _read(base + "cgroup"), kept


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except FileNotFoundError:  # a namespace this kernel does not have
        return None


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, _MAX_PROC_FILE)
    finally:
        os.close(fd)
