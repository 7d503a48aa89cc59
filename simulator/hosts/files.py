"""The world kept in zread's own files: ``$HOME/.zread/`` and the project's ``.zread/wiki/``.

Owns: :class:`FileStore`, the :class:`~simulator.hosts.effects.Store` a process uses
unless ``--no-files``: what a session starts from is the scenario's world with what is
on disk laid over it, and what a command does to the world is written where and how
zread writes it (the bytes: :mod:`simulator.formats`; the user's side:
:mod:`simulator.hosts.userfiles`). Each file is read once, bounded, when the session
starts; what the store writes it keeps in memory and never reads back.

The project's side (``project/.zread/wiki/``), which a cloned repository controls:

- No link is followed. Directories are opened by descriptor with ``O_NOFOLLOW``
  (:mod:`simulator.hosts.dirfd`); a linked ``.zread``, ``wiki``, ``versions`` or
  ``drafts`` is refused (:class:`~simulator.hosts.dirfd.LinkRefused`, exit 2) before
  anything is written; a linked ``current`` or page file is replaced as a link; a
  linked file is never read.
- A draft's id is claimed by creating ``.draft-<id>`` beside ``drafts/`` exclusively
  (``mkdir``; taken: the next second), so two runs never share an id; ``versions/``
  only ever holds whole versions.
- A run owns what it writes in by holding an ``flock`` on the directory's descriptor
  for as long as it runs: ``drafts/``, as zread, or, when a live run already owns
  ``drafts/``, its claim. A draft nobody holds is stale (its run quit or was killed):
  ``-y`` and ``--draft clear`` remove it and its claim, ``--draft resume`` takes it
  over and removes the temporary files a kill left in it.
- At the end the draft holds wiki.json and the pages this run wrote (or resumed), and
  wiki.json lists exactly those; then it is renamed to ``versions/<id>``, whole, and
  ``current`` points at it. A run stopped midway leaves its draft and its claim.
- Nothing else is ever created in the project: the lock is the ``flock`` on
  ``.zread/wiki``'s own descriptor, temporary files live beside what they replace.

What a page says is :mod:`simulator.hosts.pages`'; what browse serves from disk is
:mod:`simulator.hosts.disksite`'s.

Must not: write anywhere but ``home/.zread/`` and ``project/.zread/wiki/``. The wall
clock is read here (a new version's id and time) and by the user's side (its log),
through the ``clock`` given.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from simulator.core.effects import (
    CatalogReady,
    DraftLeft,
    PageWritten,
    SaveConfig,
    SaveLogin,
    WikiGenerated,
)
from simulator.formats import wiki as wf
from simulator.formats.bounds import LIMITS, FormatError
from simulator.formats.ids import go_time, is_plain_name, next_version_id
from simulator.hosts import dirfd
from simulator.hosts.dirfd import FilesError
from simulator.hosts.disksite import WIKI_PATH, DiskSite
from simulator.hosts.pages import Keyed, page_bytes, project_sources
from simulator.hosts.userfiles import UserFiles
from simulator.scenario.world import Draft, PageSpec, Project, WikiVersion, World

if TYPE_CHECKING:
    from simulator.scenario.wiki import Page

__all__ = ["FileStore", "FilesError"]

_DRAFTS = "drafts"
_VERSIONS_READ = 64 << 20
"""The most bytes of wiki.json read from all the versions together."""
_CLAIM = ".draft-"
"""``.draft-<id>`` claims a draft's id (and holds the draft when a live run owns
``drafts/``)."""


class _Run:
    """The draft one generate run writes: the directory it writes in (``drafts/``, or
    its claim), the claim ``.draft-<id>`` that holds its id, both held locked by
    descriptor for as long as the run goes on, and what it wrote."""

    def __init__(self, wiki_id: str, generated_at: str, claim: int) -> None:
        self.id = wiki_id
        self.generated_at = generated_at
        self.claim = claim
        self.name = claim_name(wiki_id)
        self.fd = claim
        self.written: set[str] = set()

    def write_in(self, name: str, fd: int) -> None:
        """Write the draft in ``name`` (``drafts/``), not in the claim."""
        self.name, self.fd = name, fd

    def close(self) -> None:
        """Let the locks go (closing a descriptor does); what is on disk stays."""
        for fd in {self.fd, self.claim}:
            if fd >= 0:
                os.close(fd)
        self.fd = self.claim = -1


def claim_name(wiki_id: str) -> str:
    """The directory that claims a draft's id, beside ``drafts/``."""
    return f"{_CLAIM}{wiki_id}"


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
        self._run: _Run | None = None
        self._links = Keyed()
        self._sources: Keyed | None = None
        self._wiki_fd = -1

    # -- what a session starts from ----------------------------------------------------

    def world(self, base: World, *, seed: int = 0) -> World:
        """``base`` with the files laid over it (see the module docstring)."""
        self._seed = seed
        world = self.user.world(base) if self.user is not None else base
        world = self._project_side(world)
        self.log(f"start: seed {seed}, project {self.project}")
        return world

    def _project_side(self, world: World) -> World:
        wiki_fd = self._open_wiki(create=False)
        if wiki_fd is None:
            return world
        current = None
        self._check_current(wiki_fd)
        data = dirfd.read_file(wiki_fd, "current", LIMITS["current"])
        if data is not None:
            try:
                current = wf.decode_current(data, self._where("current"))
            except FormatError as err:
                raise FilesError(str(err)) from None
        wikis = [
            WikiVersion(id=index.id, timestamp=index.generated_at, current=index.id == current)
            for index in self._versions(wiki_fd)
        ]
        draft: Draft | None = None
        project = world.project
        drafts = dirfd.open_dir(wiki_fd, _DRAFTS, self._where(_DRAFTS))
        if drafts is not None:
            try:
                index = self._read_index(drafts, self._where(_DRAFTS, wf.WIKI_JSON))
                files = {name for name, regular, _ in dirfd.entries(drafts) if regular}
            finally:
                os.close(drafts)
            if index is not None:
                self._draft = index
                finished = [p.slug for p in index.pages if p.file in files]
                draft = Draft(done=len(finished), id=index.id, finished=finished)
                project = self._draft_project(project, index)
        return msgspec.structs.replace(world, wikis=wikis, draft=draft, project=project)

    def _draft_project(self, project: Project, index: wf.WikiIndex) -> Project:
        """The project whose catalog is the draft's pages (as a scenario lists pages)."""
        if not index.pages:
            return project
        try:
            specs = [
                PageSpec(title=p.title, section=p.section, group=p.group, level=p.level)
                for p in index.pages
            ]
            return msgspec.structs.replace(project, pages=specs)
        except (ValueError, msgspec.ValidationError) as err:
            raise FilesError(f"{self._where(_DRAFTS, wf.WIKI_JSON)}: {err}") from None

    def _check_current(self, wiki_fd: int) -> None:
        """A ``current`` that is a directory is refused before anything is written."""
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.lstat("current", dir_fd=wiki_fd).st_mode):
                raise FilesError(
                    f"{self._where('current')}: a directory, not zread's pointer; "
                    "nothing is written over it"
                )

    def _versions(self, wiki_fd: int) -> Iterator[wf.WikiIndex]:
        """The versions on disk, by id; a directory without a wiki.json (an id a run
        claimed) is none."""
        versions = dirfd.open_dir(wiki_fd, "versions", self._where("versions"))
        if versions is None:
            return
        budget = [_VERSIONS_READ]
        try:
            for name, _, is_dir in sorted(dirfd.entries(versions)):
                if not is_dir:
                    continue
                version = dirfd.open_dir(versions, name, self._where("versions", name))
                if version is None:  # pragma: no cover - removed while listed
                    continue
                where = self._where("versions", name, wf.WIKI_JSON)
                try:
                    index = self._read_index(version, where, budget)
                finally:
                    os.close(version)
                if index is not None and index.id != name:
                    raise FilesError(f"{where}: id {index.id!r} is not its directory's name")
                if index is not None:
                    yield index
        finally:
            os.close(versions)

    def _read_index(
        self, directory: int, where: str, budget: list[int] | None = None
    ) -> wf.WikiIndex | None:
        """A wiki.json, or None when there is none; ``budget`` (bytes left to read in
        all, spent here) bounds many files together."""
        data = dirfd.read_file(directory, wf.WIKI_JSON, LIMITS["wiki.json"])
        if data is not None and budget is not None:
            budget[0] -= len(data)
            if budget[0] < 0:
                raise FilesError(
                    f"{self._where('versions')}: more than {_VERSIONS_READ >> 20} MiB of "
                    "wiki.json in all, the most zread-sim reads"
                )
        try:
            return None if data is None else wf.decode_wiki(data, where)
        except FormatError as err:
            raise FilesError(str(err)) from None

    def _where(self, *parts: str) -> str:
        assert self.project is not None
        return str(self.project.joinpath(*WIKI_PATH, *parts))

    def _open_wiki(self, *, create: bool) -> int | None:
        """``project/.zread/wiki``'s descriptor, kept open (None: no project side, or
        none on disk and not ``create``)."""
        if self._wiki_fd >= 0:
            return self._wiki_fd
        if self.project is None:
            return None
        try:
            if create:  # the project named may not exist yet: a test's directory
                self.project.mkdir(parents=True, exist_ok=True)
            project = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise FilesError(f"{self.project}: cannot open the project: {err.strerror}") from None
        try:
            wiki = dirfd.open_path(project, WIKI_PATH, str(self.project), create=create)
        finally:
            os.close(project)
        if wiki is not None:
            self._wiki_fd = wiki
        return wiki

    # -- what a command changes --------------------------------------------------------

    def apply(self, effect: object) -> None:
        """Write what a persisted effect says, where zread writes it."""
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
        wiki_fd = self._open_wiki(create=True)
        assert wiki_fd is not None
        resumed = effect.resumed and self._draft is not None
        with dirfd.flock(wiki_fd):
            if resumed:
                assert self._draft is not None
                self._run = self._resume(wiki_fd, self._draft)
            else:
                self._run = self._start(wiki_fd)
        run = self._run
        if resumed:
            self.log(f"draft {run.id} resumed: {len(run.written)} pages already written")
        else:
            index = self._index(effect.pages)
            where = self._where(run.name, wf.WIKI_JSON)
            dirfd.replace_file(run.fd, wf.WIKI_JSON, wf.encode_wiki(index), where=where)
            self.log(f"catalog ready: {len(effect.pages)} pages, draft {run.id} in {run.name}")

    def _start(self, wiki_fd: int) -> _Run:
        """A new draft: the drafts nobody holds removed, an id claimed, ``drafts/``
        owned when no live run holds it (else the draft is written in the claim)."""
        self._remove_stale(wiki_fd)
        now = self._clock()
        wiki_id, claim = self._claim_id(wiki_fd, now)
        run = _Run(wiki_id, self._time(now), claim)
        drafts = self._own(wiki_fd, _DRAFTS, create=True)
        if drafts is not None:
            run.write_in(_DRAFTS, drafts)
        return run

    def _resume(self, wiki_fd: int, draft: wf.WikiIndex) -> _Run:
        """The draft on disk goes on: owned, its id claimed again, cleaned of the
        temporary files a killed run left."""
        drafts = self._own(wiki_fd, _DRAFTS, create=False)
        if drafts is None:
            raise FilesError(
                f"{self._where(_DRAFTS)}: another zread run is writing this draft; "
                "wait for it to end, or start over with --draft clear"
            )
        try:
            files = self._clean_draft(drafts, draft)
        except FilesError:
            os.close(drafts)
            raise
        claim = self._own(wiki_fd, claim_name(draft.id), create=True)
        if claim is None:  # pragma: no cover - only the owner of drafts/ claims its id
            os.close(drafts)
            raise FilesError(f"{self._where(claim_name(draft.id))}: held by another run")
        run = _Run(draft.id, draft.generated_at, claim)
        run.write_in(_DRAFTS, drafts)
        run.written = {p.slug for p in draft.pages if p.file in files}
        return run

    def _clean_draft(self, drafts: int, draft: wf.WikiIndex) -> set[str]:
        """The draft's regular files, once it is held: what a kill left that is not a
        page (a temporary file, a link, a directory) removed. :class:`FilesError` when
        the draft is no longer the one this run started with (another run replaced it
        meanwhile)."""
        now = self._read_index(drafts, self._where(_DRAFTS, wf.WIKI_JSON))
        if now != draft:
            raise FilesError(
                f"{self._where(_DRAFTS)}: replaced by another zread run since this one "
                "started; run it again to see the draft as it is now"
            )
        files = set()
        for name, regular, is_dir in list(dirfd.entries(drafts)):
            if is_dir:
                dirfd.remove_tree(drafts, name)
            elif not regular or dirfd.is_temp(name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=drafts)
            else:
                files.add(name)
        return files

    def _own(self, wiki_fd: int, name: str, *, create: bool) -> int | None:
        """Directory ``name``'s descriptor with its lock held, or None when a live run
        holds it. ``create``: made when missing."""
        fd = dirfd.open_dir(wiki_fd, name, self._where(name), create=create)
        if fd is None:
            return None
        if not dirfd.try_flock(fd):
            os.close(fd)
            return None
        return fd

    def _remove_stale(self, wiki_fd: int) -> None:
        """Remove every draft and claim no live run holds: their runs quit or were
        killed, and this run starts over."""
        for name, _, is_dir in list(dirfd.entries(wiki_fd)):
            if is_dir and (name == _DRAFTS or name.startswith(_CLAIM)):
                fd = self._own(wiki_fd, name, create=False)
                if fd is not None:
                    os.close(fd)
                    dirfd.remove_tree(wiki_fd, name)

    def _claim_id(self, wiki_fd: int, now: dt.datetime) -> tuple[str, int]:
        """The id of the first free second at or after ``now`` (free: no version and no
        live claim has it), claimed by creating ``.draft-<id>`` exclusively; with the
        claim's descriptor, locked."""
        taken = {name.removeprefix(_CLAIM) for name, _, _ in dirfd.entries(wiki_fd)}
        versions = dirfd.open_dir(wiki_fd, "versions", self._where("versions"))
        if versions is not None:
            try:
                taken.update(name for name, _, _ in dirfd.entries(versions))
            finally:
                os.close(versions)
        skip = 0
        while True:
            wiki_id = next_version_id(now, taken, skip)
            try:
                os.mkdir(claim_name(wiki_id), 0o755, dir_fd=wiki_fd)
            except FileExistsError:
                skip += 1
                continue
            claim = self._own(wiki_fd, claim_name(wiki_id), create=False)
            if claim is not None:
                return wiki_id, claim
            skip += 1  # pragma: no cover - taken over between the mkdir and the lock

    def _time(self, now: dt.datetime) -> str:
        return go_time(now.astimezone(dt.UTC), time.time_ns() % 1_000_000_000)

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
        where = self._where(run.name, name)
        dirfd.replace_file(run.fd, name, self._markdown(page), where=where)
        run.written.add(page.slug)

    def _commit(self, effect: WikiGenerated) -> None:
        run = self._run
        if run is None:
            return
        pages = [page for page in self._catalog if page.slug in run.written]
        keep = {wf.WIKI_JSON, *(wf.page_file(page.slug) for page in pages)}
        for name, _, is_dir in list(dirfd.entries(run.fd)):
            if name not in keep:  # a temporary file a kill left, or anything not this run's
                if is_dir:
                    dirfd.remove_tree(run.fd, name)
                else:
                    os.unlink(name, dir_fd=run.fd)
        # wiki.json lists exactly the pages present: after skip_all only those written,
        # after a resume the catalog as this run names its pages
        index = wf.encode_wiki(self._index(pages))
        where = self._where(run.name, wf.WIKI_JSON)
        dirfd.replace_file(run.fd, wf.WIKI_JSON, index, where=where)
        wiki_fd = self._open_wiki(create=True)
        assert wiki_fd is not None
        with dirfd.flock(wiki_fd):
            versions = dirfd.open_dir(wiki_fd, "versions", self._where("versions"), create=True)
            assert versions is not None
            try:
                self._check_commit(wiki_fd, versions, run)
                os.rename(run.name, run.id, src_dir_fd=wiki_fd, dst_dir_fd=versions)
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                raise FilesError(
                    f"{self._where('versions', run.id)}: written by another program "
                    f"meanwhile; the draft stays in {self._where(run.name)}"
                ) from None
            finally:
                os.close(versions)
            if run.name != claim_name(run.id):  # the claim, left empty, goes too
                with contextlib.suppress(OSError):
                    os.rmdir(claim_name(run.id), dir_fd=wiki_fd)
            current = wf.encode_current(run.id)
            dirfd.replace_file(wiki_fd, "current", current, where=self._where("current"))
        run.close()
        self._run = None
        self.log(f"wiki {run.id}: {len(pages)} of {effect.pages_total} pages, now current")

    def _check_commit(self, wiki_fd: int, versions: int, run: _Run) -> None:
        """Before the draft becomes a version: what stands at ``versions/<id>`` that is
        not a directory (a link, a file: planted) is replaced, as a link always is; a
        ``current`` that is a directory is refused, before anything moves."""
        self._check_current(wiki_fd)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(run.id, dir_fd=versions).st_mode):
                os.unlink(run.id, dir_fd=versions)

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
        if self._wiki_fd >= 0:
            os.close(self._wiki_fd)
            self._wiki_fd = -1
