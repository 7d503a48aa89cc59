"""zread's files kept safe, over real processes: links, concurrent runs, runs that end
badly, round-trip saves, bounded reads and secret files (docs/fidelity.md §7).

Each test builds its own HOME and project in tmp_path and runs an installed ``zread``
(``zread-sim install``, speed 0 baked in, found on PATH in an environment of HOME,
PATH, LANG, LC_ALL and TMPDIR only), or ``python -m simulator`` for the simulator's own
commands, and checks what is on disk afterwards: bytes, modes, link targets, mtimes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from .helpers import Program, install_zread, write_scenario
from .test_files_e2e import (
    QUIT,
    SAMPLE_CONFIG,
    TIMEOUT,
    check_index,
    check_version,
    current_id,
    environment,
    get,
    git,
    make_home,
    make_project,
    serving,
    strict_events,
    versions,
    wiki_root,
    with_key,
)

Event = dict[str, Any]
State = dict[str, tuple[Any, ...]]

WITHIN = 5.0
"""How long a refused run may take, start to exit (a second is the rule; a loaded
2-core CI machine gets five)."""
CANCEL = {"type": "cancel", "params": {}}
TEMP = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")
"""A temporary file as the store names one: ``.<name>.<8 hex>.tmp``."""


# -- the places ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of an installed ``zread`` (speed 0 baked in), shared by the module."""
    return install_zread(tmp_path_factory.mktemp("bin"), "--speed", "0")


def tree_state(root: Path) -> State:
    """Every entry at and below ``root``, no link followed: kind, mode, mtime, and the
    bytes' digest of a file or the target of a link."""
    found: State = {}

    def visit(path: Path) -> None:
        info = os.lstat(path)
        name = path.relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            found[name] = ("link", os.readlink(path), info.st_mtime_ns)
        elif stat.S_ISDIR(info.st_mode):
            found[name + "/"] = ("dir", info.st_mode, info.st_mtime_ns)
            for child in sorted(os.listdir(path)):
                visit(path / child)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[name] = ("file", info.st_mode, info.st_mtime_ns, info.st_size, digest)

    visit(root)
    return found


def file_state(path: Path) -> tuple[bytes, int, int]:
    info = os.lstat(path)
    return path.read_bytes(), info.st_mode, info.st_mtime_ns


def run(
    argv: list[str], *, env: Mapping[str, str], cwd: Path, timeout: float = 30
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """``argv`` with stdin null, as a hub spawns zread; the result and its wall time."""
    started = time.monotonic()
    done = subprocess.run(
        argv,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return done, time.monotonic() - started


def simulator(*args: str) -> list[str]:
    """The simulator's own command line (``zread-sim``)."""
    return [sys.executable, "-m", "simulator", *args]


def one_line(stderr: bytes) -> str:
    """stderr is exactly one line, and no traceback: its text."""
    text = stderr.decode("utf-8", "replace")
    assert text.endswith("\n") and text.count("\n") == 1, text
    assert "Traceback" not in text and "internal error" not in text.lower(), text
    return text


def names(path: Path) -> list[str]:
    """How ``path`` may be written in a message: as given, or with every link resolved
    (the working directory is reported resolved)."""
    return [str(path), str(path.parent.resolve() / path.name)]


def mentions(text: str, path: Path) -> bool:
    return any(name in text for name in names(path))


def catalog_of(event: Event) -> list[str]:
    return [task["slug"] for task in event["vm"]["pages"]["tasks"]]


def assert_complete_version(project: Path, wiki_id: str, catalog: list[str] | None = None) -> None:
    """``versions/<id>`` is whole: a real directory whose wiki.json lists exactly the
    regular ``.md`` files present (and, given the catalog, all of its pages)."""
    directory = wiki_root(project) / "versions" / wiki_id
    assert stat.S_ISDIR(os.lstat(directory).st_mode), directory
    document = check_index(directory)
    assert document["id"] == wiki_id
    listed = [page["file"] for page in document["pages"]]
    assert sorted(os.listdir(directory)) == sorted(["wiki.json", *listed]), wiki_id
    for name in listed:
        assert stat.S_ISREG(os.lstat(directory / name).st_mode), name
        assert (directory / name).stat().st_size > 0, name
    if catalog is not None:
        assert [page["slug"] for page in document["pages"]] == catalog, wiki_id


def leftovers(project: Path) -> list[str]:
    """Drafts and claims left in the wiki root."""
    root = wiki_root(project)
    return sorted(n for n in os.listdir(root) if n == "drafts" or n.startswith(".draft-"))


def temp_files(root: Path) -> list[str]:
    """Every ``.<name>…tmp`` file under ``root`` (``.git`` aside), relative."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            if name.startswith(".") and name.endswith(".tmp"):
                found.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(found)


# -- 1. links in the project are refused ----------------------------------------------------

LINKED_DIRS = [".zread", ".zread/wiki", ".zread/wiki/versions", ".zread/wiki/drafts"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", ["generate", "browse"])
@pytest.mark.parametrize("linked", LINKED_DIRS)
def test_a_linked_zread_directory_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, bin_dir: Path, linked: str, command: str
) -> None:
    """A cloned repository's ``.zread``, ``wiki``, ``versions`` or ``drafts`` that is a
    link to a folder outside the project: exit 2, one stderr line naming the link, no
    event, and nothing changed beside the project (the folder it points to included)
    nor in HOME (no log line either)."""
    parent = tmp_path / "parent"
    project = parent / "project"
    outside = parent / "outside"
    outside.mkdir(parents=True)
    (outside / "keep.txt").write_text("the user's own file\n")
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hello')\n")
    link = project / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(outside, link.parent), target_is_directory=True)
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG))
    env = environment(tmp_path, home, bin_dir)
    before, home_before = tree_state(parent), tree_state(home)
    time.sleep(0.01)  # an mtime changed by the run is then a different one

    argv = ["zread", command, "--stdio"]
    argv += ["-y"] if command == "generate" else ["--port", "0", "--host", "127.0.0.1"]
    done, seconds = run(argv, env=env, cwd=project)

    assert done.returncode == 2, done.stderr
    assert done.stdout == b"", "refused before the first event"
    err = one_line(done.stderr)
    assert mentions(err, link), err
    assert "link" in err, err
    assert seconds < WITHIN
    assert tree_state(parent) == before
    assert tree_state(home) == home_before


# -- 2. a linked current is replaced, not written through ----------------------------------


@pytest.mark.timeout(30)
def test_a_linked_current_is_replaced_by_a_file_and_its_target_is_untouched(
    tmp_path: Path, bin_dir: Path
) -> None:
    project = make_project(tmp_path / "parent")
    victim = project.parent / "victim.txt"
    victim.write_bytes(b"the user's notes, not zread's\n")
    victim.chmod(0o640)
    current = wiki_root(project) / "current"
    current.parent.mkdir(parents=True)
    current.symlink_to("../../../victim.txt")
    assert current.resolve() == victim.resolve()
    victim_before = file_state(victim)
    env = environment(tmp_path, make_home(tmp_path), bin_dir)

    done, _ = run(["zread", "generate", "-y", "--stdio"], env=env, cwd=project)

    assert done.returncode == 0, done.stderr
    last = strict_events(done.stdout)[-1]
    assert last["done"] is True and last["vm"]["state"] == "done"
    assert file_state(victim) == victim_before
    assert stat.S_ISREG(os.lstat(current).st_mode), "current is a regular file now"
    wiki_id = current_id(project)
    assert versions(project) == [wiki_id]
    assert_complete_version(project, wiki_id, catalog_of(last))


# -- 3. browse never serves a linked page ---------------------------------------------------


@pytest.mark.timeout(30)
def test_browse_answers_404_for_a_linked_page_and_serves_the_others(
    tmp_path: Path, bin_dir: Path
) -> None:
    project = make_project(tmp_path / "parent")
    env = environment(tmp_path, make_home(tmp_path), bin_dir)
    generated, _ = run(["zread", "generate", "-y", "--stdio"], env=env, cwd=project)
    assert generated.returncode == 0, generated.stderr
    version = wiki_root(project) / "versions" / current_id(project)
    document = json.loads((version / "wiki.json").read_bytes())
    first, other = document["pages"][0], document["pages"][1]
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"TOP-SECRET-" + secrets.token_hex(16).encode() + b"\n")
    page = version / first["file"]
    page.unlink()
    page.symlink_to(secret)
    secret_before = file_state(secret)

    argv = ["zread", "browse", "--stdio", "--port", "0", "--host", "127.0.0.1"]
    with Program(argv, env=env, cwd=project) as browse:
        url = serving(browse)
        for path in (f"/api/pages/{first['slug']}", f"/{first['slug']}"):
            status, body = get(url + path)
            assert status == 404, path
            assert b"TOP-SECRET" not in body, path
        status, body = get(f"{url}/api/pages/{other['slug']}")
        assert (status, body) == (200, (version / other["file"]).read_bytes())
        assert get(f"{url}/{other['slug']}")[0] == 200
        assert get(url + "/api/wiki") == (200, (version / "wiki.json").read_bytes())
        err = browse.wait_stderr(first["file"], TIMEOUT)
        lines = [line for line in err.splitlines() if first["file"] in line]
        assert lines and all(mentions(line, page) for line in lines), err
        browse.send(QUIT)
        browse.read_until_done(TIMEOUT)
        browse.finish()
    assert b"TOP-SECRET" not in b"".join(browse.raw)
    assert file_state(secret) == secret_before
    assert page.is_symlink(), "browse changes nothing on disk"


# -- 4. HOME: a dotfiles link is written through ----------------------------------------------


@pytest.mark.timeout(30)
def test_a_config_yaml_linked_to_dotfiles_is_saved_through_the_link(
    tmp_path: Path, bin_dir: Path
) -> None:
    home = make_home(tmp_path)
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "zread.yaml"
    original = with_key(SAMPLE_CONFIG)
    target.write_text(original)
    target.chmod(0o600)
    user = home / ".zread"
    user.mkdir(mode=0o700)
    config = user / "config.yaml"
    config.symlink_to("../dotfiles/zread.yaml")
    env = environment(tmp_path, home, bin_dir)

    with Program(["zread", "config", "--stdio"], env=env, cwd=tmp_path) as editor:
        fields = editor.read_event(TIMEOUT)["vm"]["fields"]
        assert {f["json_key"]: f["value"] for f in fields}["max_concurrent"] == "1"
        editor.send({"type": "update_fields", "params": {"fields": {"max_concurrent": "3"}}})
        assert editor.read_event(TIMEOUT)["error"] == ""
        editor.send({"type": "save", "params": {}})
        assert editor.read_until_done(TIMEOUT)["vm"]["saved"] is True
        editor.finish()

    assert config.is_symlink() and os.readlink(config) == "../dotfiles/zread.yaml"
    expected = original.replace("max_concurrent: 1", "max_concurrent: 3")
    assert target.read_text() == expected
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(os.listdir(dotfiles)) == ["zread.yaml"], "no temporary file left there"
    assert sorted(os.listdir(user)) in (["config.yaml"], ["config.yaml", "log"])
    if (user / "log").exists():
        assert sorted(os.listdir(user / "log")) == ["zread.log"]
    assert temp_files(home) == []


@pytest.mark.timeout(30)
def test_a_link_loop_in_home_is_one_line_for_the_config_and_no_log_line_for_the_log(
    tmp_path: Path, bin_dir: Path
) -> None:
    home = make_home(tmp_path, with_key(SAMPLE_CONFIG))
    project = make_project(tmp_path)
    (home / ".zread" / "log").mkdir()
    (home / ".zread" / "log" / "zread.log").symlink_to("zread.log")  # ln -s zread.log ...
    env = environment(tmp_path, home, bin_dir)
    done, _ = run(["zread", "generate", "-y", "--stdio"], env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert strict_events(done.stdout)[-1]["vm"]["state"] == "done"

    config = home / ".zread" / "config.yaml"
    config.unlink()
    config.symlink_to("config.yaml")
    save = json.dumps({"type": "save", "params": {}}).encode() + b"\n"
    saved = subprocess.run(
        ["zread", "config", "--stdio"],
        env=env,
        cwd=tmp_path,
        input=save,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert saved.returncode == 2, saved.stderr
    text = one_line(saved.stderr)
    assert mentions(text, config) and "a symbolic link loop" in text, text
    assert config.is_symlink() and os.readlink(config) == "config.yaml"


# -- 4b. files that are not regular files ----------------------------------------------------


def not_regular_cases(root: Path) -> dict[str, tuple[list[str], dict[str, str], str]]:
    """case -> (extra arguments, extra variables, the name the refusal gives): each file
    the simulator reads or appends to, named as a FIFO (nobody at the other end) or a
    device."""
    fifo = root / "fifo"
    os.mkfifo(fifo)
    parent = root / "parent.toml"
    parent.write_text(f'extends = "{fifo}"\n')
    return {
        "scenario flag": (
            ["--scenario", str(fifo)],
            {},
            f"scenario {fifo}: not a regular file (a FIFO)",
        ),
        "scenario variable": (
            [],
            {"ZREAD_SIM_SCENARIO": str(fifo)},
            f"scenario {fifo}: not a regular file (a FIFO)",
        ),
        "extends": (
            ["--scenario", str(parent)],
            {},
            f"scenario {fifo}: not a regular file (a FIFO)",
        ),
        "scenario device": (
            ["--scenario", "/dev/zero"],
            {},
            "scenario /dev/zero: not a regular file (a character device)",
        ),
        "cassette": (
            ["--scenario", f"replay:{fifo}"],
            {},
            f"replay: {fifo}: not a regular file (a FIFO)",
        ),
        "journal": (["--journal", str(fifo)], {}, f"journal {fifo}: not a regular file (a FIFO)"),
        "journal device": (
            [],
            {"ZREAD_SIM_JOURNAL": os.devnull},
            f"journal {os.devnull}: not a regular file (a character device)",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "scenario flag",
        "scenario variable",
        "extends",
        "scenario device",
        "cassette",
        "journal",
        "journal device",
    ],
)
def test_a_fifo_or_a_device_for_a_file_is_refused_at_once_in_one_line(
    tmp_path: Path, case: str
) -> None:
    args, variables, refusal = not_regular_cases(tmp_path)[case]
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**os.environ, "HOME": str(home), **variables}
    argv = simulator("generate", "--stdio", "-y", "--speed", "0", "--project", str(project), *args)
    done, took = run(argv, env=env, cwd=tmp_path, timeout=60)  # a hang fails, not hangs
    assert done.returncode == 2, done.stderr
    assert one_line(done.stderr) == f"zread-sim: {refusal}\n"
    assert done.stdout == b""  # refused before the first event
    assert took < 30, took  # generous: a FIFO waited on would wait for ever
    assert os.listdir(home) == [] and os.listdir(project) == []
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)  # left as it was


def test_a_fifo_as_config_yaml_in_home_is_refused_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".zread").mkdir(parents=True)
    config = home / ".zread" / "config.yaml"
    os.mkfifo(config)
    env = {**os.environ, "HOME": str(home)}
    done, _ = run(simulator("config", "--stdio"), env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    text = one_line(done.stderr)
    assert (
        text == f"zread-sim: {config}: not a regular file (a FIFO); zread-sim reads nothing there\n"
    )
    assert sorted(os.listdir(home / ".zread")) == ["config.yaml"]


# -- 4c. folders that cannot be used ---------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["generate", "--project", "{root}/nonexistent/dir"],
            "project {root}/nonexistent/dir: no such folder; zread-sim creates none",
        ),
        (
            ["generate", "--project", "typo/deep/proj"],
            "project typo/deep/proj: no such folder; zread-sim creates none",
        ),
        (
            ["browse", "--project", "{root}/gone"],
            "project {root}/gone: no such folder; zread-sim creates none",
        ),
        (
            ["config", "--home", "{root}/nohome"],
            "home {root}/nohome: no such folder; zread-sim creates none",
        ),
        (["generate", "--project", "/proc"], "project /proc: cannot be written: "),
        (["generate", "--project", "/sys"], "project /sys: cannot be written: "),
        (["config", "--home", "/proc"], "home /proc: cannot be written: "),
        (["login", "--home", "/proc"], "home /proc: cannot be written: "),
    ],
)
def test_a_folder_that_cannot_be_used_is_refused_before_the_first_event(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    if any(word in ("/proc", "/sys") for word in argv) and not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc and /sys")
    root = tmp_path / "root"
    root.mkdir()
    argv = [word.replace("{root}", str(root)) for word in argv]
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    before = tree_state(tmp_path)
    done, _ = run(simulator(*argv, "--stdio"), env=env, cwd=root, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""  # before the first event
    assert one_line(done.stderr).startswith("zread-sim: " + says.replace("{root}", str(root)))
    assert tree_state(tmp_path) == before  # nothing created, nothing touched


def test_a_read_only_project_serves_browse(tmp_path: Path) -> None:
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc")
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        simulator("browse", "--stdio", "--project", "/proc", "--port", "0"),
        env=env,
        input=b'{"type":"quit","params":{}}\n',
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert strict_events(done.stdout)[-1]["done"] is True


# -- 5. concurrent runs on one project --------------------------------------------------------

OVERLAPPING = """\
[world.config]
max_concurrent = 2
max_retries = 0

[world.project]
pages = 4

[timing]
catalog_step = { fixed = 0.0 }
page = { uniform = [0.3, 0.5] }
"""
"""Catalogs at once, then pages long enough that every run overlaps the others."""


def after_a_second_boundary() -> None:
    """Sleep until just after the wall clock's next whole second."""
    time.sleep(1.02 - time.time() % 1.0)


def generate_together(project: Path, env: Mapping[str, str], runs: int, *, gate: bool) -> None:
    """``runs`` generate processes on ``project``, started together just after a second
    boundary; with ``gate``, all are first up at select_action and then told to
    generate at once (so every catalog is made within the same second). Each must end
    done with every page written."""
    scenario = write_scenario(project.parent, "overlapping", OVERLAPPING)
    argv = ["zread", "generate", "--stdio", "--speed", "1", "--scenario", scenario]
    if not gate:
        argv.append("-y")
        after_a_second_boundary()
    procs = [Program(argv, env=env, cwd=project) for _ in range(runs)]
    try:
        if gate:
            for proc in procs:
                assert "select_action" in proc.read_event(TIMEOUT)["waiting_for"]
            after_a_second_boundary()
            for proc in procs:
                proc.send({"type": "select_action", "params": {"action": "generate"}})
        for proc in procs:
            last = proc.read_until_done(30)
            assert last["vm"]["state"] == "done", last["vm"]
            pages = last["vm"]["pages"]
            assert last["vm"]["done_total"] == pages["done"] == pages["total"] == 4
            proc.finish()
    finally:
        for proc in procs:
            proc.kill()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("gate", [False, True], ids=["yes", "released-at-once"])
def test_three_runs_with_catalogs_in_one_second_each_commit_a_complete_version(
    tmp_path: Path, bin_dir: Path, gate: bool
) -> None:
    """Three runs whose ids fall in one second never share a draft: three versions,
    each whole (no page of one in another), and ``current`` names one of them."""
    project = make_project(tmp_path / "parent")
    env = environment(tmp_path, make_home(tmp_path), bin_dir)
    generate_together(project, env, 3, gate=gate)
    ids = versions(project)
    assert len(ids) == len(set(ids)) == 3, ids
    for wiki_id in ids:
        assert_complete_version(project, wiki_id)
    indexes = [check_index(wiki_root(project) / "versions" / i) for i in ids]
    catalogs = {tuple(page["slug"] for page in index["pages"]) for index in indexes}
    assert len(catalogs) == 1 and len(next(iter(catalogs))) == 4, catalogs
    if gate:  # each catalog's time is its generated_at: all three in one second
        assert len({index["generated_at"][:19] for index in indexes}) == 1, indexes
    assert current_id(project) in ids
    assert leftovers(project) == []
    assert temp_files(project) == []


@pytest.mark.timeout(90)
def test_twelve_concurrent_runs_each_commit_a_complete_version(
    tmp_path: Path, bin_dir: Path
) -> None:
    project = make_project(tmp_path / "parent")
    env = environment(tmp_path, make_home(tmp_path), bin_dir)
    generate_together(project, env, 12, gate=False)
    ids = versions(project)
    assert len(ids) == len(set(ids)) == 12, ids
    for wiki_id in ids:
        assert_complete_version(project, wiki_id)
    assert current_id(project) in ids
    assert_complete_version(project, current_id(project))
    assert leftovers(project) == []
    assert temp_files(project) == []


# -- 6. nothing outside .zread/wiki/, however a run ends -------------------------------------

SLOW_PAGES = """\
[world.config]
max_concurrent = 2
max_retries = 0

[world.project]
pages = 12

[timing]
catalog_step = { fixed = 0.0 }
page = { fixed = 0.25 }
"""
"""A run that is mid-way for a second and a half."""

ENDINGS = ["done", "quit", "cancel", "sigterm", "sigkill", "catalog-failed-quit"]


def end_a_run(project: Path, env: Mapping[str, str], how: str) -> None:
    if how == "done":
        done, _ = run(["zread", "generate", "-y", "--stdio"], env=env, cwd=project)
        assert done.returncode == 0, done.stderr
        assert strict_events(done.stdout)[-1]["vm"]["state"] == "done"
        return
    if how == "catalog-failed-quit":
        argv = ["zread", "generate", "-y", "--stdio", "--scenario", "catalog-error"]
        with Program(argv, env=env, cwd=project) as proc:
            gate = proc.read_until(lambda e: "retry_catalog" in e["waiting_for"], TIMEOUT)
            assert gate["vm"]["catalog"]["status"] == "error"
            proc.send(QUIT)
            proc.read_until_done(TIMEOUT)
            proc.finish()
        return
    scenario = write_scenario(project.parent, "slow-pages", SLOW_PAGES)
    argv = ["zread", "generate", "-y", "--stdio", "--speed", "1", "--scenario", scenario]
    with Program(argv, env=env, cwd=project) as proc:
        midway = proc.read_until(lambda e: e["vm"]["pages"]["done"] >= 1, TIMEOUT)
        assert midway["vm"]["state"] == "running", midway["vm"]["state"]
        if how == "sigkill":
            proc.popen.send_signal(signal.SIGKILL)
            assert proc.wait(TIMEOUT) == -signal.SIGKILL
            return
        if how == "sigterm":
            proc.terminate()
        else:
            proc.send(QUIT if how == "quit" else CANCEL)
        last = proc.read_until_done(TIMEOUT)
        assert last["vm"]["pages"]["done"] < last["vm"]["pages"]["total"], "stopped mid-run"
        proc.finish()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ENDINGS)
def test_however_a_run_ends_it_leaves_nothing_outside_zread_wiki(
    tmp_path: Path, bin_dir: Path, how: str
) -> None:
    """What a CI job checks after zread ran: git sees nothing new outside
    ``.zread/wiki/`` (no ``.zread/.lock``), nor does a walk of the project (empty
    directories included); temporary files only after a SIGKILL, and only inside
    ``.zread/wiki/``."""
    project = make_project(tmp_path / "parent")
    env = environment(tmp_path, make_home(tmp_path, with_key(SAMPLE_CONFIG)), bin_dir)
    before = set(tree_state(project))

    end_a_run(project, env, how)

    status = git(project, "status", "--porcelain", "--untracked-files=all").splitlines()
    changed = [line[3:] for line in status]
    assert all(path.startswith(".zread/wiki/") for path in changed), changed
    if how == "done":
        assert changed, "the wiki is in the project"
    new = sorted(set(tree_state(project)) - before)
    allowed = (".zread/", ".zread/wiki/")
    assert all(n in allowed or n.startswith(".zread/wiki/") for n in new), new
    assert not os.path.lexists(project / ".zread" / ".lock")
    temps = temp_files(project)
    if how == "sigkill":
        assert all(t.startswith(".zread/wiki/") for t in temps), temps
    else:
        assert temps == [], temps
    if how == "catalog-failed-quit":
        assert not (project / ".zread").exists(), "a failed catalog writes nothing"


# -- 7. a killed run's temporary file never reaches a version ---------------------------------

ONE_AT_A_TIME = """\
[world.config]
max_concurrent = 1
max_retries = 0

[world.project]
pages = 6

[timing]
catalog_step = { fixed = 0.0 }
page = { fixed = 0.3 }
"""


@pytest.mark.timeout(30)
def test_a_killed_runs_temporary_file_is_dropped_when_its_draft_is_resumed(
    tmp_path: Path, bin_dir: Path
) -> None:
    project = make_project(tmp_path / "parent")
    env = environment(tmp_path, make_home(tmp_path, with_key(SAMPLE_CONFIG)), bin_dir)
    scenario = write_scenario(tmp_path, "one-at-a-time", ONE_AT_A_TIME)
    argv = ["zread", "generate", "-y", "--stdio", "--speed", "1", "--scenario", scenario]
    with Program(argv, env=env, cwd=project) as proc:
        proc.read_until(lambda e: e["vm"]["pages"]["done"] >= 2, TIMEOUT)
        proc.popen.send_signal(signal.SIGKILL)
        assert proc.wait(TIMEOUT) == -signal.SIGKILL

    drafts = wiki_root(project) / "drafts"
    draft = check_index(drafts, pages_on_disk=False)
    catalog = [page["slug"] for page in draft["pages"]]
    written = {p.stem: p.read_bytes() for p in drafts.glob("*.md")}
    assert 2 <= len(written) < len(catalog), sorted(written)
    missing = next(slug for slug in catalog if slug not in written)
    partial = b"Torn: this page was being written when the run was killed, and it"
    planted = drafts / f".{missing}.md.{secrets.token_hex(4)}.tmp"
    assert TEMP.fullmatch(planted.name)
    planted.write_bytes(partial)

    resume = ["zread", "generate", "--draft", "resume", "-y", "--stdio", "--scenario", scenario]
    done, _ = run(resume, env=env, cwd=project)

    assert done.returncode == 0, done.stderr
    events = strict_events(done.stdout)
    assert events[-1]["vm"]["state"] == "done"
    assert events[-1]["vm"]["catalog"]["status"] == "resumed"
    assert current_id(project) == draft["id"]
    assert_complete_version(project, draft["id"], catalog)
    check_version(project, draft["id"])
    version = wiki_root(project) / "versions" / draft["id"]
    page = (version / f"{missing}.md").read_bytes()
    assert partial not in page and len(page) > len(partial)
    assert {slug: (version / f"{slug}.md").read_bytes() for slug in written} == written
    assert temp_files(project) == []
    assert leftovers(project) == []


@pytest.mark.timeout(30)
def test_a_draft_killed_after_its_last_page_resumes_to_a_version(
    tmp_path: Path, bin_dir: Path
) -> None:
    """A run killed between its last page and its commit leaves a whole draft (and its
    claim); ``--draft resume`` then has nothing left to write and commits it."""
    project = make_project(tmp_path / "parent")
    env = environment(tmp_path, make_home(tmp_path, with_key(SAMPLE_CONFIG)), bin_dir)
    made, _ = run(["zread", "generate", "-y", "--stdio"], env=env, cwd=project)
    assert made.returncode == 0, made.stderr
    wiki_id = current_id(project)
    root = wiki_root(project)
    (root / "versions" / wiki_id).rename(root / "drafts")
    (root / "versions").rmdir()
    (root / "current").unlink()
    (root / f".draft-{wiki_id}").mkdir()
    argv = ["zread", "generate", "--draft", "resume", "-y", "--stdio"]
    with Program(argv, env=env, cwd=project) as proc:
        last = proc.read_until_done(WITHIN)  # speed 0, nothing left to write
        assert last["vm"]["state"] == "done"
        proc.finish()
    assert current_id(project) == wiki_id
    assert_complete_version(project, wiki_id)
    assert leftovers(project) == []


# -- 8. config.yaml saved as the user wrote it --------------------------------------------------

HAND_WRITTEN = """\
# zread settings, kept by hand
# (a second comment line)

concurrency:   # how hard to push
  max_retries: 0    # inline: retries per page
  # between keys
  max_concurrent: &d 2
llm:
  base_url: "https://llm.example.invalid/v1"
  model: 'glm-4.6'
  provider: zhipu
  api_key: "sk-hand-0123456789"
  timeout: *d
doc_language: "en"

language: 'en'
telemetry:
  enabled: false   # a key zread does not know
"""
"""A config.yaml written by hand: comments on top, inline and between keys, a blank
line, an anchor and its alias, single and double quotes, 2-space indentation, zread's
keys in no order of zread's and keys it does not know."""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("key", "value", "before", "after"),
    [
        ("max_retries", "3", "max_retries: 0 ", "max_retries: 3 "),
        ("llm_model", "glm-5", "model: 'glm-4.6'", "model: 'glm-5'"),
        (
            "llm_base_url",
            "https://other.example.invalid/v2",
            'base_url: "https://llm.example.invalid/v1"',
            'base_url: "https://other.example.invalid/v2"',
        ),
    ],
    ids=["plain-int", "single-quoted", "double-quoted"],
)
def test_config_save_changes_only_the_changed_value(
    tmp_path: Path, bin_dir: Path, key: str, value: str, before: str, after: str
) -> None:
    home = make_home(tmp_path, HAND_WRITTEN)
    config = home / ".zread" / "config.yaml"
    config.chmod(0o644)
    env = environment(tmp_path, home, bin_dir)
    with Program(["zread", "config", "--stdio"], env=env, cwd=tmp_path) as editor:
        editor.read_event(TIMEOUT)
        editor.send({"type": "update_fields", "params": {"fields": {key: value}}})
        assert editor.read_event(TIMEOUT)["error"] == ""
        editor.send({"type": "save", "params": {}})
        assert editor.read_until_done(TIMEOUT)["vm"]["saved"] is True
        editor.finish()
    assert HAND_WRITTEN.count(before) == 1
    assert config.read_text() == HAND_WRITTEN.replace(before, after)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert temp_files(home) == []


# -- 9. every read is bounded --------------------------------------------------------------------

BILLION_LAUGHS = (
    'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
)
"""Nine levels of nine aliases: a few hundred bytes, 10^9 nodes expanded."""
NESTED_1000 = "[" * 1000 + "]" * 1000
VERSION_ID = "2026-01-02-030405"
VERSION_DIR = f".zread/wiki/versions/{VERSION_ID}"


class Bound(NamedTuple):
    """A file past a bound (``path`` in HOME when ``user``, else in the project), the
    command line that reads it (``{file}``: its path) and what its one line says."""

    path: str
    data: bytes
    argv: list[str]
    says: list[str]
    user: bool = False


GENERATE = ["zread", "generate", "-y", "--stdio"]
CONFIG = ["zread", "config", "--stdio"]
BOUNDS = {
    "config-nested-900": Bound(
        ".zread/config.yaml",
        ("a: " + "[" * 900 + "]" * 900 + "\n").encode(),
        CONFIG,
        ["32"],
        user=True,
    ),
    "config-recursive-alias": Bound(
        ".zread/config.yaml", b"a: &a [*a]\n", CONFIG, ["alias", "*a"], user=True
    ),
    "config-billion-laughs": Bound(
        ".zread/config.yaml", BILLION_LAUGHS.encode(), GENERATE, ["10,000"], user=True
    ),
    "config-5-mib": Bound(
        ".zread/config.yaml",
        b"language: en\n" + b"# padding\n" * (512 * 1024),
        CONFIG,
        ["64 KiB"],
        user=True,
    ),
    "login-nested-1000": Bound(
        ".zread/login.json", NESTED_1000.encode(), GENERATE, ["32"], user=True
    ),
    "wiki-json-nested": Bound(f"{VERSION_DIR}/wiki.json", NESTED_1000.encode(), GENERATE, ["32"]),
    "wiki-json-over-8-mib": Bound(
        f"{VERSION_DIR}/wiki.json",
        b'{"id": "' + VERSION_ID.encode() + b'", "pad": "' + b"x" * (8 << 20) + b'"}',
        GENERATE,
        ["8 MiB"],
    ),
    "current-over-4-kib": Bound(
        ".zread/wiki/current", b"versions/" + b"x" * 4200, GENERATE, ["4 KiB"]
    ),
    "scenario-draft-id": Bound(
        "bad-draft.toml",
        b'[world.draft]\nid = "../../x"\n',
        [*GENERATE, "--scenario", "{file}"],
        ["world.draft", "../../x"],
    ),
    "scenario-wiki-id": Bound(
        "bad-wiki.toml",
        b'[[world.wikis]]\nid = "../x"\n',
        [*GENERATE, "--scenario", "{file}"],
        ["world.wikis[0]", "../x"],
    ),
    "journal-nested-1000": Bound(
        "deep.journal",
        b'{"kind": "event", "line": ' + NESTED_1000.encode() + b"}\n",
        simulator("journal", "{file}"),
        ["32"],
    ),
    "cassette-nested-1000": Bound(
        "deep-cassette.json", NESTED_1000.encode(), simulator("check", "{file}"), ["32"]
    ),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(BOUNDS))
def test_a_file_past_a_bound_is_one_line_and_exit_2_within_seconds(
    tmp_path: Path, bin_dir: Path, case: str
) -> None:
    """Past a size, nesting or alias bound, or a scenario id that is a path: exit 2 and
    one stderr line naming the file and the bound, no event, at once; the file and
    everything around it (HOME's log included) as they were."""
    bound = BOUNDS[case]
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print('hello')\n")
    config = None if bound.path.endswith("config.yaml") else with_key(SAMPLE_CONFIG)
    home = make_home(tmp_path, config)
    path = (home if bound.user else project) / bound.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bound.data)
    env = environment(tmp_path, home, bin_dir)
    argv = [arg.replace("{file}", str(path)) for arg in bound.argv]
    home_before, project_before = tree_state(home), tree_state(project)
    time.sleep(0.01)

    done, seconds = run(argv, env=env, cwd=project)

    assert done.returncode == 2, done.stderr
    err = one_line(done.stderr)
    assert mentions(err, path), err
    for text in bound.says:
        assert text in err, err
    assert done.stdout == b""
    assert seconds < WITHIN, seconds
    assert tree_state(home) == home_before, "nothing written, not even a log line"
    assert tree_state(project) == project_before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15])
def test_sigterm_right_after_start_on_a_billion_laughs_config_ends_promptly(
    tmp_path: Path, bin_dir: Path, delay: float
) -> None:
    home = make_home(tmp_path, BILLION_LAUGHS)
    config = home / ".zread" / "config.yaml"
    before = file_state(config)
    env = environment(tmp_path, home, bin_dir)
    with Program(["zread", "generate", "-y", "--stdio"], env=env, cwd=tmp_path) as proc:
        time.sleep(delay)
        started = time.monotonic()
        proc.terminate()
        code = proc.wait(WITHIN)
        assert time.monotonic() - started < WITHIN
        assert code in (2, -signal.SIGTERM), (code, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert file_state(config) == before


# -- 10. files that may hold a secret are created 0600 -------------------------------------------


def umask_0(command: str) -> str:
    """``command`` run by a shell whose umask lets anything through: a file the program
    does not make private itself is created 0666 (0644 at worst)."""
    return f"umask 000; exec {command}"


@pytest.mark.timeout(30)
def test_a_journal_and_a_cassette_are_created_0600(tmp_path: Path, bin_dir: Path) -> None:
    env = environment(tmp_path, make_home(tmp_path), bin_dir)
    journal = tmp_path / "run.journal"
    done, _ = run(
        ["sh", "-c", umask_0(f"zread version --stdio --journal {journal}")], env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert journal.is_file() and journal.stat().st_size > 0
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600

    cassette = tmp_path / "run.cassette.json"
    record = " ".join(simulator("record", "--out", str(cassette), "--", "zread", "version"))
    done, _ = run(["sh", "-c", umask_0(f"{record} --stdio")], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(cassette.read_bytes())["format"] == "zread-sim-cassette"
    assert stat.S_IMODE(cassette.stat().st_mode) == 0o600


@pytest.mark.timeout(30)
def test_config_yaml_and_login_json_are_created_0600(tmp_path: Path, bin_dir: Path) -> None:
    home = make_home(tmp_path)
    env = environment(tmp_path, home, bin_dir)
    with Program(umask_0("zread config --stdio"), env=env, cwd=tmp_path, shell=True) as editor:
        editor.read_event(TIMEOUT)
        editor.send({"type": "update_fields", "params": {"fields": {"max_retries": "1"}}})
        assert editor.read_event(TIMEOUT)["error"] == ""
        editor.send({"type": "save", "params": {}})
        assert editor.read_until_done(TIMEOUT)["vm"]["saved"] is True
        editor.finish()
    config = home / ".zread" / "config.yaml"
    assert "max_retries: 1" in config.read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    with Program(umask_0("zread login --stdio"), env=env, cwd=tmp_path, shell=True) as login:
        login.read_until(lambda e: "select_region" in e["waiting_for"], TIMEOUT)
        login.send({"type": "select_region", "params": {"region": "cn"}})
        gate = login.read_until(lambda e: "select_model" in e["waiting_for"], TIMEOUT)
        login.send({"type": "select_model", "params": {"model": gate["vm"]["avail_models"][0]}})
        assert login.read_until_done(TIMEOUT)["vm"]["state"] == "done"
        login.finish()
    account = home / ".zread" / "login.json"
    assert isinstance(json.loads(account.read_bytes()), dict)
    assert stat.S_IMODE(account.stat().st_mode) == 0o600
    assert temp_files(home) == []
