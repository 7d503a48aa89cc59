"""A home: the world a runner keeps across commands, in one SQLite file in a directory.

Owns: the persisted parts of a :class:`~simulator.scenario.world.World` (``config``,
``account``, ``wikis``, ``draft``), stored as the JSON of their msgspec structs in
``DIR/world.sqlite3``; overlaying them on a scenario's world (:meth:`Home.world`); and
turning the effects a command asked for (saved config, a login, a generated wiki, a
draft left behind) into updates (:meth:`Home.apply`). A client's multi-command flow
then behaves as with zread: ``config`` saves what ``generate`` uses, a finished
``generate`` adds a version ``browse`` lists, a cancelled one leaves a draft.

Why SQLite: clients load-test with many simulator processes sharing one home. Every
update is a read-modify-write inside ``BEGIN IMMEDIATE`` (one writer at a time, the
others wait up to the busy timeout), in WAL mode (readers never block), so concurrent
processes never lose an update and never leave a torn file, which a JSON file
rewritten in place could not promise without locks of our own.

Used only by runners (through :class:`~simulator.hosts.effects.EffectHost`) and the CLI: the
session and the drivers stay sans-I/O. This module is where the wall clock is read for
a new wiki version's id and timestamp. It never deletes or rewrites a database it
cannot read: that is a :class:`HomeError`, one line for the user.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import msgspec

from simulator.core.effects import DraftLeft, SaveConfig, SaveLogin, WikiGenerated
from simulator.core.errors import ConfigurationError
from simulator.scenario.world import Account, Draft, Settings, WikiVersion, World

if TYPE_CHECKING:
    import sqlite3

__all__ = ["DATABASE", "Home", "HomeError", "new_version_id"]

DATABASE: Final = "world.sqlite3"
"""The one file a home holds."""

_SCHEMA_VERSION: Final = 1
_SCHEMA: Final = "CREATE TABLE IF NOT EXISTS part (name TEXT PRIMARY KEY, json TEXT NOT NULL)"
"""One row per stored part: its name and the JSON of its struct."""
_BUSY_TIMEOUT: Final = 10.0
"""Seconds a writer waits for another process's transaction before giving up."""

_PARTS: Final[dict[str, Any]] = {
    "config": Settings,
    "account": Account,
    "wikis": list[WikiVersion],
    "draft": Draft | None,
}
"""The world's fields a home stores, with the type each is stored as."""


class HomeError(ConfigurationError):
    """A home that cannot be used: the message names the directory and why."""


def new_version_id(now: dt.datetime, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """A wiki version id for ``now`` (``20261129-153000-ab12cd``) not in ``taken``."""
    stamp = now.astimezone(dt.UTC).strftime("%Y%m%d-%H%M%S")
    while True:
        candidate = f"{stamp}-{secrets.token_hex(3)}"
        if candidate not in taken:
            return candidate


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


class Home:
    """The persisted world in directory ``path`` (created if missing, mode 0700)."""

    def __init__(
        self, path: str | os.PathLike[str], *, clock: Callable[[], dt.datetime] = _utc_now
    ) -> None:
        import sqlite3

        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self.database = os.path.join(self.path, DATABASE)
        self._clock = clock
        self._base = World()
        self._seed = 0
        self._db: sqlite3.Connection | None = None
        try:
            os.makedirs(self.path, mode=0o700, exist_ok=True)
        except OSError as err:
            raise HomeError(f"home {self.path}: cannot create: {err.strerror}") from None
        if not os.path.isdir(self.path):
            raise HomeError(f"home {self.path}: not a directory")
        try:
            # Create the file private before SQLite does (it would use 0644).
            os.close(os.open(self.database, os.O_RDWR | os.O_CREAT, 0o600))
            db = sqlite3.connect(self.database, timeout=_BUSY_TIMEOUT, isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise HomeError(self._unusable(err)) from None
        try:
            db.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")
            db.execute("PRAGMA journal_mode = WAL")
            with self._transaction(db):
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    db.execute(_SCHEMA)
                    db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                elif version != _SCHEMA_VERSION:
                    raise HomeError(
                        f"home {self.path}: {DATABASE} has schema {version}, this simulator "
                        f"reads {_SCHEMA_VERSION}; use another --home"
                    )
        except sqlite3.Error as err:
            db.close()
            raise HomeError(self._unusable(err)) from None
        except HomeError:
            db.close()
            raise
        self._db = db

    # -- reading -------------------------------------------------------------------

    def world(self, base: World, *, seed: int = 0) -> World:
        """``base`` with every stored part overlaid.

        ``seed`` is the run's: the first version a home adds keeps ``base``'s versions
        with the ids and dates ``browse`` draws for them from that seed.
        """
        self._base, self._seed = base, seed
        parts = self._read(self._connection())
        return msgspec.structs.replace(base, **parts) if parts else base

    def _read(self, db: sqlite3.Connection) -> dict[str, Any]:
        import sqlite3

        try:
            rows = db.execute("SELECT name, json FROM part").fetchall()
        except sqlite3.Error as err:
            raise HomeError(self._unusable(err)) from None
        parts: dict[str, Any] = {}
        for name, text in rows:
            kind = _PARTS.get(name)
            if kind is None:
                continue
            try:
                parts[name] = msgspec.json.decode(text, type=kind)
            except (msgspec.DecodeError, TypeError) as err:
                raise HomeError(f"home {self.path}: stored {name} is not valid: {err}") from None
        return parts

    # -- writing -------------------------------------------------------------------

    def apply(self, effect: object) -> None:
        """Persist one effect; any other effect is not the home's business."""
        import sqlite3

        db = self._connection()
        try:
            with self._transaction(db):
                parts = self._read(db)
                changed = self._change(effect, parts)
                for name, value in changed.items():
                    db.execute(
                        "INSERT INTO part (name, json) VALUES (?, ?)"
                        " ON CONFLICT (name) DO UPDATE SET json = excluded.json",
                        (name, msgspec.json.encode(value).decode()),
                    )
        except sqlite3.Error as err:
            raise HomeError(self._unusable(err)) from None

    def _change(self, effect: object, parts: dict[str, Any]) -> dict[str, Any]:
        """The parts ``effect`` changes, given the stored ones (read in the same transaction)."""
        config: Settings = parts.get("config", self._base.config)
        if isinstance(effect, SaveConfig):
            return {"config": self._configured(config, effect)}
        if isinstance(effect, SaveLogin):
            return {
                "account": Account(username=effect.username, logged_in=True),
                "config": msgspec.structs.replace(config, llm_model=effect.model),
            }
        if isinstance(effect, DraftLeft):
            return {"draft": Draft(done=effect.done)}
        if isinstance(effect, WikiGenerated):
            wikis = parts["wikis"] if "wikis" in parts else self._base_wikis()
            now = self._clock()
            new = WikiVersion(
                id=new_version_id(now, {w.id for w in wikis}),
                timestamp=now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                current=True,
            )
            old = [msgspec.structs.replace(w, current=False) for w in wikis]
            return {"wikis": [*old, new], "draft": None}
        return {}

    def _configured(self, config: Settings, effect: SaveConfig) -> Settings:
        """``config`` with the values the command changed (all, if it did not say)."""
        values = {
            key: value
            for key, value in effect.values.items()
            if not effect.initial or effect.initial.get(key) != value
        }
        merged = {**msgspec.to_builtins(config), **values}
        try:
            return msgspec.convert(merged, Settings, strict=False)
        except msgspec.ValidationError as err:
            raise HomeError(f"home {self.path}: cannot save config: {err}") from None

    def _base_wikis(self) -> list[WikiVersion]:
        """The base world's versions, ids and dates drawn as browse draws them."""
        if all(w.id and w.timestamp for w in self._base.wikis):  # nothing to draw (no faker)
            return sorted(self._base.wikis, key=lambda w: w.timestamp)
        from simulator.scenario import wiki

        return [
            WikiVersion(id=v.id, timestamp=v.timestamp, current=v.is_current)
            for v in wiki.versions(self._base, self._seed)
        ]

    # -- the connection ------------------------------------------------------------

    def close(self) -> None:
        """Close the database (again is a no-op)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise HomeError(f"home {self.path}: already closed")
        return self._db

    def _unusable(self, err: BaseException) -> str:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        return f"home {self.path}: cannot use {DATABASE}: {reason} (it was left as it is)"

    @staticmethod
    @contextlib.contextmanager
    def _transaction(db: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` (the write lock, taken before reading) ... ``COMMIT``."""
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
