"""The world kept in zread's own files: ``$HOME/.zread/`` and the project's ``.zread/wiki/``.

Owns: :class:`FileStore`, the :class:`~simulator.hosts.effects.Store` a process uses
unless ``--no-files``: what a session starts from is the scenario's world with what is
on disk laid over it, and what a command does to the world is written where and how
zread writes it (the bytes: :mod:`simulator.formats`; the user's side:
:mod:`simulator.hosts.userfiles`). Each file is read once, bounded, when the session
starts; what the store writes it keeps in memory and never reads back.

The project's side (``project/.zread/wiki/``), which a cloned repository controls: no
link is followed. Directories are opened by descriptor with ``O_NOFOLLOW``
(:mod:`simulator.hosts.dirfd`); a linked ``.zread``, ``wiki``, ``versions`` or ``drafts``
is refused (:class:`~simulator.hosts.dirfd.LinkRefused`, exit 2) before anything is
written; a linked ``current`` or page file is replaced as a link; a linked file is never
read. A generate run's draft, from the claim of its id to its commit, is
:mod:`simulator.hosts.drafts`'; nothing else is ever created in the project.

What a page says is :mod:`simulator.hosts.pages`'; what browse serves from disk is
:mod:`simulator.hosts.disksite`'s.

Must not: write anywhere but ``home/.zread/`` and ``project/.zread/wiki/``. The wall
clock is read here (a new version's id and time) and by the user's side (its log),
through the ``clock`` given.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from simulator.core.driver import CURRENT_VERSION, EVERY_VERSION
from simulator.core.effects import (
    CatalogReady,
    DraftLeft,
    PageWritten,
    SaveConfig,
    SaveLogin,
    WikiGenerated,
)
from simulator.formats import wiki as wf
from simulator.formats.bounds import LIMITS, FormatError, in_words
from simulator.formats.ids import go_time, is_plain_name, local_zone, version_time
from simulator.hosts import dirfd, drafts, limits
from simulator.hosts.dirfd import FilesError
from simulator.hosts.disksite import WIKI_PATH, DiskSite
from simulator.hosts.pages import Keyed, page_bytes, project_sources
from simulator.hosts.userfiles import UserFiles
from simulator.scenario.world import MAX_PAGES, Draft, PageSpec, Project, WikiVersion, World

if TYPE_CHECKING:
    from simulator.scenario.wiki import Page


_VERSIONS_READ = 64 << 20
"""The most bytes of wiki.json read from all the versions together."""
_DOING: dict[type, str] = {
    PageWritten: "writing a page of the wiki",
    CatalogReady: "writing the draft's wiki.json",
    WikiGenerated: "making the draft the wiki's current version",
    DraftLeft: "leaving the draft",
    SaveConfig: "saving the config",
    SaveLogin: "saving the login",
}
"""What the store is doing for each effect, in an out-of-resources line."""


class FileStore:
    """The world in ``home/.zread/`` (None: no user side) and ``project/.zread/wiki/``
    (None: the command does not touch the project)."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None,
        project: str | os.PathLike[str] | None,
        *,
        clock: Callable[[], dt.datetime] = dt.datetime.now,
    ) -> None:
        self.user = UserFiles(Path(home), clock=clock) if home is not None else None
        self.project = Path(project) if project is not None else None
        self._clock = clock
        self._seed = 0
        self._catalog: tuple[Page, ...] = ()
        self._language = "en"
        self._draft: wf.WikiIndex | None = None
        """The draft in ``drafts/`` when the session started, as read then."""
        self._run: drafts.Run | None = None
        self._links = Keyed()
        self._sources: Keyed | None = None
        self._wiki: drafts.Wiki | None = None
        self._read_versions: dict[str, tuple[bytes, wf.WikiIndex]] = {}
        """Each version's wiki.json as the session's start read it: browse serves it
        without reading it again."""
        self._listed: frozenset[str] = frozenset()
        """The names in ``versions/`` when the session started: a new draft's id is
        looked for past them without a look at the disk for each."""

    # -- what a session starts from ----------------------------------------------------

    def world(self, base: World, *, seed: int = 0, versions: str = CURRENT_VERSION) -> World:
        """``base`` with the files laid over it (see the module docstring); ``versions``
        says whose wiki.json is read (:meth:`~simulator.core.driver.Driver.versions_read`)."""
        self._seed = seed
        world = base
        try:
            if self.user is not None:
                with limits.doing(f"reading {self.user.dir}"):
                    world = self.user.world(base)
            with limits.doing("reading the wiki"):
                world = self._project_side(world, versions)
        except BaseException:
            self.close()  # refused: nothing stays open for a session that never starts
            raise
        self.log(f"start: seed {seed}, project {self.project}")
        return world

    def _project_side(self, world: World, versions: str) -> World:
        wiki = self._open_wiki(create=False)
        if wiki is None:
            return world
        current = None
        wiki.check_current()
        data = dirfd.read_file(wiki.fd, "current", LIMITS["current"])
        if data is not None:
            try:
                current = wf.decode_current(data, wiki.where("current"))
            except FormatError as err:
                raise FilesError(str(err)) from None
        wikis = self._wikis(wiki, current, versions)
        draft: Draft | None = None
        project = world.project
        found = dirfd.open_dir(wiki.fd, drafts.DRAFTS, wiki.where(drafts.DRAFTS))
        if found is not None:
            try:
                index = wiki.read_index(found, wiki.where(drafts.DRAFTS, wf.WIKI_JSON))
                files = {name for name, regular, _ in dirfd.entries(found) if regular}
            finally:
                os.close(found)
            if index is not None:
                self._draft = index
                finished = [p.slug for p in index.pages if p.file in files]
                draft = Draft(done=len(finished), id=index.id, finished=finished)
                project = self._draft_project(wiki, project, index)
        return msgspec.structs.replace(world, wikis=wikis, draft=draft, project=project)

    def _draft_project(self, wiki: drafts.Wiki, project: Project, index: wf.WikiIndex) -> Project:
        """The project whose catalog is the draft's pages (as a scenario lists pages)."""
        if not index.pages:
            return project
        from simulator.scenario.wiki import DraftPageSpec  # a draft's only: not at start-up

        where = wiki.where(drafts.DRAFTS, wf.WIKI_JSON)
        if len(index.pages) > MAX_PAGES:
            raise FilesError(
                f"{where}: {len(index.pages)} pages, more than the {MAX_PAGES} zread-sim resumes"
            )
        try:
            # each page keeps the draft's slug: its file, written or to be, is named by it
            specs: list[PageSpec] = [
                DraftPageSpec(
                    title=p.title, section=p.section, group=p.group, level=p.level, slug=p.slug
                )
                for p in index.pages
            ]
            return msgspec.structs.replace(project, pages=specs)
        except (ValueError, msgspec.ValidationError) as err:
            raise FilesError(f"{where}: {in_words(err)}") from None

    def _wikis(self, wiki: drafts.Wiki, current: str | None, wanted: str) -> list[WikiVersion]:
        """The versions on disk, by id: a directory of ``versions/`` is a version when it
        holds a wiki.json, and its id is its name. Only ``wanted``'s wiki.json is read
        (see :meth:`world`), within one budget of bytes; another version whose name is a
        version id is taken by its name (its wiki.json neither opened nor looked for)
        and dated by it (the local time it was made), which orders it among the others
        and is never shown. A start lists one directory, whatever the project's past."""
        versions = dirfd.open_dir(wiki.fd, "versions", wiki.where("versions"))
        if versions is None:
            return []
        try:
            listed = sorted(dirfd.directories(versions))
            self._listed = frozenset(listed)
            if wanted == EVERY_VERSION:
                first = listed
            elif wanted:
                first = [wanted] if wanted in listed else []
            else:  # current's, or else the newest's that is there
                first = ([current] if current in listed else []) + listed[::-1]
            budget = [_VERSIONS_READ]
            dates: dict[str, str | None] = {}  # None: no wiki.json, not a version
            for name in first:
                if name not in dates:
                    index = self._read_version(wiki, versions, name, budget)
                    dates[name] = None if index is None else index.generated_at
                    if index is not None and wanted != EVERY_VERSION:
                        break
            wikis, zone = [], local_zone()
            for name in listed:
                if name not in dates:
                    entry = _dated_by_id(name, name == current, zone)
                    if entry is not None:
                        wikis.append(entry)
                        continue
                    index = self._read_version(wiki, versions, name, budget)  # not an id
                    dates[name] = None if index is None else index.generated_at
                stamp = dates[name]
                if stamp is not None:
                    wikis.append(_version(name, stamp, name == current))
            return wikis
        finally:
            os.close(versions)

    def _read_version(
        self, wiki: drafts.Wiki, versions: int, name: str, budget: list[int]
    ) -> wf.WikiIndex | None:
        """``versions/<name>/wiki.json``, decoded and kept for browse (None: gone)."""
        version = dirfd.open_dir(versions, name, wiki.where("versions", name))
        if version is None:  # removed while listed
            return None
        try:
            data = dirfd.read_file(version, wf.WIKI_JSON, LIMITS["wiki.json"])
        finally:
            os.close(version)
        if data is None:
            return None
        budget[0] -= len(data)
        if budget[0] < 0:
            raise FilesError(
                f"{wiki.where('versions')}: more than {_VERSIONS_READ >> 20} MiB of "
                "wiki.json in all, the most zread-sim reads"
            )
        where = wiki.where("versions", name, wf.WIKI_JSON)
        index = wiki.decode(data, where)
        self._read_versions[name] = (data, index)
        if index.id != name:
            raise FilesError(f"{where}: id {index.id!r} is not its directory's name")
        return index

    def _open_wiki(self, *, create: bool) -> drafts.Wiki | None:
        """``project/.zread/wiki``, kept open (None: no project side, or none on disk and
        not ``create``)."""
        if self._wiki is not None:
            return self._wiki
        if self.project is None:
            return None
        try:  # the project exists: checked before the run began (simulator.hosts.places)
            project = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            if create:
                raise FilesError(f"{self.project}: the project is gone") from None
            return None
        except OSError as err:
            limits.reraise(err)
            raise FilesError(f"{self.project}: cannot open the project: {err.strerror}") from None
        try:
            fd = dirfd.open_path(project, WIKI_PATH, str(self.project), create=create)
        finally:
            os.close(project)
        if fd is not None:
            self._wiki = drafts.Wiki(fd, self.project.joinpath(*WIKI_PATH))
        return self._wiki

    # -- what a command changes --------------------------------------------------------

    def apply(self, effect: object) -> None:
        """Write what a persisted effect says, where zread writes it."""
        with limits.doing(_DOING.get(type(effect), "writing zread's files")):
            self._apply(effect)

    def _apply(self, effect: object) -> None:
        if isinstance(effect, PageWritten):
            self._page_written(effect)
        elif isinstance(effect, CatalogReady):
            self._catalog_ready(effect)
        elif isinstance(effect, WikiGenerated):
            self._commit(effect)
        elif isinstance(effect, DraftLeft):
            self._leave(effect)
        elif self.user is not None and isinstance(effect, SaveConfig | SaveLogin):
            self.user.apply(effect)

    def _catalog_ready(self, effect: CatalogReady) -> None:
        self._catalog, self._language = effect.pages, effect.language
        self._links = Keyed((page.title, page.slug) for page in effect.pages)
        wiki = self._open_wiki(create=True)
        assert wiki is not None
        if effect.resumed and self._draft is not None:
            # the draft's language, as its id and time: its pages are written in it
            self._language = self._draft.language
            run = self._run = drafts.resume(wiki, self._draft)
            self.log(f"draft {run.id} resumed: {len(run.written)} pages already written")
            return
        now = self._clock()
        run = self._run = drafts.start(wiki, now, self._time(now), listed=self._listed)
        where = wiki.where(run.name, wf.WIKI_JSON)
        run.index = wf.encode_wiki(self._index(effect.pages))
        dirfd.replace_file(run.fd, wf.WIKI_JSON, run.index, where=where)
        self.log(f"catalog ready: {len(effect.pages)} pages, draft {run.id} in {run.name}")

    def _time(self, now: dt.datetime) -> str:
        """``generated_at`` for a catalog made at ``now``: Go's nanoseconds, the clock's
        microseconds with digits below them (a clock gives no more)."""
        nanos = now.microsecond * 1000 + time.time_ns() % 1000
        return go_time(now.astimezone(dt.UTC), nanos)

    def _index(self, pages: tuple[Page, ...] | list[Page]) -> wf.WikiIndex:
        assert self._run is not None
        return wf.wiki_index(self._run.id, self._run.generated_at, self._language, pages)

    def _markdown(self, page: Page) -> bytes:
        if self._sources is None:
            assert self.project is not None
            self._sources = Keyed(project_sources(self.project))
        return page_bytes(page, self._language, self._seed, self._links, self._sources)

    def _page_written(self, effect: PageWritten) -> None:
        run = self._run
        if run is None or not 1 <= effect.page_id <= len(self._catalog):
            return
        page = self._catalog[effect.page_id - 1]
        name = wf.page_file(page.slug)
        assert self._wiki is not None
        where = self._wiki.where(run.name, name)
        dirfd.replace_file(run.fd, name, self._markdown(page), where=where)
        run.written.add(page.slug)

    def _commit(self, effect: WikiGenerated) -> None:
        run, wiki = self._run, self._open_wiki(create=True)
        if run is None or wiki is None:
            return
        # wiki.json lists exactly the pages present: after skip_all only those written,
        # after a resume the catalog as this run names its pages
        pages = [page for page in self._catalog if page.slug in run.written]
        keep = {wf.WIKI_JSON, *(wf.page_file(page.slug) for page in pages)}
        drafts.commit(wiki, run, wf.encode_wiki(self._index(pages)), keep)
        self._run = None
        self.log(f"wiki {run.id}: {len(pages)} of {effect.pages_total} pages, now current")

    def _leave(self, effect: DraftLeft) -> None:
        run, self._run = self._run, None
        if run is not None:
            run.close()
            self.log(f"draft left: {effect.done} pages done, id {run.id} in {run.name}")

    # -- what browse serves --------------------------------------------------------------

    def site(self, version: str) -> DiskSite | None:
        """Version ``version`` of the project's wiki as it is on disk, or None when the
        project has no such version (the scenario's wiki stands in)."""
        if self.project is None or not is_plain_name(version):
            return None
        if version in self._read_versions:
            return DiskSite(self.project, version, *self._read_versions[version])
        return DiskSite.open(self.project, version)

    # -- the rest ------------------------------------------------------------------------

    def log(self, line: str) -> None:
        """Append a line to ``log/zread.log`` (where the user has a ``.zread/``)."""
        if self.user is not None:
            self.user.log(line)

    def close(self) -> None:
        """Let go of the draft this run holds (it stays on disk) and of the directories."""
        if self._run is not None:
            self._run.close()
            self._run = None
        if self._wiki is not None:
            os.close(self._wiki.fd)
            self._wiki = None


@functools.lru_cache(maxsize=8192)
def _version(name: str, stamp: str, current: bool) -> WikiVersion:
    """The (frozen) entry of a version on disk: made once a process, not once a start."""
    return WikiVersion(id=name, timestamp=stamp, current=current)


@functools.lru_cache(maxsize=8192)
def _dated_by_id(name: str, current: bool, zone: object) -> WikiVersion | None:
    """The entry of a version named by its id, dated by it in the local ``zone``
    (:func:`~simulator.formats.ids.local_zone`); None for another name."""
    stamp = version_time(name)
    return None if stamp is None else _version(name, stamp, current)
