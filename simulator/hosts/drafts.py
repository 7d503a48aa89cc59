"""A generate run's draft in the project's ``.zread/wiki``, from its claim to its commit.

Owns: :class:`Wiki` (``project/.zread/wiki`` open by descriptor: where things are, a
wiki.json read bounded, a directory held by ``flock``), :class:`Run` (the draft one run
writes) and its lifecycle: :func:`start`, :func:`resume`, :func:`commit`.

- A draft's id is claimed by creating ``.draft-<id>`` beside ``drafts/`` exclusively
  (``mkdir``; taken: the next second), so two runs never share an id; ``versions/``
  only ever holds whole versions.
- A run owns what it writes in by holding an ``flock`` on the directory's descriptor
  for as long as it runs: ``drafts/``, as zread, or, when a live run already owns
  ``drafts/``, its claim. A draft nobody holds is stale (its run quit or was killed):
  a new draft removes it and its claim; a resume takes it over, re-reads it under the
  lock, and removes what a kill left in it that is not a page.
- At the end the draft holds wiki.json and the pages this run wrote (or resumed), and
  wiki.json lists exactly those; then it is renamed to ``versions/<id>``, whole, and
  ``current`` points at it. A run stopped midway leaves its draft and its claim.

Each step holds the ``flock`` on ``.zread/wiki``'s own descriptor while it changes the
wiki's entries: no lock file. Nothing here follows a link (:mod:`simulator.hosts.dirfd`).

Must not: decide what a page says or when a run ends (the store does), or write
anywhere but ``.zread/wiki``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import stat
from pathlib import Path

from simulator.formats import wiki as wf
from simulator.formats.bounds import LIMITS, FormatError
from simulator.formats.ids import next_version_id
from simulator.hosts import dirfd, limits
from simulator.hosts.dirfd import FilesError

DRAFTS = "drafts"
_CLAIM = ".draft-"
"""``.draft-<id>`` claims a draft's id (and holds the draft when a live run owns
``drafts/``)."""


def claim_name(wiki_id: str) -> str:
    """The directory that claims a draft's id, beside ``drafts/``."""
    return f"{_CLAIM}{wiki_id}"


class Wiki:
    """``project/.zread/wiki``, open by descriptor (``path`` names it in messages)."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path
        self._root = os.fspath(path)

    def where(self, *parts: str) -> str:
        """The path of ``parts`` below the wiki, for a message (a run names a file at
        each write: joined as strings, ~40x cheaper than ``Path.joinpath``)."""
        return os.path.join(self._root, *parts)

    def read_index(self, directory: int, where: str) -> wf.WikiIndex | None:
        """``directory``'s wiki.json (``where`` names it), or None when it has none."""
        data = dirfd.read_file(directory, wf.WIKI_JSON, LIMITS["wiki.json"])
        return None if data is None else self.decode(data, where)

    def decode(self, data: bytes, where: str) -> wf.WikiIndex:
        """A wiki.json's bytes decoded, or :class:`FilesError` naming ``where``."""
        try:
            return wf.decode_wiki(data, where)
        except FormatError as err:
            raise FilesError(str(err)) from None

    def own(self, name: str, *, create: bool) -> int | None:
        """Directory ``name``'s descriptor with its lock held, or None when it is missing
        (and not ``create``) or a live run holds it."""
        fd = dirfd.open_dir(self.fd, name, self.where(name), create=create)
        if fd is None:
            return None
        if not dirfd.try_flock(fd):
            os.close(fd)
            return None
        return fd

    def check_current(self) -> None:
        """A ``current`` that is a directory is refused before anything is written."""
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.lstat("current", dir_fd=self.fd).st_mode):
                raise FilesError(
                    f"{self.where('current')}: a directory, not zread's pointer; "
                    "nothing is written over it"
                )


class Run:
    """The draft one generate run writes: the directory it writes in (``drafts/``, or
    its claim), the claim ``.draft-<id>`` that holds its id, both held locked by
    descriptor for as long as the run goes on, and the slugs of the pages it wrote."""

    def __init__(self, wiki_id: str, generated_at: str, claim: int) -> None:
        self.id = wiki_id
        self.generated_at = generated_at
        self.claim = claim
        self.name = claim_name(wiki_id)
        self.fd = claim
        self.written: set[str] = set()
        self.index = b""
        """The wiki.json this run wrote into its draft (empty: none yet)."""

    def write_in(self, name: str, fd: int) -> None:
        """Write the draft in ``name`` (``drafts/``), not in the claim."""
        self.name, self.fd = name, fd

    def close(self) -> None:
        """Let the locks go (closing a descriptor does); what is on disk stays."""
        for fd in {self.fd, self.claim}:
            if fd >= 0:
                os.close(fd)
        self.fd = self.claim = -1


def start(
    wiki: Wiki, now: dt.datetime, generated_at: str, listed: frozenset[str] = frozenset()
) -> Run:
    """A new draft: the drafts nobody holds removed, an id claimed from ``now``,
    ``drafts/`` owned when no live run holds it (else the draft is written in the
    claim). ``listed``: versions known to be there (their ids are passed over without
    a look; an id not in it is looked up)."""
    with dirfd.flock(wiki.fd):
        _remove_stale(wiki)
        wiki_id, claim = _claim_id(wiki, now, listed)
        run = Run(wiki_id, generated_at, claim)
        drafts = wiki.own(DRAFTS, create=True)
    if drafts is not None:
        run.write_in(DRAFTS, drafts)
    return run


def resume(wiki: Wiki, draft: wf.WikiIndex) -> Run:
    """The draft on disk goes on: owned, re-read, cleaned, its id claimed again.
    ``draft`` is the draft as the run read it when it started."""
    with dirfd.flock(wiki.fd):
        drafts = wiki.own(DRAFTS, create=False)
        if drafts is None:
            raise FilesError(
                f"{wiki.where(DRAFTS)}: another zread run is writing this draft; "
                "wait for it to end, or start over with --draft clear"
            )
        try:
            files = _clean(wiki, drafts, draft)
            claim = wiki.own(claim_name(draft.id), create=True)
            if claim is None:  # pragma: no cover - only drafts/' owner claims its id
                raise FilesError(f"{wiki.where(claim_name(draft.id))}: held by another run")
        except FilesError:
            os.close(drafts)
            raise
    run = Run(draft.id, draft.generated_at, claim)
    run.write_in(DRAFTS, drafts)
    run.written = {p.slug for p in draft.pages if p.file in files}
    return run


def _clean(wiki: Wiki, drafts: int, draft: wf.WikiIndex) -> set[str]:
    """The draft's regular files, once it is held: what a kill left that is not a page
    (a temporary file, a link, a directory) removed. :class:`FilesError` when the draft
    is no longer the one the run started with (another run replaced it meanwhile)."""
    if wiki.read_index(drafts, wiki.where(DRAFTS, wf.WIKI_JSON)) != draft:
        raise FilesError(
            f"{wiki.where(DRAFTS)}: replaced by another zread run since this one "
            "started; run it again to see the draft as it is now"
        )
    files = set()
    for name, regular, is_dir in list(dirfd.entries(drafts)):
        if is_dir:
            dirfd.remove_tree(drafts, name, where=wiki.where(DRAFTS, name))
        elif not regular or dirfd.is_temp(name):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=drafts)
        else:
            files.add(name)
    return files


def _remove_stale(wiki: Wiki) -> None:
    """Remove every draft and claim no live run holds: their runs quit or were killed,
    and this run starts over."""
    for name, _, is_dir in list(dirfd.entries(wiki.fd)):
        if is_dir and (name == DRAFTS or name.startswith(_CLAIM)):
            fd = wiki.own(name, create=False)
            if fd is not None:
                os.close(fd)
                dirfd.remove_tree(wiki.fd, name, where=wiki.where(name))


def _claim_id(wiki: Wiki, now: dt.datetime, listed: frozenset[str]) -> tuple[str, int]:
    """The id of the first free second at or after ``now`` (free: no version and no live
    claim has it), claimed by creating ``.draft-<id>`` exclusively; with the claim's
    descriptor, locked."""
    claims = {name.removeprefix(_CLAIM) for name, _, _ in dirfd.entries(wiki.fd)}
    versions = dirfd.open_dir(wiki.fd, "versions", wiki.where("versions"))
    try:
        taken = _Taken(claims | listed, versions, wiki.where("versions"))
        skip = 0
        while True:
            wiki_id = next_version_id(now, taken, skip)
            skip += 1
            try:
                os.mkdir(claim_name(wiki_id), 0o755, dir_fd=wiki.fd)
            except FileExistsError:
                continue
            claim = wiki.own(claim_name(wiki_id), create=False)
            if claim is not None:
                return wiki_id, claim
    finally:
        if versions is not None:
            os.close(versions)


class _Taken:
    """The ids a new draft cannot have: those in ``claims`` (each claim, and each
    version the run's start listed), or a version's made since (looked up on disk one
    id at a time, not listed: a project's past does not slow a run)."""

    __slots__ = ("claims", "versions", "where")

    def __init__(self, claims: set[str], versions: int | None, where: str = "versions") -> None:
        self.claims, self.versions, self.where = claims, versions, where

    def __contains__(self, wiki_id: object) -> bool:
        if wiki_id in self.claims:
            return True
        if self.versions is None or not isinstance(wiki_id, str):
            return False
        try:
            os.stat(wiki_id, dir_fd=self.versions, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except OSError as error:  # not "taken": every id would be, and the walk endless
            limits.reraise(error)
            raise FilesError(f"{self.where}: cannot look up {wiki_id}: {error.strerror}") from None
        return True


def commit(wiki: Wiki, run: Run, index: bytes, keep: set[str]) -> None:
    """The draft becomes ``versions/<id>`` and ``current`` points at it: first every
    entry but ``keep`` (its wiki.json and the pages written) is removed and ``index``
    (a wiki.json listing exactly those pages) written; then, under the wiki's lock, the
    draft is renamed whole and the claim removed. The run's locks go."""
    for name, _, is_dir in list(dirfd.entries(run.fd)):
        if name not in keep:  # a temporary file a kill left, or anything not this run's
            if is_dir:
                dirfd.remove_tree(run.fd, name, where=wiki.where(run.name, name))
            else:
                os.unlink(name, dir_fd=run.fd)
    if index != run.index:  # skip_all, or a resume: what the draft's wiki.json lists changes
        where = wiki.where(run.name, wf.WIKI_JSON)
        dirfd.replace_file(run.fd, wf.WIKI_JSON, index, where=where)
    with dirfd.flock(wiki.fd):
        wiki.check_current()
        versions = dirfd.open_dir(wiki.fd, "versions", wiki.where("versions"), create=True)
        assert versions is not None
        try:
            _make_room(versions, run.id)
            os.rename(run.name, run.id, src_dir_fd=wiki.fd, dst_dir_fd=versions)
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            raise FilesError(
                f"{wiki.where('versions', run.id)}: written by another program "
                f"meanwhile; the draft stays in {wiki.where(run.name)}"
            ) from None
        finally:
            os.close(versions)
        if run.name != claim_name(run.id):  # the claim, left empty, goes too
            with contextlib.suppress(OSError):
                os.rmdir(claim_name(run.id), dir_fd=wiki.fd)
        pointer = wf.encode_current(run.id)
        dirfd.replace_file(wiki.fd, "current", pointer, where=wiki.where("current"))
    run.close()


def _make_room(versions: int, wiki_id: str) -> None:
    """What stands at ``versions/<id>`` and is not a directory (a link, a file: planted)
    is removed, as a link always is replaced; a directory stays (an empty one is
    replaced by the rename, another refuses it)."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISDIR(os.lstat(wiki_id, dir_fd=versions).st_mode):
            os.unlink(wiki_id, dir_fd=versions)
