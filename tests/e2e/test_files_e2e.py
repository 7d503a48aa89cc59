"""zread's files end to end: the flows of zread's clients, over real processes.

Each test makes its own HOME and project in tmp_path (the project a small git
repository: source files of known lengths in subdirectories, one commit), runs the
simulator as those clients run zread (a ``zread`` written by ``zread-sim install`` and
found on PATH, in an environment of HOME, PATH, LANG, LC_ALL and TMPDIR only, with
stdin null or on pipes, through a shell where a script would), and checks what the
clients read afterwards: ``.zread/wiki/current``, the version's ``wiki.json`` and its
page files, the citations in the pages, ``~/.zread/config.yaml`` and ``login.json``.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.samples import ZREAD_DEFAULT

from .helpers import EXIT_WITHIN, Proc, Program, install_zread, write_scenario

Event = dict[str, Any]

SOURCES = {
    "README.md": 4,
    "src/app/main.py": 12,
    "src/app/util.py": 30,
    "lib/core/engine.go": 45,
    "docs/guide/intro.md": 7,
}
"""The project's files and their line counts."""

SAMPLE_CONFIG = ZREAD_DEFAULT.decode()
"""config.yaml as zread writes it (its defaults)."""
API_KEY_LINE = '    api_key: ""\n'

ID = re.compile(r"\d{4}-\d{2}-\d{2}-\d{6}")
GO_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z")
LEVELS = ("Beginner", "Intermediate", "Advanced")
PAGE_KEYS = (
    ["slug", "title", "file", "section", "level"],
    ["slug", "title", "file", "section", "group", "level"],
)
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
CITED = re.compile(r"(?P<path>[^#]+)#L(?P<a>\d+)-L(?P<b>\d+)")
PINYIN_SLUG = re.compile(r"[0-9]+-[a-z0-9_-]+")
CJK = re.compile(r"[\u4e00-\u9fff]")
QUIT = {"type": "quit", "params": {}}
TIMEOUT = 10.0


# -- the places ---------------------------------------------------------------------------


def git(project: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(project), *args],
        capture_output=True,
        timeout=30,
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    )
    return done.stdout.decode()


def make_project(root: Path) -> Path:
    """A git repository of :data:`SOURCES`, committed once."""
    project = root / "project"
    for path, lines in SOURCES.items():
        file = project / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("".join(f"{path} line {n}\n" for n in range(1, lines + 1)))
    git(project.parent, "init", "-q", str(project))
    git(project, "add", "-A")
    git(
        project,
        "-c",
        "user.name=Ada",
        "-c",
        "user.email=ada@example.invalid",
        "-c",
        "commit.gpgsign=false",
        "commit",
        "-q",
        "-m",
        "initial",
    )
    return project


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``installs(*options)``: the folder of a ``zread`` installed with ``options``,
    installed once for the module's tests that run the same one (they only read it)."""
    folders: dict[tuple[str, ...], Path] = {}

    def install(*options: str) -> Path:
        if options not in folders:
            folders[options] = install_zread(tmp_path_factory.mktemp("bin"), *options)
        return folders[options]

    return install


def make_home(root: Path, config: str | None = None) -> Path:
    """A fresh HOME; with ``config``, its ``.zread/config.yaml`` (0600)."""
    home = root / "home"
    home.mkdir()
    if config is not None:
        user = home / ".zread"
        user.mkdir(mode=0o700)
        (user / "config.yaml").write_text(config)
        (user / "config.yaml").chmod(0o600)
    return home


def with_key(config: str, key: str = "sk-sim-0123456789") -> str:
    assert API_KEY_LINE in config
    return config.replace(API_KEY_LINE, f"    api_key: {key}\n")


def environment(root: Path, home: Path, bin_dir: Path, **extra: str) -> dict[str, str]:
    """A child's whole environment, as a sandboxing client builds it: HOME, PATH (the
    installed ``zread`` first), LANG, LC_ALL, TMPDIR."""
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.defpath}",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": str(tmp),
    }
    env.update(extra)
    return env


def zread(
    *argv: str, env: Mapping[str, str], cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """``zread *argv`` found on PATH, stdin null, as a hub or a job spawns it."""
    return subprocess.run(
        ["zread", *argv],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def local_now(env: Mapping[str, str]) -> dt.datetime:
    """The wall-clock time in the child's environment (its time zone, not this one's)."""
    done = subprocess.run(
        ["date", "+%Y-%m-%d-%H%M%S"], env=dict(env), capture_output=True, timeout=10, check=True
    )
    return dt.datetime.strptime(done.stdout.decode().strip(), "%Y-%m-%d-%H%M%S")


def strict_events(stdout: bytes) -> list[Event]:
    """Every stdout line, each of which must be a JSON object (a strict client)."""
    events = [json.loads(line) for line in stdout.splitlines()]
    assert events, stdout
    assert all(isinstance(event, dict) for event in events)
    return events


def snapshot(root: Path, *, skip: str = "") -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` (but those under ``skip``): its bytes and mode."""
    found = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if skip and (name == skip or name.startswith(f"{skip}/")):
            continue
        if path.is_file() or path.is_symlink():
            found[name] = (path.read_bytes(), path.stat().st_mode)
        elif path.is_dir():
            found[name + "/"] = (b"", path.stat().st_mode)
    return found


def temporary_files(*roots: Path) -> list[str]:
    return [
        str(path)
        for root in roots
        for path in root.rglob("*")
        if path.name.endswith((".tmp", "~")) or path.name.startswith(".tmp")
    ]


def running_tasks(event: Event) -> int:
    return sum(task["state"] == "running" for task in event["vm"]["pages"]["tasks"])


def task_slugs(event: Event, state: str) -> list[str]:
    return [task["slug"] for task in event["vm"]["pages"]["tasks"] if task["state"] == state]


# -- what a reader reads -----------------------------------------------------------------


def wiki_root(project: Path) -> Path:
    return project / ".zread" / "wiki"


def go_indented(document: Any) -> bytes:
    """``document`` as Go's ``json.MarshalIndent(v, "", "  ")`` writes it."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.encode()


def current_id(project: Path) -> str:
    """The id ``current`` names: exactly ``versions/<id>``, no newline, no BOM."""
    data = (wiki_root(project) / "current").read_bytes()
    assert re.fullmatch(rb"versions/\d{4}-\d{2}-\d{2}-\d{6}", data), data
    return data.decode().removeprefix("versions/")


def check_index(directory: Path, *, pages_on_disk: bool = True) -> dict[str, Any]:
    """``directory/wiki.json`` as zread writes it; its document."""
    raw = (directory / "wiki.json").read_bytes()
    document = json.loads(raw)
    assert list(document) == ["id", "generated_at", "language", "pages"]
    assert raw == go_indented(document), "2-space indent, non-ASCII raw, no trailing newline"
    assert not raw.endswith(b"\n")
    assert ID.fullmatch(document["id"]), document["id"]
    assert GO_UTC.fullmatch(document["generated_at"]), document["generated_at"]
    assert document["language"] in ("en", "zh")
    slugs, numbers = [], []
    for page in document["pages"]:
        assert list(page) in PAGE_KEYS, page
        assert page.get("group", "x") != "", "group is omitted when empty"
        assert page["level"] in LEVELS, page
        number, dash, _ = page["slug"].partition("-")
        assert number.isdigit() and dash, page
        numbers.append(int(number))
        assert page["file"] == f"{page['slug']}.md", page
        assert page["title"] and page["section"], page
        if pages_on_disk:
            assert (directory / page["file"]).is_file(), page
        slugs.append(page["slug"])
    assert len(set(slugs)) == len(slugs), "slugs are unique"
    assert numbers == sorted(set(numbers)) and numbers[:1] != [0], "n is the catalog order"
    return dict(document)


def check_page(project: Path, text: str, slugs: set[str]) -> int:
    """A page as a reader checks it; how many citations it has. Every ``Sources:`` line
    cites real files of the project with a line range inside each; every other link
    is another page's slug (or a URL)."""
    assert not text.startswith("# "), "no leading H1"
    citations = 0
    for line in text.splitlines():
        if not line.startswith("Sources:"):
            continue
        items = LINK.findall(line)
        assert items, line
        assert LINK.sub("", line.removeprefix("Sources:")).strip(" ,") == "", line
        for _, target in items:
            cited = CITED.fullmatch(target)
            assert cited, line
            path, first, last = cited["path"], int(cited["a"]), int(cited["b"])
            assert not path.startswith(("/", ".zread/")), line
            file = project / path
            assert file.is_file(), f"{line}: no such file in the project"
            assert 1 <= first <= last <= newline_lines(file.read_bytes()), line
            citations += 1
    for _, target in LINK.findall(text):
        if "#L" in target or "://" in target or target.startswith("#"):
            continue
        assert target in slugs, f"a link to {target!r}, which is not a page"
    return citations


def newline_lines(data: bytes) -> int:
    """The lines of a file as an editor, git and a reader's ``#L`` anchors number them:
    ``\\n``-terminated, a last line without one counted (a form feed or a lone CR
    starts no line)."""
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def check_version(project: Path, wiki_id: str, catalog: set[str] | None = None) -> dict[str, Any]:
    """Everything a reader checks of one version; its wiki.json document. Links go to
    the pages of the ``catalog`` (default: the version's own; a partial wiki's pages
    were written for the whole catalog)."""
    directory = wiki_root(project) / "versions" / wiki_id
    document = check_index(directory)
    assert document["id"] == wiki_id
    slugs = catalog or {page["slug"] for page in document["pages"]}
    cited = sum(
        check_page(project, (directory / page["file"]).read_text("utf-8"), slugs)
        for page in document["pages"]
    )
    assert cited > 0, "a project with files gets citations"
    return document


def versions(project: Path) -> list[str]:
    root = wiki_root(project) / "versions"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


# -- 1. the sandboxed wiki job ------------------------------------------------------------


def test_a_sandboxed_wiki_job_gets_a_wiki_every_reader_check_holds(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project = make_project(tmp_path)
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG))
    env = environment(tmp_path, home, installs("--speed", "0"))
    assert sorted(env) == ["HOME", "LANG", "LC_ALL", "PATH", "TMPDIR"]
    home_before = snapshot(home, skip=".zread")

    version = zread("version", "--stdio", env=env, cwd=project)
    assert version.returncode == 0, version.stderr
    last = strict_events(version.stdout)[-1]
    assert last["done"] is True
    assert last["vm"]["version"] == "0.2.13"

    started = local_now(env)
    done = zread("generate", "--draft", "clear", "--yes", "--stdio", env=env, cwd=project)
    finished = local_now(env)
    events = strict_events(done.stdout)
    for event in events:  # what makes the job quit
        assert event["error"] == "", event
        assert event["vm"]["state"] != "error", event
        assert not {"retry", "skip_all"} & set(event["waiting_for"]), event
    assert done.returncode == 0, done.stderr
    assert events[-1]["done"] is True
    assert events[-1]["vm"]["state"] == "done"
    assert [e["done"] for e in events].count(True) == 1

    wiki_id = current_id(project)
    made = dt.datetime.strptime(wiki_id, "%Y-%m-%d-%H%M%S")
    assert started <= made <= finished + dt.timedelta(seconds=1), "local time, at the catalog"
    document = check_version(project, wiki_id)
    assert len(document["pages"]) >= 2
    numbers = [int(p["slug"].split("-")[0]) for p in document["pages"]]
    assert numbers == list(range(1, len(numbers) + 1)), "a whole wiki: <n> is 1..N"
    assert [p["slug"] for p in document["pages"]] == task_slugs(events[-1], "done")
    stamp = dt.datetime.fromisoformat(document["generated_at"][:19]).replace(tzinfo=dt.UTC)
    now = dt.datetime.now(dt.UTC)
    assert now - dt.timedelta(seconds=60) <= stamp <= now

    changed = [line[3:] for line in git(project, "status", "--porcelain", "-uall").splitlines()]
    assert changed, "the wiki is in the project"
    assert all(path.startswith(".zread/") for path in changed), changed
    assert snapshot(home, skip=".zread") == home_before
    assert not (wiki_root(project) / "drafts").exists()


def test_citations_stay_inside_files_with_form_feeds_and_carriage_returns(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    # GNU C sources separate pages with ^L, old Mac files end lines with a lone CR:
    # splitlines() counts each as a line, and a 3-line file was cited at #L14-L15
    project = tmp_path / "project"
    project.mkdir()
    (project / "getopt.c").write_bytes(b"int a;\n" + b"\f\n" * 1 + b"\f" * 200 + b"int b;\n")
    (project / "notes.txt").write_bytes(b"one\r" * 200 + b"two\r\nthree")
    home = make_home(tmp_path)
    env = environment(tmp_path, home, installs("--speed", "0"))
    done = zread("generate", "-y", "--stdio", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    check_version(project, current_id(project))


# -- 2. the desktop hub -------------------------------------------------------------------

HELP_PROBES = {
    "generate": ["--stdio", "Generate wiki documentation", "--yes", "--draft", "--skip-failed"],
    "login": ["--stdio", "Login flow", "--custom"],
    "update": ["--stdio", "Update Zread to the latest version"],
}


def hub_generate(env: Mapping[str, str], project: Path) -> str:
    """``generate --stdio --yes`` with stdin null, read as the hub reads it; the new
    ``current``."""
    done = zread("generate", "--stdio", "--yes", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    events = []
    for line in done.stdout.splitlines():  # the hub skips what is not JSON
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    phases = [e["vm"].get("state") or e["vm"]["catalog"]["status"] for e in events]
    assert phases[-1] == "done"
    last = events[-1]["vm"]["pages"]
    assert last["done"] == last["total"] > 0
    current = (wiki_root(project) / "current").read_text("utf-8-sig").strip()
    assert current and not os.path.isabs(current)
    target = (wiki_root(project) / current).resolve()
    assert target.is_relative_to(wiki_root(project).resolve())
    document = json.loads((target / "wiki.json").read_bytes())
    assert document["pages"]
    assert all((target / page["file"]).is_file() for page in document["pages"])
    return current


def test_a_desktop_hub_probes_spawns_with_null_stdin_and_sees_the_pointer_move(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project = make_project(tmp_path)
    home = make_home(tmp_path)
    env = environment(tmp_path, home, installs("--speed", "0"))
    probe = zread("version", "--stdio", env=env, cwd=project)
    assert probe.returncode == 0
    assert json.loads(probe.stdout.splitlines()[-1])["vm"]["version"] == "0.2.13"
    for command, texts in HELP_PROBES.items():
        helped = zread(command, "--help", env=env, cwd=project)
        assert helped.returncode == 0, (command, helped.stderr)
        for text in texts:
            assert text.encode() in helped.stdout, (command, text)

    first = hub_generate(env, project)
    second = hub_generate(env, project)
    assert second != first
    assert versions(project) == sorted(p.removeprefix("versions/") for p in (first, second))
    for current in (first, second):
        check_version(project, current.removeprefix("versions/"))


# -- 3. the supervisor script -------------------------------------------------------------


def supervisor_env(
    tmp_path: Path, installs: Callable[..., Path], *install: str
) -> tuple[Path, dict[str, str]]:
    project = make_project(tmp_path)
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG.replace("max_retries: 0", "max_retries: 2")))
    return project, environment(tmp_path, home, installs(*install))


def test_a_supervisor_quits_mid_run_then_resumes_the_draft(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project, env = supervisor_env(tmp_path, installs, "--speed", "0.3")
    drafts = wiki_root(project) / "drafts"
    with Program("zread generate -y --stdio", env=env, cwd=project, shell=True) as run:
        run.read_until(lambda e: e["vm"]["pages"]["done"] >= 3, timeout=TIMEOUT)
        assert drafts.is_dir() and (drafts / "wiki.json").is_file()
        run.send(QUIT)
        stopped = run.read_until_done(TIMEOUT)
        run.finish()
    finished = task_slugs(stopped, "done")
    assert 3 <= len(finished) < stopped["vm"]["pages"]["total"]
    draft = check_index(drafts, pages_on_disk=False)
    on_disk = sorted(p.stem for p in drafts.glob("*.md"))
    assert on_disk == sorted(finished), "each finished page, and only those, is in the draft"
    written = {slug: (drafts / f"{slug}.md").read_bytes() for slug in on_disk}
    assert versions(project) == []
    assert not (wiki_root(project) / "current").exists()

    env["ZREAD_SIM_SPEED"] = "0"  # the supervisor's own environment reaches the child
    resume = "zread generate --draft resume --stdio -y"
    with Program(resume, env=env, cwd=project, shell=True) as run:
        first = run.read_until(lambda e: e["vm"]["catalog"]["status"] != "idle", TIMEOUT)
        assert first["vm"]["catalog"]["status"] == "resumed"
        assert sorted(task_slugs(first, "resumed")) == on_disk
        last = run.read_until_done(TIMEOUT)
        run.finish()
    assert last["vm"]["state"] == "done"
    assert last["vm"]["catalog"]["status"] == "resumed"
    assert sorted(task_slugs(last, "resumed")) == on_disk
    assert current_id(project) == draft["id"], "the version keeps the draft's id"
    assert versions(project) == [draft["id"]]
    assert not drafts.exists()
    document = check_version(project, draft["id"])
    assert [p["slug"] for p in document["pages"]] == [p["slug"] for p in draft["pages"]]
    version = wiki_root(project) / "versions" / draft["id"]
    assert {slug: (version / f"{slug}.md").read_bytes() for slug in on_disk} == written


KEEPS_FAILING = """\
extends = "failing-pages"

[[failures]]
point = "page"
target = 3
first = 3

[[failures]]
point = "page"
target = 7
first = 99
"""
"""failing-pages, but page 7 fails its manual retries too."""


@pytest.mark.parametrize(
    ("scenario", "left_out"),
    [("failing-pages", []), ("keeps-failing", [7])],
    ids=["retries-succeed", "page-7-keeps-failing"],
)
def test_a_supervisor_retries_each_failed_page_then_skips_the_rest(
    tmp_path: Path, installs: Callable[..., Path], scenario: str, left_out: list[int]
) -> None:
    if scenario == "keeps-failing":
        scenario = write_scenario(tmp_path, scenario, KEEPS_FAILING)
    project, env = supervisor_env(tmp_path, installs, "--speed", "0", "--scenario", scenario)
    retried: list[int] = []
    skipped = False
    with Program("zread generate -y --stdio", env=env, cwd=project, shell=True) as run:
        event = run.read_event(TIMEOUT)
        while not event["done"]:
            if "retry" in event["waiting_for"]:
                assert event["vm"]["pages"]["waiting_retry"] is True
                failed = [t["id"] for t in event["vm"]["pages"]["tasks"] if t["state"] == "failed"]
                fresh = [task_id for task_id in failed if task_id not in retried]
                if fresh:
                    retried.append(fresh[0])
                    run.send({"type": "retry", "params": {"task_id": fresh[0]}})
                else:
                    skipped = True
                    run.send({"type": "skip_all", "params": {}})
                event = run.read_event(TIMEOUT)
                assert event["error"] == "", event
                continue
            event = run.read_event(TIMEOUT)
        run.finish()
    assert sorted(retried) == [3, 7]
    assert skipped is bool(left_out)
    assert event["vm"]["state"] == "done"
    done = task_slugs(event, "done")
    failed = [task["id"] for task in event["vm"]["pages"]["tasks"] if task["state"] == "failed"]
    assert failed == left_out
    wiki_id = current_id(project)
    catalog = {task["slug"] for task in event["vm"]["pages"]["tasks"]}
    document = check_version(project, wiki_id, catalog)
    assert [p["slug"] for p in document["pages"]] == done, "only the pages written"
    directory = wiki_root(project) / "versions" / wiki_id
    assert sorted(p.stem for p in directory.glob("*.md")) == sorted(done)
    assert not (wiki_root(project) / "drafts").exists()


def test_a_failed_catalog_quit_at_its_gate_writes_nothing(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project, env = supervisor_env(tmp_path, installs, "--speed", "0", "--scenario", "catalog-error")
    with Program("zread generate -y --stdio", env=env, cwd=project, shell=True) as run:
        gate = run.read_until(lambda e: "retry_catalog" in e["waiting_for"], TIMEOUT)
        assert gate["waiting_for"] == ["quit", "retry_catalog"]
        assert gate["vm"]["catalog"]["status"] == "error"
        run.send(QUIT)
        run.read_until_done(TIMEOUT)
        run.finish()
    assert git(project, "status", "--porcelain", "-uall") == ""
    assert not (project / ".zread").exists()


def test_a_supervisor_retries_a_failed_catalog_to_a_wiki(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project, env = supervisor_env(tmp_path, installs, "--speed", "0", "--scenario", "catalog-error")
    with Program("zread generate -y --stdio", env=env, cwd=project, shell=True) as run:
        run.read_until(lambda e: "retry_catalog" in e["waiting_for"], TIMEOUT)
        assert not (project / ".zread").exists(), "a failed catalog writes nothing"
        run.send({"type": "retry_catalog", "params": {}})
        last = run.read_until_done(TIMEOUT)
        run.finish()
    assert last["vm"]["state"] == "done"
    check_version(project, current_id(project))


# -- 4. browse ----------------------------------------------------------------------------


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def generated(
    tmp_path: Path, installs: Callable[..., Path], runs: int = 1
) -> tuple[Path, dict[str, str]]:
    """A project with ``runs`` wikis generated in it, and the environment that made them."""
    project = make_project(tmp_path)
    home = make_home(tmp_path)
    env = environment(tmp_path, home, installs("--speed", "0"))
    for _ in range(runs):
        done = zread("generate", "-y", "--stdio", env=env, cwd=project)
        assert done.returncode == 0, done.stderr
    return project, env


def serving(run: Proc) -> str:
    event = run.read_until(lambda e: e["vm"]["state"] == "serving", TIMEOUT)
    assert event["vm"]["state"] == "serving", event
    url: str = event["vm"]["url"]
    assert url.startswith("http://127.0.0.1:")
    return url


def test_browse_serves_the_index_and_the_wiki_json_of_the_current_version(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project, env = generated(tmp_path, installs)
    version = wiki_root(project) / "versions" / current_id(project)
    document = json.loads((version / "wiki.json").read_bytes())
    with Program(["zread", "browse", "--stdio", "--port", "0"], env=env, cwd=project) as run:
        url = serving(run)
        status, index = get(url + "/")
        assert status < 500
        page = index.decode()
        for entry in document["pages"]:
            assert html.escape(entry["title"]) in page, entry
            assert f'href="/{entry["slug"]}"' in page, entry
        assert get(url + "/api/wiki") == (200, (version / "wiki.json").read_bytes())
        run.send(QUIT)
        run.read_until_done(TIMEOUT)
        run.finish()


def test_browse_serves_the_pages_written_in_the_project(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project, env = generated(tmp_path, installs)
    version = wiki_root(project) / "versions" / current_id(project)
    document = json.loads((version / "wiki.json").read_bytes())
    with Program(["zread", "browse", "--stdio", "--port", "0"], env=env, cwd=project) as run:
        url = serving(run)
        for entry in document["pages"]:
            markdown = (version / entry["file"]).read_bytes()
            assert get(f"{url}/api/pages/{entry['slug']}") == (200, markdown), entry
            status, body = get(f"{url}/{entry['slug']}")
            assert status == 200
            page = body.decode()
            text = markdown.decode()
            headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
            assert headings, entry
            for heading in headings:  # the file's own sections
                assert f">{html.escape(heading, quote=False)}</h2>" in page, heading
            cited = [t for _, t in LINK.findall(text) if "#L" in t]
            assert cited, entry
            for target in cited:  # and its citations of the project's files
                assert html.escape(target) in page, target
        run.send(QUIT)
        run.read_until_done(TIMEOUT)
        run.finish()


def test_browse_refuses_a_host_that_is_not_loopback(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project, env = generated(tmp_path, installs, runs=0)
    refused = zread("browse", "--stdio", "--host", "0.0.0.0", "--port", "0", env=env, cwd=project)
    assert refused.returncode == 2
    assert refused.stdout == b""
    err = refused.stderr.decode()
    assert err.count("\n") == 1 and err.endswith("\n") and "0.0.0.0" in err, err


def test_browse_offers_the_versions_on_disk(tmp_path: Path, installs: Callable[..., Path]) -> None:
    project, env = generated(tmp_path, installs, runs=2)
    ids = versions(project)
    current = current_id(project)
    assert len(ids) == 2 and current in ids
    with Program(["zread", "browse", "--stdio", "--port", "0"], env=env, cwd=project) as run:
        gate = run.read_until(lambda e: "select_version" in e["waiting_for"], TIMEOUT)
        listed = gate["vm"]["versions"]
        assert sorted(v["id"] for v in listed) == ids
        assert {v["id"]: v["is_current"] for v in listed} == {i: i == current for i in ids}
        (older,) = (i for i in ids if i != current)
        run.send({"type": "select_version", "params": {"wiki_id": older}})
        url = serving(run)
        wiki_json = wiki_root(project) / "versions" / older / "wiki.json"
        assert get(url + "/api/wiki") == (200, wiki_json.read_bytes())
        run.send(QUIT)
        run.read_until_done(TIMEOUT)
        run.finish()


# -- 5. config.yaml -----------------------------------------------------------------------

UNKNOWN = "    timeout: 120\n"
"""A key zread does not know, at the end of the llm map."""
TELEMETRY = "telemetry:\n    enabled: false\n"
"""A map zread does not know, at the end."""


def test_config_yaml_round_trips_and_generate_uses_it(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    original = SAMPLE_CONFIG.replace(
        "    base_url: https://open.bigmodel.cn/api/paas/v4\n",
        "    base_url: https://open.bigmodel.cn/api/paas/v4\n" + UNKNOWN,
    )
    original += TELEMETRY
    project = make_project(tmp_path)
    home = make_home(tmp_path, original)
    config = home / ".zread" / "config.yaml"
    env = environment(tmp_path, home, installs("--speed", "0"))
    with Program(["zread", "config", "--stdio"], env=env, cwd=project) as run:
        first = run.read_event(TIMEOUT)
        fields = first["vm"]["fields"]
        assert [f["json_key"] for f in fields] == [
            "language",
            "doc_language",
            "",
            "max_concurrent",
            "max_retries",
            "llm_provider",
            "llm_base_url",
            "llm_model",
            "llm_api_key",
        ]
        assert {f["json_key"]: f["value"] for f in fields if f["json_key"]} == {
            "language": "zh",
            "doc_language": "zh",
            "max_concurrent": "1",
            "max_retries": "0",
            "llm_provider": "z.ai",
            "llm_base_url": "https://open.bigmodel.cn/api/paas/v4",
            "llm_model": "glm-5",
            "llm_api_key": "",
        }
        edits = {"max_concurrent": "2", "llm_api_key": "sk-round-trip"}
        run.send({"type": "update_fields", "params": {"fields": edits}})
        assert run.read_event(TIMEOUT)["error"] == ""
        run.send({"type": "save", "params": {}})
        saved = run.read_until_done(TIMEOUT)
        run.finish()
    assert saved["vm"]["saved"] is True
    expected = original.replace("max_concurrent: 1", "max_concurrent: 2")
    expected = expected.replace(API_KEY_LINE, '    api_key: "sk-round-trip"\n')  # its quotes kept
    assert config.read_text() == expected, "the same layout, the unknown keys kept"
    assert config.stat().st_mode & 0o777 == 0o600
    assert temporary_files(home) == []

    done = zread("generate", "-y", "--stdio", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    events = strict_events(done.stdout)
    assert events[-1]["vm"]["state"] == "done"
    assert max(running_tasks(e) for e in events) == 2
    assert {e["vm"]["max_retries"] for e in events} == {0}


# -- 6. a Chinese wiki --------------------------------------------------------------------


def test_a_chinese_config_makes_a_chinese_wiki(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    from slugify import slugify

    project = make_project(tmp_path)
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG))
    env = environment(tmp_path, home, installs("--speed", "0"))
    done = zread("generate", "-y", "--stdio", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    last = strict_events(done.stdout)[-1]
    assert last["vm"]["state"] == "done"
    wiki_id = current_id(project)
    document = check_version(project, wiki_id)
    assert document["language"] == "zh"
    pages = document["pages"]
    assert [(p["title"], p["slug"]) for p in pages] == [
        (t["title"], t["slug"]) for t in last["vm"]["pages"]["tasks"]
    ]
    for n, page in enumerate(pages, 1):
        assert CJK.search(page["title"]), page
        assert PINYIN_SLUG.fullmatch(page["slug"]), page
        expected = slugify(page["title"], lowercase=True, regex_pattern=r"[^-a-z0-9_]+")
        assert page["slug"] == f"{n}-{expected}"
    raw = (wiki_root(project) / "versions" / wiki_id / "wiki.json").read_bytes()
    assert b"\\u" not in raw
    assert all(page["title"].encode() in raw for page in pages)


# -- 7. login.json ------------------------------------------------------------------------


def test_login_writes_login_json_and_without_it_generate_fails_at_once(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    project = make_project(tmp_path)
    home = make_home(tmp_path)
    env = environment(tmp_path, home, installs("--speed", "0"))
    with Program(["zread", "login", "--stdio"], env=env, cwd=project) as run:
        run.read_until(lambda e: "select_region" in e["waiting_for"], TIMEOUT)
        run.send({"type": "select_region", "params": {"region": "cn"}})
        gate = run.read_until(lambda e: "select_model" in e["waiting_for"], TIMEOUT)
        model = gate["vm"]["avail_models"][0]
        run.send({"type": "select_model", "params": {"model": model}})
        last = run.read_until_done(TIMEOUT)
        run.finish()
    assert last["vm"]["state"] == "done"
    login = home / ".zread" / "login.json"
    assert login.stat().st_mode & 0o777 == 0o600
    assert isinstance(json.loads(login.read_bytes()), dict)

    logged_in = zread("generate", "-y", "--stdio", env=env, cwd=project)
    assert logged_in.returncode == 0, logged_in.stderr
    assert strict_events(logged_in.stdout)[-1]["vm"]["state"] == "done"

    # Logged out: no login.json, and a config.yaml whose key is empty, where the
    # scenario has one (a .zread/ without login.json alone leaves the scenario's login).
    login.unlink()
    config = home / ".zread" / "config.yaml"
    assert not config.exists()  # login does not write it
    config.write_text(SAMPLE_CONFIG)
    before = versions(project)
    with Program(["zread", "generate", "-y", "--stdio"], env=env, cwd=project) as run:
        first = run.read_event(TIMEOUT)
        assert first["done"] is True
        assert first["vm"]["state"] == "error"
        assert first["vm"]["error"], first
        assert run.wait(EXIT_WITHIN) == 0
        run.finish()
    assert versions(project) == before
    assert not (wiki_root(project) / "drafts").exists()


def generate_in(folder: Path) -> dict[str, Any]:
    """``generate --stdio -y --home F --project F``, run to its end: its last event."""
    argv = ["generate", "-y", "--home", str(folder), "--project", str(folder)]
    with Proc(*argv, files=True) as run:
        last = run.read_until_done(TIMEOUT)
        run.finish()
    return last


def test_two_runs_in_one_folder_are_both_logged_in(tmp_path: Path) -> None:
    # The first run's wiki makes folder/.zread/, HOME's folder too: it holds no
    # login.json, and the scenario's login stands.
    folder = tmp_path / "both"
    folder.mkdir()
    for run in range(2):
        last = generate_in(folder)
        assert last["vm"]["state"] == "done", (run, last["vm"]["error"])
    assert len(versions(folder)) == 2
    assert not (folder / ".zread" / "login.json").exists()


def test_a_config_saved_from_the_scenario_leaves_its_login(tmp_path: Path) -> None:
    folder = tmp_path / "both"
    folder.mkdir()
    with Proc("config", "--home", str(folder), files=True) as run:
        run.read_event(TIMEOUT)
        run.send({"type": "update_fields", "params": {"fields": {"language": "de"}}})
        run.read_event(TIMEOUT)
        run.send({"type": "save", "params": {}})
        assert run.read_until_done(TIMEOUT)["vm"]["saved"] is True
        run.finish()
    assert generate_in(folder)["vm"]["state"] == "done"


# -- 8. many processes on one HOME and one project ----------------------------------------

EDITS = {
    "language": "en",
    "doc_language": "ja",
    "max_concurrent": "3",
    "max_retries": "4",
    "llm_model": "glm-4.6",
    "llm_base_url": "https://llm.example.invalid/v1",
}
LOG_LINE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2} zread-sim \S.*")


def test_many_processes_on_one_home_lose_no_update(
    tmp_path: Path, installs: Callable[..., Path]
) -> None:
    """Editors saving different fields while generate runs read the same config.yaml
    (each run in a project of its own: see the next test for one project)."""
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG))
    env = environment(tmp_path, home, installs("--speed", "0"))
    projects = [make_project(tmp_path / f"p{n}") for n in range(4)]
    configs = [Program(["zread", "config", "--stdio"], env=env, cwd=projects[0]) for _ in EDITS]
    runs = [Program(["zread", "generate", "-y", "--stdio"], env=env, cwd=p) for p in projects]
    try:
        for proc in configs:  # every editor has loaded the same config
            proc.read_event(TIMEOUT)
        for proc, (key, value) in zip(configs, EDITS.items(), strict=True):
            proc.send({"type": "update_fields", "params": {"fields": {key: value}}})
            proc.send({"type": "save", "params": {}})
        for proc in configs:
            assert proc.read_until_done(30)["vm"]["saved"] is True
            proc.finish()
        for proc in runs:
            assert proc.read_until_done(30)["vm"]["state"] == "done"
            proc.finish()
    finally:
        for proc in configs + runs:
            proc.kill()
    text = (home / ".zread" / "config.yaml").read_text()
    for key, value in EDITS.items():
        name = key.removeprefix("llm_")
        assert re.search(rf"^ *{name}: {re.escape(value)}$", text, re.MULTILINE), (key, text)
    assert "api_key: sk-sim-0123456789" in text
    assert (home / ".zread" / "config.yaml").stat().st_mode & 0o777 == 0o600
    for project in projects:
        check_version(project, current_id(project))
    log = (home / ".zread" / "log" / "zread.log").read_text()
    assert log.endswith("\n")
    assert all(LOG_LINE.fullmatch(line) for line in log.splitlines()), log
    assert temporary_files(home) == []


def generate_at_once(tmp_path: Path, installs: Callable[..., Path], runs: int = 4) -> Path:
    """``runs`` generate processes on one HOME and one project, started together: all
    of them up and waiting at select_action, then all told to generate at once (a
    little speed, so that their catalogs and pages overlap); each must end done."""
    project = make_project(tmp_path)
    config = with_key(SAMPLE_CONFIG).replace("max_concurrent: 1", "max_concurrent: 4")
    home = make_home(tmp_path, config)
    env = environment(tmp_path, home, installs("--speed", "0.2"))
    procs = [Program(["zread", "generate", "--stdio"], env=env, cwd=project) for _ in range(runs)]
    try:
        for proc in procs:
            assert "select_action" in proc.read_event(TIMEOUT)["waiting_for"]
        for proc in procs:
            proc.send({"type": "select_action", "params": {"action": "generate"}})
        for proc in procs:
            assert proc.read_until_done(30)["vm"]["state"] == "done"
            proc.finish()
    finally:
        for proc in procs:
            proc.kill()
    return project


@pytest.fixture(scope="module")
def four_at_once(tmp_path_factory: pytest.TempPathFactory, installs: Callable[..., Path]) -> Path:
    """One project four runs generated at once, shared by the two tests below (they only
    read what the runs left)."""
    return generate_at_once(tmp_path_factory.mktemp("at-once"), installs, runs=4)


def test_many_generate_runs_on_one_project_leave_valid_versions(four_at_once: Path) -> None:
    project = four_at_once
    ids = versions(project)
    assert ids
    for wiki_id in ids:
        check_version(project, wiki_id)
    assert current_id(project) in ids
    assert temporary_files(project / ".zread") == []


def test_many_generate_runs_on_one_project_each_make_a_version(four_at_once: Path) -> None:
    project = four_at_once
    assert len(versions(project)) == 4, "each run that ends done is a version of its own"
    assert not (wiki_root(project) / "drafts").exists(), "every run's draft became its version"


# -- 9. no files ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_no_files_writes_nothing_anywhere(tmp_path: Path, how: str) -> None:
    project = make_project(tmp_path)
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG))
    extra = {"ZREAD_SIM_FILES": "0"} if how == "variable" else {}
    env = environment(tmp_path, home, install_zread(tmp_path / "bin", "--speed", "0"), **extra)
    before = snapshot(tmp_path)
    argv = ["generate", "-y", "--stdio", *(["--no-files"] if how == "flag" else [])]
    done = zread(*argv, env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert strict_events(done.stdout)[-1]["vm"]["state"] == "done"
    assert snapshot(tmp_path) == before
