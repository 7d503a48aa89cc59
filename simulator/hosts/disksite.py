"""One version of the project's wiki, served by browse from its files.

Owns: :class:`DiskSite` (a :class:`~simulator.hosts.wikiserver.Site`): the index is the
version's wiki.json, a page its ``.md`` file, read when asked for, each time from the
project down by directory descriptor, following no link. A page that is not a regular
file reached so, or is too large, or is not UTF-8, is not served (the server answers
404) and, the first time, one line on stderr says why (``zread-sim: browse: <path>: not
served: a link``; or ``reached through a link``, ``missing``, ``not a regular file``,
``not readable``, ``over 8 MiB``, ``not UTF-8``, ``not a plain name``, ``no project
directory``, ``not in a directory``): a cloned repository can plant a link to any file.
Out of descriptors or memory is none of these (:mod:`~simulator.hosts.limits`): it is
raised, so a version is not taken for missing, and a page asked for then is a ``500``.

Must not: write anything.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from pathlib import Path

from simulator.formats import wiki as wf
from simulator.formats.bounds import LIMITS
from simulator.formats.ids import is_plain_name
from simulator.hosts import dirfd, limits

WIKI_PATH = (".zread", "wiki")
"""Where a project keeps zread's wiki, below the project."""


class DiskSite:
    """One version of the project's wiki served from its files (see
    :class:`~simulator.hosts.wikiserver.Site`): the index is its wiki.json, a page is its
    ``.md`` file, read when asked for, each time from the project down without
    following a link; a page that is not a regular file reached so is not served (the
    server answers 404) and a line on stderr says why."""

    def __init__(self, project: Path, version: str, wiki_json: bytes, index: wf.WikiIndex) -> None:
        self.project = project.name
        self._path = project
        self._version_dir = version
        self._json = wiki_json
        self.version = index.id
        self.pages = tuple(index.pages)
        self._files = {page.slug: page.file for page in index.pages}
        self._refused: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, project: Path, version: str) -> DiskSite | None:
        """The version's site, or None when it has no readable wiki.json there."""
        try:
            data = _read_in_wiki(project, ("versions", version, wf.WIKI_JSON), LIMITS["wiki.json"])
        except _Unread:
            return None
        except OSError as err:
            limits.reraise(err)  # out of descriptors: not a version that is missing
            return None
        where = project.joinpath(*WIKI_PATH, "versions", version, wf.WIKI_JSON)
        return cls(project, version, data, wf.decode_wiki(data, str(where)))

    def markdown(self, slug: str) -> str | None:
        name = self._files.get(slug)
        if name is None:
            return None
        parts = ("versions", self._version_dir, name)
        try:
            data = _read_in_wiki(self._path, parts, LIMITS["page"])
            if len(data) > LIMITS["page"]:
                raise _Unread(f"over {LIMITS['page'] >> 20} MiB")
            return data.decode("utf-8")
        except _Unread as why:
            problem = str(why)
        except OSError as err:  # a read that failed midway
            limits.reraise(err)  # out of descriptors: the server answers 500, not 404
            problem = "not readable"
        except UnicodeDecodeError:
            problem = "not UTF-8"
        self._refuse(name, problem)
        return None

    def _refuse(self, name: str, problem: str) -> None:
        """One stderr line per page, the first time it is refused (a web page could ask
        for it again and again), in one write (the server's threads share stderr)."""
        with self._lock:
            if name in self._refused:
                return
            self._refused.add(name)
        where = self._path.joinpath(*WIKI_PATH, "versions", self._version_dir, name)
        line = f"zread-sim: browse: {where}: not served: {problem}\n"
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(line)
            sys.stderr.flush()

    def wiki_json(self) -> bytes:
        return self._json


class _Unread(Exception):
    """Why a file below the wiki was not read: the end of its stderr line."""


def _read_in_wiki(project: Path, parts: tuple[str, ...], limit: int) -> bytes:
    """A file below ``project/.zread/wiki`` reached through no link (at most ``limit +
    1`` bytes); :class:`_Unread` saying why when there is none so (also for a part that
    is not one plain name: ``..`` goes nowhere)."""
    if not all(is_plain_name(part) for part in parts):
        raise _Unread("not a plain name")
    try:
        top = os.open(project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        limits.reraise(err)
        raise _Unread("no project directory") from None
    try:
        directory = dirfd.open_path(top, (*WIKI_PATH, *parts[:-1]), str(project))
    except dirfd.LinkRefused:
        raise _Unread("reached through a link") from None
    except dirfd.FilesError:
        raise _Unread("not in a directory") from None
    finally:
        os.close(top)
    if directory is None:
        raise _Unread("missing")
    try:
        data = dirfd.read_file(directory, parts[-1], limit)
        if data is None:
            raise _Unread(_not_read(directory, parts[-1]))
        return data
    finally:
        os.close(directory)


def _not_read(directory: int, name: str) -> str:
    """Why ``name`` in ``directory`` was not read as a regular file."""
    try:
        mode = os.lstat(name, dir_fd=directory).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        limits.reraise(err)
        return "not readable"
    if stat.S_ISLNK(mode):
        return "a link"
    return "not readable" if stat.S_ISREG(mode) else "not a regular file"
