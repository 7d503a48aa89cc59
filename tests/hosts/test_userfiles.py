"""simulator.hosts.userfiles: the user's side of zread's files, in real directories.

The account and config a session starts from, saving a config or a login (round trip,
0600, through a dotfiles link), many processes on one HOME, and the log."""

from __future__ import annotations

import datetime as dt
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from simulator.core.effects import SaveConfig, SaveLogin
from simulator.formats.config import config_values, read_config
from simulator.formats.login import decode_login, encode_login
from simulator.hosts.dirfd import FilesError
from simulator.hosts.files import FileStore
from simulator.scenario import load_scenario
from simulator.virtual import start
from tests.e2e.helpers import run_starved
from tests.samples import ZREAD_DEFAULT

CONFIG = ZREAD_DEFAULT.decode()
NOON = dt.datetime(2026, 4, 6, 13, 2, 13)


def login_bytes(username: str, region: str, model: str) -> bytes:
    return encode_login(username, region, model, logged_in_at=NOON)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def store(home: Path, project: Path) -> FileStore:
    return FileStore(home, project, clock=lambda: NOON)


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
    (home / ".zread" / "login.json").write_bytes(login_bytes("mona", "cn", "glm-4.6"))
    world = store(home, project).world(load_scenario("default").world)
    assert world.account.logged_in is True and world.account.username == "mona"


def test_a_zread_dir_without_login_or_key_is_logged_out(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    (home / ".zread" / "config.yaml").write_text(CONFIG)
    assert store(home, project).world(load_scenario("default").world).account.logged_in is False
    (home / ".zread" / "login.json").write_bytes(login_bytes("ada", "cn", "glm-5"))
    world = store(home, project).world(load_scenario("default").world)
    assert world.account.logged_in is True and world.account.username == "ada"


def test_a_config_that_cannot_be_read_is_a_files_error_naming_it(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text("language: [zh\n")
    with pytest.raises(FilesError, match=str(path)):
        store(home, project).world(load_scenario("default").world)
    assert path.read_text() == "language: [zh\n"  # left as it was


def test_save_config_writes_only_what_changed_and_keeps_unknown_keys(
    home: Path, project: Path
) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text(CONFIG + "extra: kept\n")
    initial = {"language": "zh", "max_retries": "0", "llm_model": "glm-5"}
    values = {**initial, "max_retries": "3"}
    store(home, project).apply(SaveConfig(values, initial))
    doc = read_config(path.read_bytes())
    assert doc["concurrency"]["max_retries"] == 3 and doc["extra"] == "kept"
    assert doc["language"] == "zh" and doc["llm"]["model"] == "glm-5"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_save_login_writes_login_json(home: Path, project: Path) -> None:
    store(home, project).apply(SaveLogin("ada", "global", "glm-4.6"))
    record = decode_login((home / ".zread" / "login.json").read_bytes())
    assert (record.username, record.region, record.model) == ("ada", "global", "glm-4.6")
    assert oct((home / ".zread" / "login.json").stat().st_mode & 0o777) == "0o600"


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
    values = config_values(read_config((home / ".zread" / "config.yaml").read_bytes()))
    assert {key: values[key] for key in keys} == {key: f"v-{key}" for key in keys}
    assert sorted(os.listdir(home / ".zread")) == ["config.yaml", "log"]  # no lock, no temp


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
    values = config_values(read_config((dotfiles / "zread.yaml").read_bytes()))
    assert values["language"] == "en"
    assert values["llm_model"] == "glm-5"
    assert sorted(p.name for p in dotfiles.iterdir()) == ["zread.yaml"]


def saving(name: str) -> object:
    """The effect that writes the HOME file ``name`` (config.yaml or login.json)."""
    if name == "config.yaml":
        return SaveConfig({"language": "en"}, initial={"language": "zh"})
    return SaveLogin("octocat", "cn", "glm-4.6")


@pytest.mark.parametrize("name", ["config.yaml", "login.json"])
def test_a_link_to_nothing_is_refused_and_nothing_is_created_through_it(
    home: Path, project: Path, tmp_path: Path, name: str
) -> None:
    (home / ".zread").mkdir()
    target = tmp_path / "elsewhere" / name
    link = home / ".zread" / name
    link.symlink_to(target)
    effect = saving(name)
    with pytest.raises(FilesError, match="does not exist"):
        store(home, project).apply(effect)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert not target.parent.exists()
    assert [p.name for p in (home / ".zread").iterdir()] == [name]  # no lock file, no temp


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


def make_loop(link: Path, *, through: str) -> None:
    """``link`` as a loop of links: to itself (``through`` empty) or through another."""
    if through:
        link.symlink_to(through)
        (link.parent / through).symlink_to(link.name)
    else:
        link.symlink_to(link.name)


@pytest.mark.parametrize("through", ["", "other.yaml"], ids=["itself", "two-links"])
@pytest.mark.parametrize("name", ["config.yaml", "login.json"])
def test_a_link_loop_is_one_error_naming_it_and_nothing_is_written(
    home: Path, project: Path, name: str, through: str
) -> None:
    (home / ".zread").mkdir()
    link = home / ".zread" / name
    make_loop(link, through=through)
    before = sorted(os.listdir(home / ".zread"))
    effect = saving(name)
    said = f"^{link}: a symbolic link loop; zread-sim neither reads nor writes it$"
    with pytest.raises(FilesError, match=said):
        store(home, project).apply(effect)
    with pytest.raises(FilesError, match=said):
        store(home, project).world(load_scenario("default").world)
    assert sorted(os.listdir(home / ".zread")) == before and link.is_symlink()


@pytest.mark.parametrize("through", ["", "other.log"], ids=["itself", "two-links"])
def test_a_log_in_a_link_loop_is_not_written_and_the_run_goes_on(
    home: Path, project: Path, through: str
) -> None:
    (home / ".zread" / "log").mkdir(parents=True)
    make_loop(home / ".zread" / "log" / "zread.log", through=through)
    (home / ".zread" / "config.yaml").write_text(CONFIG.replace('api_key: ""', "api_key: sk-0"))
    session = start("generate", "-y", speed=0, home=home, project=project)
    done = session.wait_done()
    session.close()
    assert done["error"] == "" and done["vm"]["state"] == "done"
    assert (project / ".zread/wiki/current").is_file()


def test_a_save_keeps_the_users_comments_anchors_and_quoting(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    written = (
        "# my zread settings\n"
        "language: 'zh'  # the UI\n"
        'doc_language: "zh"\n'
        "llm: &llm\n"
        "  provider: z.ai\n"
        "  model: glm-5\n"
        "  api_key: ''\n"
        "  base_url: https://open.bigmodel.cn/api/paas/v4\n"
        "backup: *llm\n"
        "concurrency:\n"
        "  max_concurrent: 1\n"
        "  max_retries: 0   # none\n"
    )
    path.write_text(written)
    initial = {"max_retries": "0", "language": "zh"}
    store(home, project).apply(SaveConfig({**initial, "max_retries": "3"}, initial))
    assert path.read_text() == written.replace("max_retries: 0   #", "max_retries: 3   #")
    assert oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("name", "data", "limit"),
    [
        ("config.yaml", b"a: " + b"[" * 900 + b"]" * 900 + b"\n", "32"),
        ("config.yaml", b"a: &a [*a]\n", "alias"),
        ("config.yaml", b"x: " + b"y" * (80 << 10) + b"\n", "64 KiB"),
        ("login.json", b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}", "32"),
        ("login.json", b" " * (65 << 10) + b"{}", "64 KiB"),
    ],
)
def test_a_file_past_a_bound_is_one_error_naming_it_and_the_limit(
    home: Path, project: Path, name: str, data: bytes, limit: str
) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / name
    path.write_bytes(data)
    with pytest.raises(FilesError) as caught:
        store(home, project).world(load_scenario("default").world)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and limit in message and "\n" not in message
    assert path.read_bytes() == data


def test_the_log_gets_one_line_per_change_and_no_other_file(home: Path, project: Path) -> None:
    (home / ".zread").mkdir()
    files = store(home, project)
    files.world(load_scenario("default").world)
    files.apply(SaveLogin("ada", "global", "glm-4.6"))
    lines = (home / ".zread" / "log" / "zread.log").read_text().splitlines()
    assert len(lines) == 2 and "start: seed 0" in lines[0] and "logged in: ada" in lines[1]
    assert sorted(os.listdir(home / ".zread")) == ["log", "login.json"]


@pytest.mark.parametrize("name", ["config.yaml", "login.json"])
def test_a_pipe_in_place_of_a_file_is_refused_not_waited_on(
    home: Path, project: Path, name: str
) -> None:
    (home / ".zread").mkdir()
    pipe = home / ".zread" / name
    os.mkfifo(pipe)
    with pytest.raises(FilesError, match=f"^{pipe}: not a regular file"):
        store(home, project).world(load_scenario("default").world)  # at once
    assert stat.S_ISFIFO(pipe.stat().st_mode)  # left as it was


def test_a_pipe_in_place_of_the_log_is_not_waited_on(home: Path, project: Path) -> None:
    (home / ".zread" / "log").mkdir(parents=True)
    os.mkfifo(home / ".zread" / "log" / "zread.log")
    files = store(home, project)
    files.world(load_scenario("default").world)
    files.apply(SaveLogin("ada", "global", "glm-4.6"))
    assert decode_login((home / ".zread" / "login.json").read_bytes()).username == "ada"


def test_a_save_larger_than_config_yaml_may_be_is_refused_and_nothing_written(
    home: Path, project: Path
) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text(CONFIG)
    initial = {"llm_api_key": ""}
    with pytest.raises(FilesError, match=f"^{path}: larger than 64 KiB.*: not saved$"):
        store(home, project).apply(SaveConfig({"llm_api_key": "k" * 100_000}, initial))
    assert path.read_text() == CONFIG


def test_an_integer_too_long_to_build_is_one_error_naming_the_file(
    home: Path, project: Path
) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text("concurrency:\n    max_concurrent: " + "9" * 5000 + "\n")
    with pytest.raises(FilesError, match=f"^{path}: a number has too many digits to read$"):
        store(home, project).world(load_scenario("default").world)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "max_concurrent: 'abc' is not a whole number"),
        ("1.5", "max_concurrent: '1.5' is not a whole number"),
        ("9" * 40, "is not a whole number"),
        ("99", "max_concurrent must be an integer 1-64"),
    ],
)
def test_a_config_value_of_the_wrong_kind_is_named_in_the_simulators_words(
    home: Path, project: Path, value: str, message: str
) -> None:
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text(f"concurrency:\n    max_concurrent: {value}\n")
    with pytest.raises(FilesError) as caught:
        store(home, project).world(load_scenario("default").world)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and message in text
    assert "invalid literal" not in text and "int()" not in text


def test_out_of_descriptors_a_config_is_never_not_a_regular_file(home: Path) -> None:
    """However few descriptors are left, a save writes the config or says none was
    left; never that ``config.yaml`` is not a regular file, and the file is whole."""
    (home / ".zread").mkdir()
    path = home / ".zread" / "config.yaml"
    path.write_text(CONFIG)
    setup = (
        "from pathlib import Path\n"
        "from simulator.core.effects import SaveConfig\n"
        "from simulator.errors import OutOfResources\n"
        "from simulator.formats import config_edit\n"
        "from simulator.hosts.files import FileStore\n"
        f"store = FileStore({str(home)!r}, None)\n"
        "effect = SaveConfig({'max_retries': '7'}, {'max_retries': '0'})"
    )
    code = (
        "try:\n"
        "    store.apply(effect)\n"
        "    print('saved')\n"
        "except OutOfResources as err:\n"
        "    print(err)\n"
    )
    said = set()
    for spare in range(6):
        path.write_text(CONFIG)
        done = run_starved(setup, code, spare)
        assert done.returncode == 0, done.stderr
        said.add(done.stdout)
        doc = read_config(path.read_bytes())
        saved = done.stdout == "saved\n"
        assert doc["concurrency"]["max_retries"] == (7 if saved else 0)
    assert said == {
        "out of file descriptors while saving the config (ulimit -n is 256)\n",
        "saved\n",
    }
    assert [p.name for p in (home / ".zread").iterdir() if p.name.endswith(".tmp")] == []


# -- a save's temporary files -------------------------------------------------------------

STALE = (".config.yaml.0a1b2c3d.tmp", ".login.json.deadbeef.tmp")
NOT_A_SAVES = (
    ".config.yaml.tmp",
    ".config.yaml.0A1B2C3D.tmp",
    ".config.yaml.0a1b2c3.tmp",
    ".wiki.json.0a1b2c3d.tmp",
    "config.yaml.0a1b2c3d.tmp",
)


def plant_temps(home: Path) -> Path:
    """``.zread/`` with a killed save's temporary files (holding a key, 0600), names
    that are not a save's, a link and a directory named as one, and one in ``log/``."""
    user = home / ".zread"
    (user / "log").mkdir(parents=True)
    for name in (*STALE, *NOT_A_SAVES, "log/.config.yaml.55556666.tmp"):
        (user / name).write_text("llm:\n    api_key: sk-secret\n")
        (user / name).chmod(0o600)
    (home / "mine").write_text("the user's\n")
    (user / ".config.yaml.11112222.tmp").symlink_to(home / "mine")
    (user / ".login.json.33334444.tmp").mkdir()
    return user


def test_a_killed_saves_temporary_files_are_removed_by_the_next_run(
    home: Path, project: Path
) -> None:
    user = plant_temps(home)
    store(home, project).world(load_scenario("default").world)
    assert not any((user / name).exists() for name in STALE)
    kept = {*NOT_A_SAVES, ".config.yaml.11112222.tmp", ".login.json.33334444.tmp", "log"}
    assert set(os.listdir(user)) == kept
    assert (user / ".config.yaml.11112222.tmp").is_symlink()
    assert (home / "mine").read_text() == "the user's\n"
    assert ".config.yaml.55556666.tmp" in os.listdir(user / "log")


def test_a_save_removes_them_too(home: Path, project: Path) -> None:
    user = plant_temps(home)
    store(home, project).apply(SaveConfig({"language": "de"}, {}))
    assert not any((user / name).exists() for name in STALE)
    assert read_config((user / "config.yaml").read_bytes())["language"] == "de"


def test_the_temporary_file_of_a_save_that_holds_zread_is_kept(home: Path, project: Path) -> None:
    import fcntl

    user = plant_temps(home)
    fd = os.open(user, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a save does, for as long as its file exists
        store(home, project).world(load_scenario("default").world)
        assert all((user / name).exists() for name in STALE)
    finally:
        os.close(fd)
    store(home, project).world(load_scenario("default").world)
    assert not any((user / name).exists() for name in STALE)


def test_a_refused_config_leaves_the_temporary_files_too(home: Path, project: Path) -> None:
    user = plant_temps(home)
    (user / "config.yaml").write_text("language: [unclosed\n")
    with pytest.raises(FilesError):
        store(home, project).world(load_scenario("default").world)
    assert all((user / name).exists() for name in STALE)


# -- the scenario's login, between runs ----------------------------------------------------


def account_of(home: Path, project: Path, scenario: str = "default") -> tuple[bool, str]:
    world = store(home, project).world(load_scenario(scenario).world)
    return world.account.logged_in, world.account.username


@pytest.mark.parametrize("made", ["nothing", "wiki and log", "config without a key"])
def test_a_zread_folder_without_login_json_leaves_the_scenarios_login(
    home: Path, project: Path, made: str
) -> None:
    user = home / ".zread"
    user.mkdir()
    if made == "wiki and log":
        (user / "wiki" / "versions").mkdir(parents=True)
        (user / "log").mkdir()
    elif made == "config without a key":
        (user / "config.yaml").write_text("language: de\nllm:\n    model: m\n")
    assert account_of(home, project) == (True, "octocat")


def test_a_config_yaml_with_the_scenarios_own_key_changes_no_login(
    home: Path, project: Path, tmp_path: Path
) -> None:
    scenario = tmp_path / "out.toml"
    scenario.write_text('extends = "default"\n[world.account]\nlogged_in = false\n')
    (home / ".zread").mkdir()
    key = load_scenario("default").world.config.llm_api_key
    (home / ".zread" / "config.yaml").write_text(f"llm:\n    api_key: {key}\n")
    assert account_of(home, project) == (True, "octocat")
    assert account_of(home, project, str(scenario)) == (False, "octocat")


def test_an_empty_key_logs_out_only_where_the_scenario_had_one(
    home: Path, project: Path, tmp_path: Path
) -> None:
    (home / ".zread").mkdir()
    (home / ".zread" / "config.yaml").write_bytes(ZREAD_DEFAULT)  # api_key: ""
    assert account_of(home, project) == (False, "")
    keyless = tmp_path / "keyless.toml"
    keyless.write_text('extends = "default"\n[world.config]\nllm_api_key = ""\n')
    assert account_of(home, project, str(keyless)) == (True, "octocat")
    (home / ".zread" / "login.json").write_bytes(login_bytes("mona", "cn", "glm-4.6"))
    assert account_of(home, project) == (True, "mona")


def test_two_runs_in_one_folder_are_logged_in_alike(tmp_path: Path) -> None:
    """HOME and project one folder: the first run's wiki makes ``.zread/``, and the
    second run is logged in as the first was."""
    folder = tmp_path / "both"
    folder.mkdir()
    for run in range(2):
        session = start("generate", "-y", speed=0, home=folder)
        done = session.wait_done()
        session.close()
        assert done["vm"]["state"] == "done", (run, done["vm"].get("error"))
    assert len(os.listdir(folder / ".zread" / "wiki" / "versions")) == 2
