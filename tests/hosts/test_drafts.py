"""simulator.hosts.drafts: a draft's claim, ownership and commit, in real directories,
with two runs in one process standing for two processes (an ``flock`` is per open
directory, so they exclude each other as processes do)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.formats import wiki as wf
from simulator.hosts import drafts
from simulator.hosts.dirfd import FilesError

NOON = dt.datetime(2026, 4, 6, 13, 2, 13)
STAMP = "2026-04-06T13:02:13Z"


@pytest.fixture
def wiki(tmp_path: Path) -> Iterator[drafts.Wiki]:
    path = tmp_path / ".zread" / "wiki"
    path.mkdir(parents=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    yield drafts.Wiki(fd, path)
    os.close(fd)


def names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def index_of(run: drafts.Run, *slugs: str) -> wf.WikiIndex:
    pages = [
        wf.PageEntry(slug=s, title=s, file=f"{s}.md", section="S", level="Beginner") for s in slugs
    ]
    return wf.WikiIndex(id=run.id, generated_at=STAMP, language="en", pages=pages)


def write_pages(run: drafts.Run, *slugs: str) -> None:
    for slug in slugs:
        with open(f"/proc/self/fd/{run.fd}/{slug}.md", "w") as page:
            page.write(f"# {slug}\n")
        run.written.add(slug)


def test_a_start_claims_its_id_exclusively_and_owns_drafts(wiki: drafts.Wiki) -> None:
    run = drafts.start(wiki, NOON, STAMP)
    assert (run.id, run.name) == ("2026-04-06-130213", "drafts")
    assert names(wiki.path) == [".draft-2026-04-06-130213", "drafts"]
    (wiki.path / "versions" / "2026-04-06-130214").mkdir(parents=True)  # a version
    beside = drafts.start(wiki, NOON, STAMP)
    assert beside.id == "2026-04-06-130215"  # the next second neither claimed nor a version
    assert beside.name == ".draft-2026-04-06-130215"  # drafts/ is held: its claim holds it
    third = drafts.start(wiki, NOON, STAMP)  # the live claims are not stale: kept
    assert third.id == "2026-04-06-130216"
    for held in (run, beside, third):
        held.close()


def test_a_commit_leaves_a_whole_version_and_nothing_else(wiki: drafts.Wiki) -> None:
    run = drafts.start(wiki, NOON, STAMP)
    write_pages(run, "1-a", "2-b")
    (wiki.path / "drafts" / ".1-a.md.0000beef.tmp").write_text("half")
    (wiki.path / "drafts" / "notes.txt").write_text("not a page")
    keep = {wf.WIKI_JSON, "1-a.md", "2-b.md"}
    drafts.commit(wiki, run, wf.encode_wiki(index_of(run, "1-a", "2-b")), keep)
    version = wiki.path / "versions" / run.id
    assert names(version) == sorted(keep)
    assert names(wiki.path) == ["current", "versions"]
    assert (wiki.path / "current").read_text() == f"versions/{run.id}"
    assert run.fd == run.claim == -1  # its locks went with the commit


def test_a_resume_refuses_a_draft_held_by_a_live_run(wiki: drafts.Wiki) -> None:
    live = drafts.start(wiki, NOON, STAMP)
    index = index_of(live, "1-a")
    (wiki.path / "drafts" / wf.WIKI_JSON).write_bytes(wf.encode_wiki(index))
    with pytest.raises(FilesError, match="another zread run is writing this draft"):
        drafts.resume(wiki, index)
    live.close()
    resumed = drafts.resume(wiki, index)  # the run ended: the draft is anybody's
    assert (resumed.id, resumed.name) == (live.id, "drafts")
    resumed.close()


def test_a_new_start_removes_drafts_and_claims_nobody_holds(wiki: drafts.Wiki) -> None:
    quit_run = drafts.start(wiki, NOON, STAMP)
    write_pages(quit_run, "1-a")
    quit_run.close()
    later = drafts.start(wiki, NOON + dt.timedelta(hours=1), STAMP)
    assert names(wiki.path) == [".draft-2026-04-06-140213", "drafts"]
    assert names(wiki.path / "drafts") == []  # the stale draft's pages went
    later.close()


def test_an_id_that_cannot_be_looked_up_is_an_error_not_taken(tmp_path: Path) -> None:
    """Were every id taken when the lookup fails, the walk for a free one never ends."""
    (tmp_path / "versions").write_text("")  # not a folder: each lookup fails (ENOTDIR)
    fd = os.open(tmp_path / "versions", os.O_RDONLY)
    try:
        taken = drafts._Taken({"20260406-130213"}, fd, "wiki/versions")
        assert "20260406-130213" in taken  # a claim needs no lookup
        with pytest.raises(FilesError, match="wiki/versions: cannot look up 20260406-130214"):
            _ = "20260406-130214" in taken
    finally:
        os.close(fd)
