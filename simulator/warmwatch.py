"""When a warm server ends by itself: idle too long, its package changed, its socket gone.

Owns: :class:`PackageStamp` (what the installed package looked like when the server
warmed up, and whether it still does) and :class:`Watch` (the server's clock for these
ends: when to look next, and what it found). :mod:`simulator.warmserver` asks it; the
server a ``zread`` installed with ``--warm`` starts (:mod:`simulator.warmlaunch`)
runs with both ``--idle`` and ``--until-changed``.

- **Idle**: no launch running and none being read for :attr:`Watch.idle` seconds since
  the last one ended (or since the server became ready). A run in progress, however
  long, keeps the server alive; a spare waiting does not.
- **Changed**: the stamp of every module file the server loaded from the package's own
  folders (``simulator/`` and ``statecharts/`` under the folder they are installed in,
  the checkout for an editable install) and of the distribution's metadata
  (``zread_sim-*.dist-info/METADATA`` and ``RECORD`` on ``sys.path``): inode, size and
  modification time, each read with one ``stat``. ``pip install`` of another version,
  or of the same one again, writes new files (new inodes) and a new ``dist-info``
  folder; an edit in an editable checkout changes the file's time. A file gone is a
  change. A few hundred ``stat`` calls, a fraction of a millisecond: cheap enough to
  look before each launch is answered and once every :data:`WATCH_PERIOD` besides.
- **Moved**: the socket's path no longer names the socket the server bound (removed,
  or replaced by another's): no launcher can reach it any more.

Must not: read a file's content, or import the server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from simulator.warmsocket import identity

WATCH_PERIOD = 1.0
"""Seconds between two looks at the package and the socket while nothing else wakes
the server."""
PACKAGES = ("simulator", "statecharts")
DISTRIBUTION_PREFIX = "zread_sim-"

_Key = tuple[int, int, int]


def _key(path: str) -> _Key | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def package_root() -> str:
    """The folder ``simulator/`` is installed in (site-packages, or the checkout)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loaded_files(root: str, packages: Iterable[str] = PACKAGES) -> list[str]:
    """The files of the modules loaded now from ``root``'s ``packages``."""
    prefixes = tuple(os.path.join(root, package) + os.sep for package in packages)
    files = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.startswith(prefixes):
            files.add(file)
    return sorted(files)


def metadata_files(path_entries: Iterable[str]) -> list[str]:
    """``METADATA`` and ``RECORD`` of each ``zread_sim-*.dist-info`` on ``path_entries``."""
    files = []
    for entry in path_entries:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(DISTRIBUTION_PREFIX) and name.endswith(".dist-info"):
                files += [os.path.join(entry, name, leaf) for leaf in ("METADATA", "RECORD")]
    return sorted(files)


class PackageStamp:
    """What the package's files looked like when it was taken (:meth:`taken`)."""

    __slots__ = ("keys",)

    def __init__(self, files: Iterable[str]) -> None:
        self.keys = {path: _key(path) for path in files}

    @classmethod
    def taken(cls) -> PackageStamp:
        """The stamp of this process's package now: the module files it loaded, its
        distribution's metadata."""
        root = package_root()
        return cls([*loaded_files(root), *metadata_files(sys.path)])

    def changed(self) -> str:
        """The first file that is not as it was ("" when none is)."""
        for path, key in self.keys.items():
            if _key(path) != key:
                return path
        return ""


class Watch:
    """A server's own ends: idle for ``idle`` seconds (None: never), ``stamp`` no longer
    what the package looks like (None: not looked at), the socket at ``socket_path``
    no longer the one bound (inode ``socket_inode``)."""

    def __init__(
        self,
        now: float,
        *,
        idle: float | None = None,
        stamp: PackageStamp | None = None,
        socket_path: str = "",
    ) -> None:
        self.idle = idle
        self.stamp = stamp
        self.socket_path = socket_path
        self.socket_inode = identity(socket_path) if socket_path else None
        self.last_active = now
        self.next_look = now + WATCH_PERIOD

    def active(self, now: float) -> None:
        """A launch came or ended at ``now``: the idle time counts from here."""
        self.last_active = now

    def deadline(self, busy: bool) -> float | None:
        """The next moment :meth:`ended` has something to say."""
        moments = []
        if self.idle is not None and not busy:
            moments.append(self.last_active + self.idle)
        if self.stamp is not None or self.socket_inode is not None:
            moments.append(self.next_look)
        return min(moments) if moments else None

    def ended(self, now: float, busy: bool) -> str:
        """Why the server should end at ``now`` ("" when it should not): ``idle``,
        ``changed`` or ``moved``; ``busy``: a launch runs or is being read."""
        if self.idle is not None and not busy and now - self.last_active >= self.idle:
            return "idle"
        if now < self.next_look:
            return ""
        self.next_look = now + WATCH_PERIOD
        return self.looked()

    def looked(self) -> str:
        """``changed`` or ``moved`` as found now, else ""."""
        if self.stamp is not None and self.stamp.changed():
            return "changed"
        if self.socket_inode is not None and identity(self.socket_path) != self.socket_inode:
            return "moved"
        return ""
