"""simulator.hosts.files: zread's files as the world, in real directories.

The project's side: the overlay (what a session starts from), a run's draft and its
commit, drafts of runs that quit or were killed, runs at once on one project, links a
repository planted, and what browse serves from disk. (HOME's side:
tests/hosts/test_userfiles.py.)"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest

from simulator.core.driver import EVERY_VERSION
from simulator.core.effects import CatalogReady, DraftLeft, PageWritten, WikiGenerated
from simulator.formats.ids import version_id
from simulator.formats.wiki import decode_wiki, encode_wiki, wiki_index
from simulator.hosts.dirfd import FilesError, LinkRefused
from simulator.hosts.files import FileStore
from simulator.scenario import load_scenario, wiki
from simulator.virtual import start
from tests.e2e.helpers import run_starved
from tests.samples import ZREAD_DEFAULT

NOON = dt.datetime(2026, 4, 6, 13, 2, 13)


def clock_at(*moments: dt.datetime) -> object:
    times = list(moments)

    def now() -> dt.datetime:
        return times.pop(0) if len(times) > 1 else times[0]

    return now


def store(home: Path | None, project: Path, *moments: dt.datetime) -> FileStore:
    return FileStore(home, project, clock=clock_at(*(moments or (NOON,))))  # type: ignore[arg-type]


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- the overlay -------------------------------------------------------------------------


def test_without_any_file_the_scenario_stands_in(home: Path, project: Path) -> None:
    base = load_scenario("default").world
    before = snapshot(home.parent)
    assert store(home, project).world(base) == base
    assert snapshot(home.parent) == before  # reading writes nothing, not even a log


def test_the_wiki_on_disk_is_the_worlds_wikis_and_draft(home: Path, project: Path) -> None:
    first = start("generate", "-y", speed=0, home=home, project=project)
    first.wait_done()
    first.close()
    world = store(home, project).world(load_scenario("versions").world)
    (version,) = world.wikis
    assert version.current is True and world.draft is None
    assert (project / ".zread/wiki/current").read_bytes() == f"versions/{version.id}".encode()


# -- the effects -----------------------------------------------------------------------------


def test_a_run_writes_its_draft_then_commits_it(home: Path, project: Path) -> None:
    pages = wiki.catalog(0, "acme/widget", 3)
    files = store(home, project, NOON)
    files.world(load_scenario("empty").world)
    files.apply(CatalogReady(pages, "en"))
    drafts = project / ".zread/wiki/drafts"
    index = decode_wiki((drafts / "wiki.json").read_bytes())
    assert index.id == "2026-04-06-130213" and [p.slug for p in index.pages] == [
        p.slug for p in pages
    ]
    files.apply(PageWritten(1))
    text = (drafts / f"{pages[0].slug}.md").read_text()
    assert not text.startswith("# ") and "Sources: [" in text
    for cited in (line for line in text.splitlines() if line.startswith("Sources:")):
        path = cited.split("](")[1].split("#L")[0]
        assert (project / path).is_file()
    files.apply(PageWritten(2))
    files.apply(WikiGenerated(pages_done=2, pages_total=3))  # skip_all: 2 pages written
    version = project / ".zread/wiki/versions/2026-04-06-130213"
    committed = decode_wiki((version / "wiki.json").read_bytes())
    assert sorted(p.name for p in version.iterdir()) == sorted(
        ["wiki.json", f"{pages[0].slug}.md", f"{pages[1].slug}.md"]
    )
    assert [p.slug for p in committed.pages] == [pages[0].slug, pages[1].slug]
    assert not drafts.exists()
    assert (project / ".zread/wiki/current").read_bytes() == b"versions/2026-04-06-130213"


def test_two_runs_in_one_second_get_two_ids(home: Path, project: Path) -> None:
    pages = wiki.catalog(0, "acme/widget", 2)
    for _ in range(2):
        files = store(home, project, NOON)
        files.world(load_scenario("empty").world)
        files.apply(CatalogReady(pages, "en"))
        files.apply(PageWritten(1))
        files.apply(PageWritten(2))
        files.apply(WikiGenerated(2, 2))
    versions = sorted(p.name for p in (project / ".zread/wiki/versions").iterdir())
    assert versions == ["2026-04-06-130213", "2026-04-06-130214"]
    assert (project / ".zread/wiki/current").read_text() == "versions/2026-04-06-130214"


def test_a_new_id_passes_the_versions_the_start_listed_without_a_look_at_each(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions = project / ".zread/wiki/versions"
    for n in range(120):  # every second from NOON on is a version's
        moment = NOON + dt.timedelta(seconds=n)
        made = versions / version_id(moment)
        made.mkdir(parents=True)
        index = wiki_index(made.name, f"{moment:%Y-%m-%dT%H:%M:%S}Z", "en", [])
        (made / "wiki.json").write_bytes(encode_wiki(index))
    files = store(home, project, NOON)
    files.world(load_scenario("empty").world)
    looked: list[object] = []
    real_stat = os.stat

    def counted(path: object, *args: object, **kwargs: object) -> os.stat_result:
        looked.append(path)
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counted)
    files.apply(CatalogReady(wiki.catalog(0, "acme/widget", 1), "en"))
    monkeypatch.undo()
    made = version_id(NOON + dt.timedelta(seconds=120))
    assert files._run is not None and files._run.id == made
    assert looked.count(made) == 1 and len(looked) < 5  # the id taken, looked up once


def test_a_resumed_draft_keeps_its_id_and_its_finished_pages(home: Path, project: Path) -> None:
    first = start("generate", "-y", speed=1, home=home, project=project)
    first.wait_for(lambda e: e["vm"]["pages"]["done"] >= 3)
    first.quit()
    first.close()
    drafts = project / ".zread/wiki/drafts"
    draft_id = decode_wiki((drafts / "wiki.json").read_bytes()).id
    finished = sorted(p.name for p in drafts.glob("*.md"))
    assert len(finished) >= 3
    again = start("generate", speed=1, home=home, project=project)
    assert again.last["vm"]["select_action"]["scenario"] == "has_draft"
    assert again.last["vm"]["select_action"]["draft_done"] == len(finished)
    again.send("select_action", action="resume")
    tasks = again.last["vm"]["pages"]["tasks"]
    resumed = sorted(f"{t['slug']}.md" for t in tasks if t["state"] == "resumed")
    assert resumed == finished and again.last["vm"]["catalog"]["status"] == "resumed"
    again.wait_done()
    again.close()
    assert (project / ".zread/wiki/current").read_text() == f"versions/{draft_id}"


def test_yes_alone_ignores_a_draft_and_starts_over(home: Path, project: Path) -> None:
    first = start("generate", "-y", speed=1, home=home, project=project)
    first.wait_for(lambda e: e["vm"]["pages"]["done"] >= 2)
    first.quit()
    first.close()
    again = start("generate", "-y", speed=1, home=home, project=project)
    assert again.events[0]["vm"]["select_action"]["scenario"] == "empty"
    done = again.wait_done()
    again.close()
    assert all(t["state"] == "done" for t in done["vm"]["pages"]["tasks"])


def test_resuming_a_draft_whose_id_is_a_version_ends_in_error(home: Path, project: Path) -> None:
    first = start("generate", "-y", speed=0, home=home, project=project)
    first.wait_done()
    first.close()
    version = (project / ".zread/wiki/current").read_text().removeprefix("versions/")
    drafts = project / ".zread/wiki/drafts"
    drafts.mkdir()
    source = project / ".zread/wiki/versions" / version / "wiki.json"
    (drafts / "wiki.json").write_bytes(source.read_bytes())
    again = start("generate", "--draft", "resume", speed=0, home=home, project=project)
    last = again.last
    again.close()
    assert last["done"] is True and last["vm"]["state"] == "error"
    assert version in last["vm"]["error"]


def test_nothing_is_written_outside_the_two_zread_dirs(home: Path, project: Path) -> None:
    before = {k: v for k, v in snapshot(project).items() if not k.startswith(".zread/")}
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    session = start("login", speed=0, home=home, project=project)
    session.send("select_region", region="cn")
    session.wait_state("select_model")
    session.send("select_model", model="glm-4.6")
    session.wait_done()
    session.close()
    after = {k: v for k, v in snapshot(project).items() if not k.startswith(".zread/")}
    assert after == before
    assert {p.name for p in home.iterdir()} == {".zread"}
    assert json.loads((home / ".zread" / "login.json").read_text())["model"] == "glm-4.6"


# -- files refused, links --------------------------------------------------------------


def tree(root: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry under root: a file's bytes or a link's target, and its mtime (ns)."""
    out: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        mtime = path.lstat().st_mtime_ns
        if path.is_symlink():
            out[key] = (os.readlink(path), mtime)
        elif path.is_file():
            out[key] = (path.read_bytes(), mtime)
        else:
            out[key] = ("<dir>", mtime)
    return out


REFUSED = [
    pytest.param("home", ".zread/config.yaml", b"language: [unclosed\n", id="config-yaml"),
    pytest.param("home", ".zread/config.yaml", b"concurrency: {max_retries: x}\n", id="config-int"),
    pytest.param("home", ".zread/login.json", b"{not json", id="login-json"),
    pytest.param("project", ".zread/wiki/drafts/wiki.json", b'{"id": 5}', id="draft-index"),
    pytest.param(
        "project", ".zread/wiki/versions/2026-04-06-130213/wiki.json", b"[]", id="version-index"
    ),
]


@pytest.mark.parametrize(
    ("side", "name", "data", "command"),
    [
        pytest.param(*case.values, command, id=f"{command}-{case.id}")
        for case in REFUSED
        for command in ("generate", "config", "login", "browse")
        # config and login never open the project
        if case.values[0] == "home" or command in ("generate", "browse")
    ],
)
def test_a_refused_file_and_everything_around_it_are_left_as_they_were(
    home: Path, project: Path, side: str, name: str, data: bytes, command: str
) -> None:
    path = (home if side == "home" else project) / name
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    before = tree(home), tree(project)
    with pytest.raises(FilesError, match=str(path.name)):
        start(command, *(["-y"] if command == "generate" else []), home=home, project=project)
    assert (tree(home), tree(project)) == before


@pytest.mark.parametrize("name", ["config.yaml", "login.json"])

# -- runs that quit, were killed, or run at once ----------------------------------------


def run_to_page(files: FileStore, pages: tuple[wiki.Page, ...], done: int) -> None:
    files.world(load_scenario("empty").world)
    files.apply(CatalogReady(pages, "en"))
    for n in range(1, done + 1):
        files.apply(PageWritten(n))


def test_a_run_holds_its_draft_so_a_second_run_works_beside_it(home: Path, project: Path) -> None:
    pages = wiki.catalog(0, "acme/widget", 3)
    first, second = store(home, project, NOON), store(home, project, NOON)
    run_to_page(first, pages, 1)
    run_to_page(second, pages, 3)  # same second, first still running
    wiki_dir = project / ".zread/wiki"
    assert sorted(p.name for p in wiki_dir.iterdir()) == [
        ".draft-2026-04-06-130213",  # the first's claim
        ".draft-2026-04-06-130214",  # the second's claim, and its draft
        "drafts",  # the first's draft
    ]
    second.apply(WikiGenerated(3, 3))
    first.apply(PageWritten(2))
    first.apply(PageWritten(3))
    first.apply(WikiGenerated(3, 3))
    for wiki_id in ("2026-04-06-130213", "2026-04-06-130214"):
        version = wiki_dir / "versions" / wiki_id
        index = decode_wiki((version / "wiki.json").read_bytes())
        assert index.id == wiki_id and len(index.pages) == 3
        assert sorted(p.name for p in version.iterdir()) == sorted(
            ["wiki.json", *(f"{p.slug}.md" for p in pages)]
        )
    assert sorted(p.name for p in wiki_dir.iterdir()) == ["current", "versions"]
    assert (wiki_dir / "current").read_text() == "versions/2026-04-06-130213"  # the last commit


def test_a_draft_nobody_holds_is_removed_by_a_new_run_with_its_claim(
    home: Path, project: Path
) -> None:
    pages = wiki.catalog(0, "acme/widget", 2)
    quitter = store(home, project, NOON)
    run_to_page(quitter, pages, 1)
    quitter.apply(DraftLeft(1))
    quitter.close()
    wiki_dir = project / ".zread/wiki"
    assert sorted(p.name for p in wiki_dir.iterdir()) == [".draft-2026-04-06-130213", "drafts"]
    later = dt.datetime(2026, 4, 6, 14, 0, 0)
    again = store(home, project, later)
    run_to_page(again, pages, 2)
    again.apply(WikiGenerated(2, 2))
    assert sorted(p.name for p in wiki_dir.iterdir()) == ["current", "versions"]
    assert [p.name for p in (wiki_dir / "versions").iterdir()] == ["2026-04-06-140000"]


def test_resuming_a_draft_a_live_run_holds_is_refused(home: Path, project: Path) -> None:
    pages = wiki.catalog(0, "acme/widget", 2)
    live = store(home, project, NOON)
    run_to_page(live, pages, 1)
    other = store(home, project, NOON)
    world = other.world(load_scenario("empty").world)
    assert world.draft is not None and world.draft.finished == [pages[0].slug]
    with pytest.raises(FilesError, match="another zread run is writing this draft"):
        other.apply(CatalogReady(pages, "en", resumed=True))
    live.close()


def test_a_resume_removes_a_killed_runs_temporary_files_and_commits_only_pages(
    home: Path, project: Path
) -> None:
    pages = wiki.catalog(0, "acme/widget", 3)
    killed = store(home, project, NOON)
    run_to_page(killed, pages, 1)
    killed.close()  # as a kill: the lock goes with the process, the draft stays
    drafts = project / ".zread/wiki/drafts"
    (drafts / f".{pages[1].slug}.md.1234abcd.tmp").write_text("half a pa")
    (drafts / "notes.txt").write_text("not a page")
    resumed = store(home, project, NOON)
    world = resumed.world(load_scenario("empty").world)
    assert world.draft is not None and world.draft.finished == [pages[0].slug]
    resumed.apply(CatalogReady(pages, "en", resumed=True))
    assert not (drafts / f".{pages[1].slug}.md.1234abcd.tmp").exists()
    resumed.apply(PageWritten(2))
    resumed.apply(PageWritten(3))
    resumed.apply(WikiGenerated(3, 3))
    version = project / ".zread/wiki/versions/2026-04-06-130213"
    assert sorted(p.name for p in version.iterdir()) == sorted(
        ["wiki.json", *(f"{p.slug}.md" for p in pages)]
    )


def test_no_lock_or_temporary_file_is_left_anywhere(home: Path, project: Path) -> None:
    before = set(snapshot(project))
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    after = set(snapshot(project)) - before
    assert after and all(name.startswith(".zread/wiki/") for name in after)
    assert not [name for name in after if name.rsplit("/", 1)[-1].startswith(".")]


# -- links a repository planted --------------------------------------------------------


@pytest.mark.parametrize(
    "linked", [".zread", ".zread/wiki", ".zread/wiki/versions", ".zread/wiki/drafts"]
)
def test_a_linked_directory_is_refused_and_nothing_is_written(
    home: Path, project: Path, tmp_path: Path, linked: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep")
    link = project / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    before = snapshot(tmp_path)
    with pytest.raises(LinkRefused, match=f"{link}: a symbolic link"):
        start("generate", "-y", speed=0, home=home, project=project)
    assert snapshot(tmp_path) == before
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


@pytest.mark.parametrize("name", ["current", "versions/{id}/wiki.json"])
def test_a_linked_file_is_replaced_as_a_link_never_written_through(
    home: Path, project: Path, tmp_path: Path, name: str
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    victim.chmod(0o640)
    wiki_dir = project / ".zread/wiki"
    path = wiki_dir / name.format(id="2026-04-06-130213")
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    files = store(home, project, NOON)
    world = files.world(load_scenario("empty").world)
    assert world.wikis == []  # a linked file is never read
    pages = wiki.catalog(0, "acme/widget", 1)
    files.apply(CatalogReady(pages, "en"))
    files.apply(PageWritten(1))
    files.apply(WikiGenerated(1, 1))
    assert victim.read_text() == "keep" and oct(victim.stat().st_mode & 0o777) == "0o640"
    current = wiki_dir / "current"
    assert not current.is_symlink() and current.read_text().startswith("versions/")


def test_a_page_file_planted_as_a_link_in_the_draft_is_replaced(
    home: Path, project: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    pages = wiki.catalog(0, "acme/widget", 2)
    files = store(home, project, NOON)
    run_to_page(files, pages, 0)
    planted = project / ".zread/wiki/drafts" / f"{pages[0].slug}.md"
    planted.symlink_to(victim)
    files.apply(PageWritten(1))
    assert victim.read_text() == "keep" and not planted.is_symlink()


def test_config_and_login_never_open_the_project(home: Path, project: Path, tmp_path: Path) -> None:
    (project / ".zread").symlink_to(tmp_path, target_is_directory=True)
    session = start("config", speed=0, home=home, project=project)
    session.quit()
    session.close()
    assert json.dumps(session.last["vm"])  # it ran, and the link was never followed


def test_a_link_planted_at_the_versions_id_is_replaced_not_followed(
    home: Path, project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pages = wiki.catalog(0, "acme/widget", 1)
    files = store(home, project, NOON)
    run_to_page(files, pages, 1)
    versions = project / ".zread/wiki/versions"
    versions.mkdir()
    (versions / "2026-04-06-130213").symlink_to(elsewhere, target_is_directory=True)
    files.apply(WikiGenerated(1, 1))
    version = versions / "2026-04-06-130213"
    assert not version.is_symlink() and (version / "wiki.json").is_file()
    assert list(elsewhere.iterdir()) == []


def test_a_current_that_is_a_directory_is_refused_and_the_draft_stays(
    home: Path, project: Path
) -> None:
    pages = wiki.catalog(0, "acme/widget", 1)
    files = store(home, project, NOON)
    run_to_page(files, pages, 1)
    current = project / ".zread/wiki/current"
    current.mkdir()
    with pytest.raises(FilesError, match=f"^{current}: a directory, not zread's pointer"):
        files.apply(WikiGenerated(1, 1))
    assert (project / ".zread/wiki/drafts/wiki.json").is_file()
    assert not (project / ".zread/wiki/versions").exists()  # checked before anything moved


# -- what a hostile repository may hold ---------------------------------------------------


def test_a_version_whose_id_is_not_its_directorys_name_is_refused(
    home: Path, project: Path
) -> None:
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    versions = project / ".zread/wiki/versions"
    (version,) = versions.iterdir()
    renamed = version.rename(versions / "2020-01-01-000000")
    with pytest.raises(FilesError, match=f"^{renamed}/wiki.json: id '{version.name}' is not"):
        store(home, project).world(load_scenario("empty").world)


def test_a_current_that_is_a_directory_is_refused_when_the_run_starts(
    home: Path, project: Path
) -> None:
    current = project / ".zread/wiki/current"
    current.mkdir(parents=True)
    with pytest.raises(FilesError, match=f"^{current}: a directory, not zread's pointer"):
        store(home, project).world(load_scenario("empty").world)


def test_a_draft_page_a_scenario_could_not_list_is_one_error_naming_the_draft(
    home: Path, project: Path
) -> None:
    drafts = project / ".zread/wiki/drafts"
    drafts.mkdir(parents=True)
    page = {"slug": "1-p", "title": " ", "file": "1-p.md", "section": "S", "level": "Beginner"}
    index = {"id": "2026-04-06-130213", "generated_at": "2026-04-06T13:02:13Z"}
    (drafts / "wiki.json").write_text(json.dumps({**index, "language": "en", "pages": [page]}))
    with pytest.raises(FilesError, match=f"^{drafts}/wiki.json: title must not be empty"):
        store(home, project).world(load_scenario("empty").world)


def test_the_versions_are_read_within_one_budget(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        session = start("generate", "-y", speed=0, home=home, project=project)
        session.wait_done()
        session.close()
    monkeypatch.setattr("simulator.hosts.files._VERSIONS_READ", 4000)  # about two
    with pytest.raises(FilesError, match=r"versions: more than 0 MiB of wiki\.json in all"):
        store(home, project).world(load_scenario("empty").world, versions=EVERY_VERSION)
    store(home, project).world(load_scenario("empty").world)  # current's only: within it


def _many_versions(home: Path, project: Path, count: int) -> list[str]:
    """``count`` versions in ``project``: one generated, the others copies of it, each
    with its own id (a minute apart, oldest first), the last one current."""
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    versions = project / ".zread/wiki/versions"
    (made,) = os.listdir(versions)
    data = json.loads((versions / made / "wiki.json").read_text())
    first = dt.datetime(2026, 1, 1, 9, 0, 0)
    ids = []
    for n in range(count):
        moment = first + dt.timedelta(minutes=n)
        wiki_id = moment.strftime("%Y-%m-%d-%H%M%S")
        folder = versions / wiki_id
        folder.mkdir()
        data |= {"id": wiki_id, "generated_at": f"{moment:%Y-%m-%dT%H:%M:%S}.5Z"}
        (folder / "wiki.json").write_text(json.dumps(data))
        ids.append(wiki_id)
    import shutil

    shutil.rmtree(versions / made)
    (project / ".zread/wiki/current").write_text(f"versions/{ids[-1]}")
    return ids


def _opens_at_start(home: Path, project: Path, *argv: str) -> int:
    """How many files a session's start opens (``open`` audit events, in a process of
    its own: an audit hook stays for its process's life)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from simulator.virtual import start\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: opened.append(1) if event == 'open' else None)\n"
        f"session = start(*{list(argv)!r}, speed=0, home={str(home)!r}, project={str(project)!r})\n"
        "count = len(opened)\n"
        "session.close()\n"
        "print(count)\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_a_start_opens_as_many_files_in_500_versions_as_in_5(tmp_path: Path) -> None:
    counts = {}
    for count in (5, 500):
        home, project = tmp_path / f"home{count}", tmp_path / f"project{count}"
        home.mkdir()
        project.mkdir()
        _many_versions(home, project, count)
        counts[count] = (
            _opens_at_start(home, project, "generate"),
            _opens_at_start(home, project, "browse", "--version", "2026-01-01-090100"),
        )
    assert counts[5] == counts[500]


def test_a_start_dates_the_versions_it_does_not_read_by_their_ids(
    home: Path, project: Path
) -> None:
    ids = _many_versions(home, project, 4)
    world = store(home, project).world(load_scenario("empty").world)
    assert [v.id for v in world.wikis] == ids
    assert [v.current for v in world.wikis] == [False, False, False, True]
    assert world.wikis[-1].timestamp == "2026-01-01T09:03:00.5Z"  # read: its wiki.json's
    local = [dt.datetime(2026, 1, 1, 9, n).astimezone(dt.UTC) for n in range(3)]
    assert [v.timestamp for v in world.wikis[:3]] == [f"{t:%Y-%m-%dT%H:%M:%S}Z" for t in local]
    every = store(home, project).world(load_scenario("empty").world, versions=EVERY_VERSION)
    assert [v.timestamp for v in every.wikis] == [f"2026-01-01T09:0{n}:00.5Z" for n in range(4)]


def test_without_a_current_version_the_newest_is_read(home: Path, project: Path) -> None:
    ids = _many_versions(home, project, 3)
    (project / ".zread/wiki/current").unlink()
    world = store(home, project).world(load_scenario("empty").world)
    assert world.wikis[-1].id == ids[-1]
    assert world.wikis[-1].timestamp == "2026-01-01T09:02:00.5Z"
    assert not any(v.current for v in world.wikis)


def test_a_version_whose_wiki_json_is_broken_is_refused_only_when_read(
    home: Path, project: Path
) -> None:
    ids = _many_versions(home, project, 3)
    (project / ".zread/wiki/versions" / ids[0] / "wiki.json").write_text("{not json")
    world = store(home, project).world(load_scenario("empty").world)
    assert [v.id for v in world.wikis] == ids  # generate shows current's date only
    with pytest.raises(FilesError, match=ids[0]):
        store(home, project).world(load_scenario("empty").world, versions=EVERY_VERSION)


def test_a_draft_replaced_after_the_run_started_is_not_resumed(home: Path, project: Path) -> None:
    pages = wiki.catalog(0, "acme/widget", 2)
    first = store(home, project, NOON)
    run_to_page(first, pages, 2)
    first.close()  # killed: a whole draft is left
    waiting = store(home, project, NOON)  # reads the draft, then waits at its gate
    assert waiting.world(load_scenario("empty").world).draft is not None
    later = dt.datetime(2026, 4, 6, 15, 0, 0)
    other = store(home, project, later)
    run_to_page(other, pages, 1)  # -y: starts over, a new draft
    other.close()
    with pytest.raises(FilesError, match="replaced by another zread run since this one"):
        waiting.apply(CatalogReady(pages, "en", resumed=True))
    assert not (project / ".zread/wiki/versions").exists() or not list(
        (project / ".zread/wiki/versions").iterdir()
    )


def write_draft(project: Path, language: str, pages: list[dict[str, str]]) -> Path:
    """A draft on disk as another zread left it: its wiki.json listing ``pages``
    (slug, title; the file named by the slug); its ``drafts/`` directory."""
    drafts = project / ".zread/wiki/drafts"
    drafts.mkdir(parents=True)
    entries = [
        {
            "slug": p["slug"],
            "title": p["title"],
            "file": f"{p['slug']}.md",
            "section": "S",
            "level": "Beginner",
        }
        for p in pages
    ]
    index = {"id": "2026-04-06-130213", "generated_at": "2026-04-06T13:02:13Z"}
    (drafts / "wiki.json").write_text(
        json.dumps({**index, "language": language, "pages": entries}, ensure_ascii=False)
    )
    return drafts


def test_a_resumed_draft_keeps_its_own_slugs_and_its_finished_pages(
    home: Path, project: Path
) -> None:
    # zread's slugs are not always the simulator's formula: a short one, a long one
    long = "2-" + "the-request-lifecycle-from-socket-to-handler-" * 3 + "x" * 32
    assert len(long) == 169
    drafts = write_draft(
        project,
        "en",
        [
            {"slug": "1-intro-page", "title": "Introduction"},
            {"slug": long, "title": "The Request Lifecycle"},
            {"slug": "3-setup", "title": "Setting Up"},
        ],
    )
    (drafts / "1-intro-page.md").write_text("Written by zread itself.\n")
    (drafts / f"{long}.md").write_text("Also zread's.\n")
    session = start("generate", "--draft", "resume", speed=0, home=home, project=project)
    first = session.last
    assert first["vm"]["select_action"]["draft_done"] == 2
    done = session.wait_done()
    session.close()
    tasks = {t["slug"]: t["state"] for t in done["vm"]["pages"]["tasks"]}
    assert tasks == {"1-intro-page": "resumed", long: "resumed", "3-setup": "done"}
    version = project / ".zread/wiki/versions/2026-04-06-130213"
    committed = decode_wiki((version / "wiki.json").read_bytes())
    assert [p.slug for p in committed.pages] == ["1-intro-page", long, "3-setup"]
    files = sorted(p.name for p in version.iterdir() if p.name != "wiki.json")
    assert files == sorted(["1-intro-page.md", f"{long}.md", "3-setup.md"])
    assert (version / "1-intro-page.md").read_text() == "Written by zread itself.\n"
    assert (version / f"{long}.md").read_text() == "Also zread's.\n"


def test_a_resumed_draft_keeps_its_language_whatever_the_config_says(
    home: Path, project: Path
) -> None:
    drafts = write_draft(
        project,
        "zh",
        [
            {"slug": "1-xiang-mu-gai-lan", "title": "项目概览"},
            {"slug": "2-kuai-su-kai-shi", "title": "快速开始"},
        ],
    )
    (drafts / "1-xiang-mu-gai-lan.md").write_text("项目的概览。\n")
    (home / ".zread").mkdir()
    config = ZREAD_DEFAULT.decode().replace("zh", "en").replace('api_key: ""', "api_key: sk-0")
    (home / ".zread/config.yaml").write_text(config)
    session = start("generate", "--draft", "resume", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    version = project / ".zread/wiki/versions/2026-04-06-130213"
    assert decode_wiki((version / "wiki.json").read_bytes()).language == "zh"
    written = (version / "2-kuai-su-kai-shi.md").read_text()
    assert re.search(r"[\u4e00-\u9fff]", written.split("\n\n")[0]), written[:200]


def test_a_draft_of_more_pages_than_a_run_resumes_is_one_error_naming_it(
    home: Path, project: Path
) -> None:
    pages = [{"slug": f"{n}-p", "title": "P"} for n in range(1, 5002)]
    drafts = write_draft(project, "en", pages)
    with pytest.raises(FilesError, match=f"^{drafts}/wiki.json: 5001 pages, more than the 5000"):
        store(home, project).world(load_scenario("empty").world)


def test_browse_serves_the_wiki_json_the_start_read_without_reading_it_again(
    home: Path, project: Path
) -> None:
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    version_id = (project / ".zread/wiki/current").read_text().removeprefix("versions/")
    index = project / ".zread/wiki/versions" / version_id / "wiki.json"
    files = store(home, project)
    files.world(load_scenario("empty").world)
    read_at_start = index.read_bytes()
    index.write_bytes(read_at_start.replace(b'"language": "en"', b'"language": "zh"'))
    site = files.site(version_id)
    assert site is not None and site.wiki_json() == read_at_start
    files.close()


def test_a_current_folder_without_its_wiki_json_gives_way_to_the_newest_that_has_one(
    home: Path, project: Path
) -> None:
    ids = _many_versions(home, project, 3)
    (project / ".zread/wiki/versions" / ids[-1] / "wiki.json").unlink()
    world = store(home, project).world(load_scenario("empty").world)
    assert [v.id for v in world.wikis] == ids[:2]  # a folder without one is no version
    assert world.wikis[-1].timestamp == "2026-01-01T09:01:00.5Z"  # read: the newest's


def test_a_folder_whose_name_is_not_an_id_is_read_to_know_it(home: Path, project: Path) -> None:
    ids = _many_versions(home, project, 2)
    odd = project / ".zread/wiki/versions/mine"
    odd.mkdir()
    (odd / "wiki.json").write_text("{}")
    with pytest.raises(FilesError, match="mine"):
        store(home, project).world(load_scenario("empty").world)
    (odd / "wiki.json").unlink()
    world = store(home, project).world(load_scenario("empty").world)
    assert [v.id for v in world.wikis] == ids


# -- out of descriptors --------------------------------------------------------------------


def test_out_of_descriptors_the_wiki_on_disk_is_never_taken_for_none(
    home: Path, project: Path
) -> None:
    """However few descriptors are left, the world read is the one on disk, or the
    one line that says none was left: never a world without the wiki."""
    first = start("generate", "-y", speed=0, home=home, project=project)
    first.wait_done()
    first.close()
    setup = (
        "from simulator.errors import OutOfResources\n"
        "from simulator.hosts.files import FileStore\n"
        "from simulator.scenario import load_scenario\n"
        "base = load_scenario('empty').world"
    )
    code = (
        "try:\n"
        f"    world = FileStore({str(home)!r}, {str(project)!r}).world(base)\n"
        "    print('wikis', len(world.wikis))\n"
        "except OutOfResources as err:\n"
        "    print(err)\n"
    )
    said = set()
    for spare in range(8):
        done = run_starved(setup, code, spare)
        assert done.returncode == 0, done.stderr
        said.add(done.stdout)
    out = "out of file descriptors while reading {} (ulimit -n is 256)\n"
    assert "wikis 1\n" in said and out.format("the wiki") in said
    assert said <= {"wikis 1\n", out.format("the wiki"), out.format(home / ".zread")}
