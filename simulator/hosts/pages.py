"""What a page the simulator writes into a project says of the project.

Owns: :func:`project_sources`, the project's text files a page may cite (read bounded,
never through a link: the repository may be huge, or hostile), and :func:`page_bytes`,
a page file's bytes, drawn from the seed and cached (the same seed, catalog and sources
give the same page, so a test suite's many runs on one scenario draw each page once).

Must not: write anything.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.hosts import dirfd, limits

if TYPE_CHECKING:
    from simulator.scenario.wiki import Page


_SKIPPED_DIRS = frozenset({".git", ".zread", ".hg", ".svn", "node_modules", "__pycache__"})
_MAX_SOURCES = 400
_MAX_SOURCE_BYTES = 1 << 20
_MAX_FILES_READ = 4000
_MAX_BYTES_READ = 64 << 20
_MAX_DEPTH = 32


def project_sources(project: Path) -> list[tuple[str, int]]:
    """The project's text files a page may cite: (relative path, line count), sorted;
    hidden and tool directories skipped, links neither followed nor read, at most a
    few hundred files of at most 1 MiB each, and at most a few thousand files or
    64 MiB read in all, 32 directories deep (a repository may be huge, or hostile).
    Out of descriptors or memory, it raises rather than cite fewer files."""
    found: list[tuple[str, int]] = []
    budget = [_MAX_FILES_READ, _MAX_BYTES_READ]
    top = len(project.parts)
    for root, dirs, files in os.walk(project, onerror=limits.reraise):  # none is missed
        dirs[:] = _walked(dirs, len(Path(root).parts) - top)
        directory = _open_directory(root, below=root != str(project))
        if directory is None:
            continue
        try:
            for name in sorted(files):
                if budget[0] <= 0 or budget[1] <= 0 or len(found) >= _MAX_SOURCES:
                    return found
                lines = _text_lines(directory, name, budget)
                if lines:
                    found.append((Path(root, name).relative_to(project).as_posix(), lines))
        finally:
            os.close(directory)
    return found


def _walked(dirs: list[str], depth: int) -> list[str]:
    """The directories found at ``depth`` below the project that are walked, sorted:
    none past the deepest, and no hidden or tool directory."""
    if depth >= _MAX_DEPTH:
        return []  # deeper is not walked (os.walk recurses on Python 3.11)
    return sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))


def _open_directory(root: str, *, below: bool) -> int | None:
    """A descriptor of the directory ``root``, or None when it cannot be opened; one
    ``below`` the project is never opened through a link (the project itself may be)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if below:
        flags |= os.O_NOFOLLOW
    try:
        return os.open(root, flags)
    except OSError as err:
        limits.reraise(err)  # out of descriptors: not a directory to skip
        return None


def _text_lines(directory: int, name: str, budget: list[int]) -> int:
    """The lines of the file ``name`` in ``directory``, 0 when it is not a text file a
    page may cite (a link, binary, not UTF-8, too large, empty); what is read is taken
    from ``budget`` (files, bytes)."""
    data = dirfd.read_file(directory, name, _MAX_SOURCE_BYTES)
    budget[0] -= 1
    if data is None:
        return 0
    budget[1] -= len(data)
    if len(data) > _MAX_SOURCE_BYTES or b"\0" in data[:8192]:
        return 0
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return _line_count(data)


def _line_count(data: bytes) -> int:
    """The lines of ``data`` as an editor and git number them: ``\\n``-terminated, a
    last line without one counted. Not ``splitlines()``, which also breaks at form
    feeds, lone CRs and U+2028: a GNU C source with ``^L`` would be cited past its end."""
    lines = data.count(b"\n")
    return lines + 1 if data and not data.endswith(b"\n") else lines


class Keyed(tuple):  # type: ignore[type-arg]
    """A tuple that computes its hash once: a catalog of thousands of pages is a cache
    key for each of its pages, and a tuple would hash all of it every time."""

    _hash: int

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = tuple.__hash__(self)
            return self._hash


@functools.lru_cache(maxsize=4096)
def page_bytes(page: Page, language: str, seed: int, links: Keyed, sources: Keyed) -> bytes:
    """A page file's bytes: ``links`` are the catalog's ``(title, slug)``, ``sources``
    the project's ``(path, lines)``. The same arguments give the same page, so a test
    suite's many runs on one scenario draw each page once, and a page reads as browse
    draws it from the same catalog."""
    from simulator.scenario import wiki

    text = wiki.page_markdown(
        page,
        language="zh" if language == "zh" else "en",
        seed=seed,
        others=links,
        sources=sources,
    )
    return text.encode("utf-8")
