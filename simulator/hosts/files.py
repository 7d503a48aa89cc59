"""The world kept in zread's own files: ``$HOME/.zread/`` and the project's ``.zread/``.

Owns: :class:`FileStore`, the :class:`~simulator.hosts.effects.Store` a process uses
unless ``--no-files``: what a session starts from is the scenario's world with what is
on disk laid over it, and what a command does to the world is written where and how
zread writes it (formats in :mod:`simulator.hosts.zreadfiles`).

- User side (``home/.zread/``, home being HOME or ``--home``): ``config.yaml`` is the
  config ``config`` shows and ``generate`` uses (absent: the scenario's); ``login.json``
  (or an ``llm.api_key`` in ``config.yaml``) means logged in. When ``.zread/`` does not
  exist at all, the scenario's account and config stand in. Each run appends a line
  to ``log/zread.log``.
- Project side (``project/.zread/wiki/``): the versions, ``current`` and the draft are
  the world's wikis and draft; with no ``.zread/wiki`` the scenario's stand in. A run
  gives its draft an id (local time, the next free second) when the catalog is made,
  writes ``drafts/wiki.json`` then each finished page; at the end the draft becomes
  ``versions/<id>`` and ``current`` points at it; a run stopped midway leaves
  ``drafts/`` as it is.

Every change is a read-modify-write under the directory's lock, and every file is
replaced whole (temporary file, rename), so many processes on one HOME or one project
lose no update and never leave a torn file. A file that cannot be read is a
:class:`FilesError` naming it (exit 2); nothing is rewritten over it.

Must not: write anywhere but ``home/.zread/`` and ``project/.zread/``. This module is
where the wall clock is read, for a new version's id and time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from simulator.core.effects import (
    CatalogReady,
    DraftLeft,
    PageWritten,
    SaveConfig,
    SaveLogin,
    WikiGenerated,
)
from simulator.core.errors import ConfigurationError
from simulator.hosts import zreadfiles as zf
from simulator.scenario.world import Account, Draft, PageSpec, Settings, WikiVersion, World

if TYPE_CHECKING:
    from simulator.scenario.wiki import Page

__all__ = ["DiskSite", "FileStore", "FilesError", "project_sources"]

_SKIPPED_DIRS = frozenset({".git", ".zread", ".hg", ".svn", "node_modules", "__pycache__"})
_MAX_SOURCES = 400
_MAX_SOURCE_BYTES = 1 << 20
_INTEGER_FIELDS = ("max_concurrent", "max_retries")


class FilesError(ConfigurationError):
    """One of zread's files cannot be used: the message names it and why."""


def project_sources(project: Path) -> list[tuple[str, int]]:
    """The project's text files a page may cite: (relative path, line count), sorted;
    hidden and tool directories skipped, at most a few hundred."""
    found: list[tuple[str, int]] = []
    for root, dirs, files in os.walk(project):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = Path(root, name)
            try:
                if path.is_symlink() or path.stat().st_size > _MAX_SOURCE_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            lines = len(text.splitlines())
            if lines:
                found.append((path.relative_to(project).as_posix(), lines))
            if len(found) >= _MAX_SOURCES:
                return found
    return found


class FileStore:
    """The world in ``home/.zread/`` (None: no user side) and ``project/.zread/``."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None,
        project: str | os.PathLike[str],
        *,
        clock: Callable[[], dt.datetime] = dt.datetime.now,
    ) -> None:
        self.home = Path(home) if home is not None else None
        self.project = Path(project)
        self._clock = clock
        self._seed = 0
        self._catalog: tuple[Page, ...] = ()
        self._language = "en"
        self._draft_id = ""
        self._generated_at = ""
        self._finished: list[str] = []
        self._written: set[str] = set()
        """The slugs of the pages this run finished (or resumed): its version's pages."""
        self._sources: list[tuple[str, int]] | None = None

    # -- what a session starts from ----------------------------------------------------

    def world(self, base: World, *, seed: int = 0) -> World:
        """``base`` with the files laid over it (see the module docstring)."""
        self._seed = seed
        world = self._user_side(base)
        world = self._project_side(world)
        if world.draft is not None:
            self._draft_id, self._finished = world.draft.id, list(world.draft.finished)
        self.log(f"start: seed {seed}, project {self.project}")
        return world

    def _user_side(self, world: World) -> World:
        if self.home is None:
            return world
        user = zf.user_dir(self.home)
        if not user.is_dir():
            return world
        config_file = zf.config_path(self.home)
        doc = self._read(config_file, zf.read_config) if config_file.exists() else None
        config = world.config
        if doc is not None:
            config = self._settings(config, zf.config_values(doc), config_file)
        login_file = zf.login_path(self.home)
        login = self._read(login_file, zf.decode_login) if login_file.exists() else None
        has_key = bool(doc is not None and zf.config_values(doc).get("llm_api_key"))
        # Logged in by an API key alone is nobody's account: no username to show.
        username = "" if login is None else login.username or world.account.username
        account = Account(username=username, logged_in=login is not None or has_key)
        return msgspec.structs.replace(world, config=config, account=account)

    def _settings(self, base: Settings, values: dict[str, str], where: Path) -> Settings:
        known = {k: v for k, v in values.items() if k in Settings.__struct_fields__}
        fields: dict[str, Any] = dict(known)
        try:
            for key in _INTEGER_FIELDS:
                if key in fields:
                    fields[key] = int(fields[key])
            return msgspec.structs.replace(base, **fields)
        except (ValueError, TypeError) as err:
            raise FilesError(f"{where}: {err}") from None

    def _project_side(self, world: World) -> World:
        wiki_dir = zf.wiki_dir(self.project)
        if not wiki_dir.is_dir():
            return world
        current_file = zf.current_path(self.project)
        current = None
        if current_file.exists():
            current = self._read(current_file, zf.decode_current)
        wikis = []
        versions = zf.versions_dir(self.project)
        for entry in sorted(versions.iterdir()) if versions.is_dir() else ():
            index_file = zf.wiki_json_path(entry)
            if entry.is_dir() and index_file.exists():
                index = self._read(index_file, zf.decode_wiki)
                wikis.append(
                    WikiVersion(
                        id=index.id, timestamp=index.generated_at, current=index.id == current
                    )
                )
        draft: Draft | None = None
        project = world.project
        draft_file = zf.wiki_json_path(zf.drafts_dir(self.project))
        if draft_file.exists():
            index = self._read(draft_file, zf.decode_wiki)
            drafts = zf.drafts_dir(self.project)
            finished = [p.slug for p in index.pages if (drafts / p.file).exists()]
            draft = Draft(done=len(finished), id=index.id, finished=finished)
            specs = [
                PageSpec(title=p.title, section=p.section, group=p.group, level=p.level)
                for p in index.pages
            ]
            if specs:
                project = msgspec.structs.replace(project, pages=specs)
        return msgspec.structs.replace(world, wikis=wikis, draft=draft, project=project)

    def _read(self, path: Path, decode: Callable[[bytes], Any]) -> Any:
        try:
            return decode(path.read_bytes())
        except OSError as err:
            raise FilesError(f"{path}: cannot read: {err.strerror}") from None
        except ValueError as err:
            raise FilesError(f"{path}: {err}") from None

    # -- what a command changes --------------------------------------------------------

    def apply(self, effect: object) -> None:
        """Write what a persisted effect says, where zread writes it."""
        if isinstance(effect, SaveConfig):
            self._save_config(effect)
        elif isinstance(effect, SaveLogin):
            self._save_login(effect)
        elif isinstance(effect, CatalogReady):
            self._catalog_ready(effect)
        elif isinstance(effect, PageWritten):
            self._page_written(effect)
        elif isinstance(effect, WikiGenerated):
            self._commit(effect)
        elif isinstance(effect, DraftLeft):
            self.log(f"draft left: {effect.done} pages done, id {self._draft_id}")

    def _save_config(self, effect: SaveConfig) -> None:
        if self.home is None:
            return
        path = zf.config_path(self.home)
        with self._user_lock():
            if path.exists():
                doc = self._read(path, zf.read_config)
                changed = {
                    key: value
                    for key, value in effect.values.items()
                    if effect.initial.get(key) != value
                }
            else:
                doc, changed = zf.default_config(), dict(effect.values)
            zf.write_atomic(path, zf.encode_config(zf.update_config(doc, changed)), 0o600)
        self.log(f"config saved: {', '.join(sorted(changed)) or 'nothing changed'}")

    def _save_login(self, effect: SaveLogin) -> None:
        if self.home is None:
            return
        data = zf.encode_login(effect.username, effect.region, effect.model)
        with self._user_lock():
            zf.write_atomic(zf.login_path(self.home), data, 0o600)
        self.log(f"logged in: {effect.username} ({effect.region}, {effect.model})")

    def _catalog_ready(self, effect: CatalogReady) -> None:
        self._catalog, self._language = effect.pages, effect.language
        self._written = set()
        if effect.resumed and self._draft_id:
            self._written = set(self._finished)
            return  # the draft on disk goes on, with its id and its pages
        drafts = zf.drafts_dir(self.project)
        with self._project_lock():
            now = self._clock()
            self._draft_id = zf.next_free_id(now, self._ids_taken())
            self._generated_at = self._time(now)
            if drafts.exists():
                shutil.rmtree(drafts)  # a draft started over, or cleared
            drafts.mkdir(parents=True)
            index = self._index(effect.pages)
            zf.write_atomic(zf.wiki_json_path(drafts), zf.encode_wiki(index))
        self.log(f"catalog ready: {len(effect.pages)} pages, draft {self._draft_id}")

    def _ids_taken(self) -> set[str]:
        """The versions' ids, and the draft's: another run may be writing it."""
        taken = {entry.name for entry in _dirs(zf.versions_dir(self.project))}
        draft = self._draft_on_disk()
        return taken | {draft} if draft is not None else taken

    def _time(self, now: dt.datetime) -> str:
        return zf.go_time(now.astimezone(dt.UTC), time.time_ns() % 1_000_000_000)

    def _index(self, pages: tuple[Page, ...] | list[Page]) -> zf.WikiIndex:
        return zf.WikiIndex(
            id=self._draft_id,
            generated_at=self._generated_at or self._time(self._clock()),
            language="zh" if self._language == "zh" else "en",
            pages=[zf.page_entry(page) for page in pages],
        )

    def _draft_on_disk(self) -> str | None:
        """The id of the draft in ``drafts/``, or None. Another run in the same project
        may have started its own over this run's (zread keeps one draft per project)."""
        draft_file = zf.wiki_json_path(zf.drafts_dir(self.project))
        try:
            return zf.decode_wiki(draft_file.read_bytes()).id
        except (OSError, ValueError):
            return None

    def _markdown(self, page: Page) -> bytes:
        from simulator.scenario import wiki

        if self._sources is None:
            self._sources = project_sources(self.project)
        others = [(p.title, p.slug) for p in self._catalog if p.slug != page.slug]
        text = wiki.page_markdown(
            page,
            language="zh" if self._language == "zh" else "en",
            seed=self._seed,
            others=others,
            sources=self._sources,
        )
        return text.encode("utf-8")

    def _page_written(self, effect: PageWritten) -> None:
        if not 1 <= effect.page_id <= len(self._catalog):
            return
        page = self._catalog[effect.page_id - 1]
        self._written.add(page.slug)
        data = self._markdown(page)
        with self._project_lock():
            if self._draft_on_disk() == self._draft_id:  # else another run took the draft over
                drafts = zf.drafts_dir(self.project)
                zf.write_atomic(drafts / zf.page_file(page.slug), data)

    def _commit(self, effect: WikiGenerated) -> None:
        drafts = zf.drafts_dir(self.project)
        draft_file = zf.wiki_json_path(drafts)
        with self._project_lock():
            if self._draft_on_disk() == self._draft_id:
                index = self._read(draft_file, zf.decode_wiki)
                written = [p for p in index.pages if (drafts / p.file).exists()]
                if len(written) != len(index.pages):  # skip_all: only the pages written
                    index = msgspec.structs.replace(index, pages=written)
                    zf.write_atomic(draft_file, zf.encode_wiki(index))
                target = zf.version_dir(self.project, index.id)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(drafts, target)
            else:  # the draft was taken over: the version is written from this run's pages
                index = self._commit_from_memory()
                written = index.pages
            zf.write_atomic(zf.current_path(self.project), zf.encode_current(index.id))
        self.log(f"wiki {index.id}: {len(written)} of {effect.pages_total} pages, now current")

    def _commit_from_memory(self) -> zf.WikiIndex:
        if zf.version_dir(self.project, self._draft_id).exists():
            self._draft_id = zf.next_free_id(self._clock(), self._ids_taken())
        pages = [page for page in self._catalog if page.slug in self._written]
        index = self._index(pages)
        staging = zf.project_dir(self.project) / f".version-{os.getpid()}-{self._draft_id}"
        staging.mkdir(parents=True, exist_ok=True)
        for page in pages:
            zf.write_atomic(staging / zf.page_file(page.slug), self._markdown(page))
        zf.write_atomic(zf.wiki_json_path(staging), zf.encode_wiki(index))
        target = zf.version_dir(self.project, index.id)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, target)
        return index

    def _user_lock(self) -> Any:
        assert self.home is not None
        user = zf.user_dir(self.home)
        user.mkdir(parents=True, exist_ok=True, mode=0o700)
        return zf.locked(user)

    def _project_lock(self) -> Any:
        top = zf.project_dir(self.project)
        top.mkdir(parents=True, exist_ok=True)
        return zf.locked(top)

    # -- what browse serves --------------------------------------------------------------

    def site(self, version: str) -> DiskSite | None:
        """Version ``version`` of the project's wiki as it is on disk, or None when the
        project has no such version (the scenario's wiki stands in)."""
        directory = zf.version_dir(self.project, version) if version else None
        if directory is None or not zf.wiki_json_path(directory).is_file():
            return None
        return DiskSite(self.project.name, directory)

    # -- the rest ------------------------------------------------------------------------

    def log(self, line: str) -> None:
        """Append a line to ``log/zread.log``, as zread logs (only where ``.zread/``
        exists or is being written to)."""
        if self.home is None or not zf.user_dir(self.home).is_dir():
            return
        stamp = self._clock().astimezone().isoformat(timespec="seconds")
        with contextlib.suppress(OSError):  # a log line is never worth a failed run
            zf.append_log(zf.log_path(self.home), f"{stamp} zread-sim {line}")

    def close(self) -> None:
        """Nothing is held between writes."""


def _dirs(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from (entry for entry in path.iterdir() if entry.is_dir())


class DiskSite:
    """One version of the project's wiki served from its files (see
    :class:`~simulator.hosts.wikiserver.Site`): the index is its wiki.json, a page is its
    ``.md`` file, read when asked for."""

    def __init__(self, project: str, directory: Path) -> None:
        self.project = project
        self._directory = directory
        self._json = zf.wiki_json_path(directory).read_bytes()
        index = zf.decode_wiki(self._json)
        self.version = index.id
        self.pages = tuple(index.pages)
        self._files = {page.slug: page.file for page in index.pages}

    def markdown(self, slug: str) -> str | None:
        name = self._files.get(slug)
        if name is None:
            return None
        try:
            return (self._directory / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def wiki_json(self) -> bytes:
        return self._json
