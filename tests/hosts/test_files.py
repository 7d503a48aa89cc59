"""simulator.hosts.files: zread's files as the world, in real directories.

The overlay (what a session starts from), each effect's writes, a whole generate run's
files through the virtual-time runner, and many processes on one HOME at once."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from simulator.core.effects import (
    CatalogReady,
    DraftLeft,
    PageWritten,
    SaveConfig,
    SaveLogin,
    WikiGenerated,
)
from simulator.hosts import zreadfiles as zf
from simulator.hosts.files import FilesError, FileStore, project_sources
from simulator.scenario import load_scenario, wiki
from simulator.virtual import start

CONFIG = """\
language: zh
doc_language: zh
llm:
    provider: z.ai
    model: glm-5
    api_key: ""
    base_url: https://open.bigmodel.cn/api/paas/v4
concurrency:
    max_concurrent: 1
    max_retries: 0
"""
NOON = dt.datetime(2026, 4, 6, 13, 2, 13)


def clock_at(*moments: dt.datetime) -> object:
    times = list(moments)

    def now() -> dt.datetime:
        return times.pop(0) if len(times) > 1 else times[0]

    return now


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 41)))
    (path / "README.md").write_text("# widget\n\nA widget.\n")
    return path


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


def test_config_yaml_is_the_config_and_an_api_key_is_a_login(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    (home / ".zread" / "config.yaml").write_text(CONFIG.replace('api_key: ""', "api_key: sk-1"))
    world = store(home, project).world(load_scenario("default").world)
    assert world.config.language == "zh" and world.config.llm_model == "glm-5"
    assert world.config.max_concurrent == 1 and world.config.max_retries == 0
    assert world.account.logged_in is True
    assert world.account.username == ""  # a key of one's own is nobody's account


def test_login_json_names_the_account(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    (home / ".zread" / "login.json").write_bytes(zf.encode_login("mona", "cn", "glm-4.6"))
    world = store(home, project).world(load_scenario("default").world)
    assert world.account.logged_in is True and world.account.username == "mona"


def test_a_zread_dir_without_login_or_key_is_logged_out(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    (home / ".zread" / "config.yaml").write_text(CONFIG)
    assert store(home, project).world(load_scenario("default").world).account.logged_in is False
    (home / ".zread" / "login.json").write_bytes(zf.encode_login("ada", "cn", "glm-5"))
    world = store(home, project).world(load_scenario("default").world)
    assert world.account.logged_in is True and world.account.username == "ada"


def test_a_config_that_cannot_be_read_is_a_files_error_naming_it(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text("language: [zh\n")
    with pytest.raises(FilesError, match=str(path)):
        store(home, project).world(load_scenario("default").world)
    assert path.read_text() == "language: [zh\n"  # left as it was


def test_the_wiki_on_disk_is_the_worlds_wikis_and_draft(home: Path, project: Path) -> None:
    first = start("generate", "-y", speed=0, home=home, project=project)
    first.wait_done()
    first.close()
    world = store(home, project).world(load_scenario("versions").world)
    (version,) = world.wikis
    assert version.current is True and world.draft is None
    assert (project / ".zread/wiki/current").read_bytes() == f"versions/{version.id}".encode()


# -- the effects -----------------------------------------------------------------------------


def test_save_config_writes_only_what_changed_and_keeps_unknown_keys(
    home: Path, project: Path
) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text(CONFIG + "extra: kept\n")
    initial = {"language": "zh", "max_retries": "0", "llm_model": "glm-5"}
    values = {**initial, "max_retries": "3"}
    store(home, project).apply(SaveConfig(values, initial))
    doc = zf.read_config(path.read_bytes())
    assert doc["concurrency"]["max_retries"] == 3 and doc["extra"] == "kept"
    assert doc["language"] == "zh" and doc["llm"]["model"] == "glm-5"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_save_login_writes_login_json(home: Path, project: Path) -> None:
    store(home, project).apply(SaveLogin("ada", "global", "glm-4.6"))
    record = zf.decode_login((home / ".zread" / "login.json").read_bytes())
    assert (record.username, record.region, record.model) == ("ada", "global", "glm-4.6")
    assert oct((home / ".zread" / "login.json").stat().st_mode & 0o777) == "0o600"


def test_a_run_writes_its_draft_then_commits_it(home: Path, project: Path) -> None:
    pages = wiki.catalog(0, "acme/widget", 3)
    files = store(home, project, NOON)
    files.world(load_scenario("empty").world)
    files.apply(CatalogReady(pages, "en"))
    drafts = project / ".zread/wiki/drafts"
    index = zf.decode_wiki((drafts / "wiki.json").read_bytes())
    assert index.id == "2026-04-06-130213" and [p.slug for p in index.pages] == [
        p.slug for p in pages
    ]
    files.apply(PageWritten(1))
    text = (drafts / f"{pages[0].slug}.md").read_text()
    assert not text.startswith("# ") and "Sources: [" in text
    for cited in (line for line in text.splitlines() if line.startswith("Sources:")):
        path = cited.split("](")[1].split("#L")[0]
        assert (project / path).is_file()
    files.apply(DraftLeft(1))
    assert drafts.is_dir()  # a stopped run leaves its draft
    files.apply(PageWritten(2))
    files.apply(WikiGenerated(pages_done=2, pages_total=3))  # skip_all: 2 pages written
    version = project / ".zread/wiki/versions/2026-04-06-130213"
    committed = zf.decode_wiki((version / "wiki.json").read_bytes())
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


def test_a_resumed_draft_keeps_its_id_and_its_finished_pages(home: Path, project: Path) -> None:
    first = start("generate", "-y", speed=1, home=home, project=project)
    first.wait_for(lambda e: e["vm"]["pages"]["done"] >= 3)
    first.quit()
    first.close()
    drafts = project / ".zread/wiki/drafts"
    draft_id = zf.decode_wiki((drafts / "wiki.json").read_bytes()).id
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


def test_project_sources_lists_text_files_with_their_lines(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "logo.png").write_bytes(b"\x89PNG\0\0\0")
    assert project_sources(project) == [("README.md", 3), ("src/app.py", 40)]


def test_many_processes_saving_config_lose_no_update(home: Path, project: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from simulator.core.effects import SaveConfig
        from simulator.hosts.files import FileStore
        home, key, value = sys.argv[1:]
        FileStore(home, home).apply(SaveConfig({key: value}, {key: ""}))
        """
    )
    keys = ["language", "doc_language", "llm_provider", "llm_model", "llm_base_url", "llm_api_key"]
    children = [
        subprocess.Popen([sys.executable, "-c", script, str(home), key, f"v-{key}"]) for key in keys
    ]
    assert [child.wait(30) for child in children] == [0] * len(keys)
    values = zf.config_values(zf.read_config((home / ".zread" / "config.yaml").read_bytes()))
    assert {key: values[key] for key in keys} == {key: f"v-{key}" for key in keys}
    assert not [p for p in os.listdir(home / ".zread") if p.startswith(".tmp")]


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


@pytest.mark.parametrize(("side", "name", "data"), REFUSED)
@pytest.mark.parametrize("command", ["generate", "config", "login", "browse"])
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


def test_a_config_linked_to_a_file_elsewhere_is_saved_through_the_link(
    home: Path, project: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "zread.yaml").write_text(CONFIG)
    (home / ".zread").mkdir()
    link = home / ".zread" / "config.yaml"
    link.symlink_to(dotfiles / "zread.yaml")
    store(home, project).apply(SaveConfig({"language": "en"}, initial={"language": "zh"}))
    assert link.is_symlink()
    values = zf.config_values(zf.read_config((dotfiles / "zread.yaml").read_bytes()))
    assert values["language"] == "en"
    assert values["llm_model"] == "glm-5"
    assert sorted(p.name for p in dotfiles.iterdir()) == ["zread.yaml"]


@pytest.mark.parametrize("name", ["config.yaml", "login.json"])
def test_a_link_to_nothing_is_refused_and_nothing_is_created_through_it(
    home: Path, project: Path, tmp_path: Path, name: str
) -> None:
    (home / ".zread").mkdir()
    target = tmp_path / "elsewhere" / name
    link = home / ".zread" / name
    link.symlink_to(target)
    effect: object = (
        SaveConfig({"language": "en"}, initial={"language": "zh"})
        if name == "config.yaml"
        else SaveLogin("octocat", "cn", "glm-4.6")
    )
    with pytest.raises(zf.DanglingLinkError, match="does not exist"):
        store(home, project).apply(effect)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert not target.parent.exists()
    assert not [p for p in (home / ".zread").iterdir() if p.name.startswith(".")] or {
        p.name for p in (home / ".zread").iterdir() if p.name.startswith(".")
    } == {".lock"}


def test_a_log_linked_to_nothing_is_not_written_and_the_run_goes_on(
    home: Path, project: Path, tmp_path: Path
) -> None:
    (home / ".zread" / "log").mkdir(parents=True)
    target = tmp_path / "elsewhere" / "zread.log"
    (home / ".zread" / "log" / "zread.log").symlink_to(target)
    session = start("generate", "-y", speed=0, home=home, project=project)
    assert session.wait_done()["error"] == ""
    session.close()
    assert not target.parent.exists()
