"""The user's side of zread's files: ``$HOME/.zread/`` (config, login, log).

Owns: :class:`UserFiles`: the account and config a session starts from, laid over the
scenario's (``config.yaml`` is the config ``config`` shows and ``generate`` uses; the
scenario's login stands until a file says otherwise: ``login.json``, or an
``llm.api_key`` in ``config.yaml`` other than the scenario's, set or empty; with no
``.zread/`` at all the scenario's config stands in too), saving a config or a login,
and appending to ``log/zread.log``. The bytes are :mod:`simulator.formats`'.

HOME is the user's own, unlike a project: a ``config.yaml`` or ``login.json`` that is a
link to an existing file (a dotfiles manager's) is written through, the link left a
link; a link to nothing is refused, since zread's Go would create its target wherever
it points, and so is a loop of links. Every change is a read-modify-write under an
``flock`` on ``.zread/``'s own descriptor (no lock file), and every file is replaced
whole (temporary file, rename), so many processes on one HOME lose no update and leave
nothing but zread's files.
config.yaml and login.json are written 0600: they may hold a secret (their temporary
files are created 0600 too). A save killed before its rename leaves its temporary file
(``.config.yaml.<8 hex digits>.tmp``); the next run that finds ``.zread/`` held by no
save removes such files, as a new draft removes the drafts no run holds: only regular
files of exactly that name, in ``.zread/`` itself (a linked config.yaml's temporary file
is beside its target, the user's), never a link.

Must not: write anywhere but ``home/.zread/``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from simulator.core.effects import SaveConfig, SaveLogin
from simulator.formats import log as lf
from simulator.formats import login as lg
from simulator.formats.bounds import LIMITS, FormatError
from simulator.hosts import limits
from simulator.hosts.dirfd import (
    FilesError,
    entries,
    flock,
    is_temp_of,
    replace_file,
    try_flock,
)
from simulator.regularfile import NotRegularFile, read_regular
from simulator.scenario.world import Account, Settings, World

_INTEGER_FIELDS = ("max_concurrent", "max_retries")
_SECRET = 0o600
_SAVED = ("config.yaml", "login.json")
"""The files a save replaces whole (by a temporary file renamed over them)."""


class UserFiles:
    """``home/.zread/``: read when a session starts, written when a command saves."""

    def __init__(self, home: Path, *, clock: Callable[[], dt.datetime] = dt.datetime.now) -> None:
        self.home = home
        self.dir = home / ".zread"
        self._clock = clock

    # -- reading -----------------------------------------------------------------------

    def world(self, world: World) -> World:
        """``world`` with the user's config and account laid over it."""
        if self.home.exists() and not self.home.is_dir():
            raise FilesError(f"{self.home}: the home folder is not a directory")
        if not self.dir.is_dir():
            return world
        config_data = self._read("config.yaml")
        config = world.config
        values: dict[str, str] = {}
        if config_data is not None:
            from simulator.formats import config as cf

            where = self.dir / "config.yaml"
            values = self._decode(where, lambda: cf.config_values(cf.read_config(config_data)))
            config = _settings(config, values, where)
        login_data = self._read("login.json")
        login = None
        if login_data is not None:
            login = self._decode(self.dir / "login.json", lambda: lg.decode_login(login_data))
        account = _account(world, login, values.get("llm_api_key"))
        self._remove_stale_temps()
        return msgspec.structs.replace(world, config=config, account=account)

    def _read(self, name: str) -> bytes | None:
        """At most one byte past the file's limit, or None when there is no such
        regular file (a link is followed: HOME is the user's)."""
        path = self.dir / name
        try:  # a FIFO, a device, a directory: refused at once, never waited on
            return read_regular(str(path), str(path), LIMITS[name])
        except NotRegularFile as err:
            raise FilesError(f"{err}; zread-sim reads nothing there") from None
        except OSError as err:
            limits.reraise(err)  # out of descriptors says nothing of the file
            if path.is_symlink() and _loops(path):
                raise _loop_error(path) from None
            if not path.exists():  # missing, or a link to nothing
                return None
            raise FilesError(f"{path}: cannot read: {err.strerror or err}") from None

    def _decode(self, where: Path, decode: Callable[[], Any]) -> Any:
        """What ``decode`` returns; its :class:`FormatError` as a :class:`FilesError`
        naming the file by its whole path."""
        try:
            return decode()
        except FormatError as err:
            message = str(err)
            if message.startswith(f"{where.name}: "):
                message = f"{where}: {message.removeprefix(f'{where.name}: ')}"
            raise FilesError(message) from None

    # -- writing -----------------------------------------------------------------------

    def apply(self, effect: SaveConfig | SaveLogin) -> None:
        if isinstance(effect, SaveConfig):
            self._save_config(effect)
        else:
            self._save_login(effect)

    def _save_config(self, effect: SaveConfig) -> None:
        from simulator.formats.config_edit import save_config

        with self._locked():
            old = self._read("config.yaml")
            if old is None:
                changed = dict(effect.values)
            else:
                changed = {k: v for k, v in effect.values.items() if effect.initial.get(k) != v}
            where = self.dir / "config.yaml"
            data = self._decode(where, lambda: save_config(old, changed))
            if data != old:
                self._write("config.yaml", data)
        self.log(f"config saved: {', '.join(sorted(changed)) or 'nothing changed'}")

    def _save_login(self, effect: SaveLogin) -> None:
        when = self._clock().astimezone(dt.UTC)
        data = lg.encode_login(effect.username, effect.region, effect.model, logged_in_at=when)
        with self._locked():
            self._write("login.json", data)
        self.log(f"logged in: {effect.username} ({effect.region}, {effect.model})")

    def _write(self, name: str, data: bytes) -> None:
        path = _through_link(self.dir / name)
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            replace_file(fd, path.name, data, _SECRET, where=str(self.dir / name))
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An ``flock`` on ``.zread/`` itself (made 0700 when missing) for the block."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with flock(fd):
                _remove_temps(fd)
                yield
        finally:
            os.close(fd)

    def _remove_stale_temps(self) -> None:
        """The temporary files saves left in ``.zread/`` (killed before their rename),
        removed when no save holds ``.zread/``: a save holds it for as long as its
        temporary file exists, so one nobody holds is stale. Never waited for."""
        try:
            fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if try_flock(fd):
                _remove_temps(fd)
        finally:
            os.close(fd)  # the lock goes with it

    def log(self, line: str) -> None:
        """Append a line to ``log/zread.log`` in one write (only where ``.zread/``
        exists); a log line is never worth a failed run."""
        if not self.dir.is_dir():
            return
        data = lf.encode_line(self._clock(), line)
        with contextlib.suppress(OSError, FilesError):
            path = _through_link(self.dir / "log" / "zread.log")
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
            fd = os.open(path, flags, _SECRET)  # a pipe there is not waited on
            try:
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)


def _account(world: World, login: lg.LoginRecord | None, key: str | None) -> Account:
    """Who is logged in: the scenario's account stands until a file says otherwise.
    A login.json says logged in (as its username, else the scenario's); else an
    ``llm.api_key`` in config.yaml that is not the scenario's own says logged in when
    set (a key of one's own is nobody's account: no username) and logged out when
    empty. A ``.zread/`` without them, or a config.yaml with no key or the scenario's
    (a save of the scenario's values writes it), changes nothing."""
    if login is not None:
        return Account(username=login.username or world.account.username, logged_in=True)
    if key is not None and key != world.config.llm_api_key:
        return Account(username="", logged_in=bool(key))
    return world.account


def _remove_temps(directory: int) -> None:
    """Each regular file in ``directory`` named as a save's temporary file of
    config.yaml or login.json is (:func:`~simulator.hosts.dirfd.is_temp_of`) removed;
    nothing else, and no link. The caller holds the directory's lock."""
    with contextlib.suppress(OSError):
        for entry, regular, _ in list(entries(directory)):
            if regular and any(is_temp_of(entry, name) for name in _SAVED):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry, dir_fd=directory)


def _settings(base: Settings, values: Mapping[str, str], where: Path) -> Settings:
    fields: dict[str, Any] = {k: v for k, v in values.items() if k in Settings.__struct_fields__}
    for key in _INTEGER_FIELDS:
        if key in fields:
            text = fields[key].strip()
            if not (text.lstrip("+-").isascii() and text.lstrip("+-").isdigit()) or len(text) > 9:
                raise FilesError(f"{where}: {key}: {fields[key]!r} is not a whole number")
            fields[key] = int(text)
    try:
        return msgspec.structs.replace(base, **fields)
    except ValueError as err:  # the Settings' own words: "max_retries must be ..."
        raise FilesError(f"{where}: {err}") from None


def _through_link(path: Path) -> Path:
    """``path``, or the existing regular file it links to; :class:`FilesError` for a
    link to nothing (or to something that is not a regular file), or a loop of links."""
    if not path.is_symlink():
        return path
    try:
        target = None if _loops(path) else path.resolve()
    except RuntimeError:  # a loop made since, as Python 3.11 and 3.12 report one
        target = None
    if target is None:
        raise _loop_error(path)
    if not target.is_file():
        what = "which is not a regular file" if target.exists() else "which does not exist"
        raise FilesError(
            f"{path}: a symbolic link to {os.readlink(path)}, {what}: nothing is written through it"
        )
    return target


def _loop_error(path: Path) -> FilesError:
    return FilesError(f"{path}: a symbolic link loop; zread-sim neither reads nor writes it")


def _loops(path: Path) -> bool:
    """Whether the links from ``path`` go round in a loop (``resolve()`` raises for one
    on Python 3.11 and 3.12 only; later ones return a path that still loops)."""
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ELOOP
    return False
