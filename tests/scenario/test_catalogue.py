"""Tests for simulator.scenario: the built-in catalogue, extends chains, and refusals."""

from __future__ import annotations

import errno
import tomllib
from pathlib import Path

import pytest

from simulator.scenario import (
    Scenario,
    ScenarioError,
    builtin_names,
    builtin_text,
    load_scenario,
)
from simulator.scenario.failures import Failure
from simulator.scenario.timing import Delay
from simulator.scenario.world import World


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def refusal(ref: str | Path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(ref))
    return str(info.value)


# -- the built-in catalogue ---------------------------------------------------------


def test_builtin_names_default_first_and_unique() -> None:
    names = builtin_names()
    assert names[0] == "default"
    assert len(names) == len(set(names))
    assert {"up-to-date", "package-manager", "download-error", "login-timeout"} <= set(names)


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_loads_with_a_description(name: str) -> None:
    scenario = load_scenario(name)
    assert isinstance(scenario, Scenario)
    assert scenario.name == name
    assert scenario.description.strip()
    if name != "default":
        assert scenario.extends  # every other built-in stands on default
        # it inherits default's timing unless it overrides it
        assert load_scenario("default").timing.keys() <= scenario.timing.keys()


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_text_is_toml(name: str) -> None:
    data = tomllib.loads(builtin_text(name))
    assert isinstance(data, dict)
    assert data.get("description")


def test_load_scenario_defaults_to_default() -> None:
    assert load_scenario() == load_scenario("default")


def test_default_world_is_the_world_defaults() -> None:
    assert load_scenario("default").world == World()


def test_builtins_change_what_they_describe() -> None:
    default = load_scenario("default").world.release
    assert load_scenario("package-manager").world.release.package_manager
    up = load_scenario("up-to-date").world.release
    assert up.latest_version == up.current_version
    assert default.latest_version != default.current_version
    assert [f.point for f in load_scenario("download-error").failures] == ["download"]
    timeout = load_scenario("login-timeout")
    assert timeout.world.login.auth_timeout < load_scenario().world.login.auth_timeout


def test_unknown_builtin_name() -> None:
    text = refusal("no-such-scenario")
    assert "no-such-scenario" in text
    assert text.endswith("(see: zread-sim scenarios)")  # the installed command lists them
    with pytest.raises(ScenarioError):
        builtin_text("no-such-scenario")


def test_an_empty_name_is_refused_in_one_line() -> None:
    text = refusal("")
    assert text == (
        "empty scenario name: give a built-in name or a TOML path (see: zread-sim scenarios)"
    )
    with pytest.raises(ScenarioError, match="empty scenario name"):
        load_scenario("", text='description = "x"')


def test_an_empty_name_is_refused_by_the_python_api() -> None:
    from simulator.runners.virtual import ZreadSim

    sim = ZreadSim()
    try:
        with pytest.raises(ScenarioError, match="empty scenario name"):
            sim.start("generate", "-y", scenario="")
    finally:
        sim.close()


# -- files and extends -------------------------------------------------------------


def test_file_without_extends_extends_default(tmp_path: Path) -> None:
    path = write(tmp_path / "mine.toml", '[world.config]\nlanguage = "fr"\n')
    scenario = load_scenario(str(path))
    default = load_scenario("default")
    assert scenario.name == "mine"
    assert "default" in scenario.extends
    assert scenario.world.config.language == "fr"
    # deep merge: the rest of [world.config] and every other table come from default
    assert scenario.world.config.llm_model == default.world.config.llm_model
    assert scenario.world.config.max_retries == default.world.config.max_retries
    assert scenario.world.release == default.world.release
    assert scenario.timing == default.timing


def test_empty_file_equals_default_but_for_its_name(tmp_path: Path) -> None:
    scenario = load_scenario(str(write(tmp_path / "blank.toml", "")))
    default = load_scenario("default")
    assert scenario.world == default.world
    assert scenario.timing == default.timing
    assert scenario.failures == default.failures


def test_extends_a_builtin_by_name(tmp_path: Path) -> None:
    path = write(
        tmp_path / "brew.toml", 'extends = "package-manager"\n[world.release]\nchannel = "beta"\n'
    )
    scenario = load_scenario(str(path))
    assert scenario.world.release.package_manager == "brew"
    assert scenario.world.release.channel == "beta"
    assert "package-manager" in scenario.extends
    assert scenario.timing == load_scenario("default").timing  # default via package-manager


def test_arrays_are_replaced_not_appended(tmp_path: Path) -> None:
    write(
        tmp_path / "parent.toml",
        '[[failures]]\npoint = "check"\n[[failures]]\npoint = "save"\n'
        '[world.login]\nmodels = ["a", "b", "c"]\n',
    )
    child = write(
        tmp_path / "child.toml",
        'extends = "parent.toml"\n[[failures]]\npoint = "download"\n'
        '[world.login]\nmodels = ["z"]\n',
    )
    scenario = load_scenario(str(child))
    assert scenario.failures == [Failure(point="download")]
    assert scenario.world.login.models == ["z"]


def test_tables_merge_through_a_chain_of_files(tmp_path: Path) -> None:
    write(
        tmp_path / "base.toml",
        '[world.config]\nlanguage = "de"\nmax_retries = 7\n'
        "[timing]\ncheck = { uniform = [5.0, 6.0] }\n",
    )
    write(
        tmp_path / "sub" / "middle.toml",
        'extends = "../base.toml"\n[world.config]\nmax_retries = 1\n',
    )
    top = write(
        tmp_path / "sub" / "top.toml",
        'extends = "middle.toml"\ndescription = "top"\n[world.account]\nusername = "ada"\n',
    )
    scenario = load_scenario(str(top))
    default = load_scenario("default")
    assert scenario.description == "top"
    assert scenario.world.account.username == "ada"
    assert scenario.world.config.language == "de"
    assert scenario.world.config.max_retries == 1
    assert scenario.world.config.llm_provider == default.world.config.llm_provider
    assert scenario.timing["check"] == Delay(uniform=(5.0, 6.0))
    assert "download_step" not in scenario.timing  # update's chart gives its default
    assert "middle.toml" in scenario.extends


def test_relative_extends_resolves_against_the_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "lib" / "shared.toml", '[world.account]\nusername = "shared"\n')
    child = write(tmp_path / "lib" / "child.toml", 'extends = "shared.toml"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_scenario(str(child)).world.account.username == "shared"


def test_child_changes_a_delays_kind(tmp_path: Path) -> None:
    # default says check = { uniform = [...] }; a file only states what differs.
    path = write(tmp_path / "fast.toml", "[timing]\ncheck = { fixed = 0.1 }\n")
    assert load_scenario(str(path)).timing["check"] == Delay(fixed=0.1)


def test_explicit_name_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "file.toml", 'name = "pretty"\n')
    assert load_scenario(str(path)).name == "pretty"


# -- refusals ---------------------------------------------------------------------


def test_unknown_key_names_file_and_dotted_key(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", "[world.config]\nnope = 1\n")
    text = refusal(path)
    assert str(path) in text
    assert "world.config.nope: unknown key" in text


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", "colour = 1\n")
    text = refusal(path)
    assert str(path) in text
    assert "colour: unknown key" in text


def test_wrong_type_names_key_and_reason(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", '[world.config]\nmax_retries = "three"\n')
    text = refusal(path)
    assert str(path) in text
    assert "world.config.max_retries" in text
    assert "int" in text
    assert "str" in text


def test_impossible_value_names_table_and_reason(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", "[world.config]\nmax_concurrent = 65\n")
    text = refusal(path)
    assert str(path) in text
    assert "world.config" in text
    assert "max_concurrent" in text


def test_bad_failure_names_its_index(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", '[[failures]]\npoint = "check"\n[[failures]]\npoint = 7\n')
    text = refusal(path)
    assert "failures[1].point" in text


def test_bad_delay_names_its_key(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", "[timing]\nmy_step = { fixd = 1.0 }\n")
    text = refusal(path)
    assert str(path) in text
    assert "timing.my_step" in text


def test_error_in_a_parent_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "parent.toml", "[world.config]\nnope = 1\n")
    child = write(tmp_path / "child.toml", 'extends = "parent.toml"\n')
    text = refusal(child)
    assert "world.config.nope: unknown key" in text


def test_invalid_toml(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.toml", "[world\nx = \n")
    text = refusal(path)
    assert str(path) in text
    assert "TOML" in text


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    text = refusal(path)
    assert "absent.toml" in text


def test_missing_parent_file(tmp_path: Path) -> None:
    child = write(tmp_path / "child.toml", 'extends = "gone.toml"\n')
    assert "gone.toml" in refusal(child)


def test_extends_not_a_string(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", "extends = 3\n")
    assert "extends" in refusal(path)


def test_extends_cycle(tmp_path: Path) -> None:
    write(tmp_path / "a.toml", 'extends = "b.toml"\n')
    write(tmp_path / "b.toml", 'extends = "a.toml"\n')
    assert "cycle" in refusal(tmp_path / "a.toml")


@pytest.mark.parametrize("spelling", ["self.toml", "./self.toml"])
def test_extends_itself(tmp_path: Path, spelling: str) -> None:
    path = write(tmp_path / "self.toml", f'extends = "{spelling}"\n')
    assert "cycle" in refusal(path)


def test_extends_cycle_spelled_with_dot_slash(tmp_path: Path) -> None:
    write(tmp_path / "a.toml", 'extends = "./b.toml"\n')
    write(tmp_path / "b.toml", 'extends = "./a.toml"\n')
    assert "cycle" in refusal(tmp_path / "a.toml")


def test_extends_unknown_builtin(tmp_path: Path) -> None:
    path = write(tmp_path / "child.toml", 'extends = "no-such-builtin"\n')
    assert "no-such-builtin" in refusal(path)


def test_a_scenario_from_text_extends_default_and_takes_its_name() -> None:
    scenario = load_scenario("mine", text='[world.login]\napprover = "control"\n')
    assert scenario.name == "mine"
    assert scenario.world.login.approver == "control"
    assert scenario.timing == load_scenario().timing  # the rest is default's


def test_a_scenario_from_text_that_is_not_toml_names_itself() -> None:
    with pytest.raises(ScenarioError, match="scenario mine: not valid TOML"):
        load_scenario("mine", text="[world")


# -- [[faults.http]] ---------------------------------------------------------------------

HTTP_ONLY = """
[[faults.http]]
path = "/api/pages/*"
status = 503
body = "busy"

[[faults.http]]
method = "GET"
delay = { fixed = 2.0 }
first = 1
"""


def test_http_faults_alone_make_faults_a_table() -> None:
    scenario = load_scenario("s", text=HTTP_ONLY)
    assert scenario.faults == []
    assert [f.kind for f in scenario.http_faults] == ["status", "delay"]
    first, second = scenario.http_faults
    assert (first.path, first.method, first.status, first.body) == (
        "/api/pages/*",
        "*",
        503,
        "busy",
    )
    assert (second.method, second.delay, second.first) == ("GET", Delay(fixed=2.0), 1)


def test_http_faults_after_stdio_faults_are_lifted_out_of_the_last_entry() -> None:
    text = '[[faults]]\nkind = "split"\n[[faults]]\nkind = "duplicate"\n' + HTTP_ONLY
    scenario = load_scenario("s", text=text)
    assert [f.kind for f in scenario.faults] == ["split", "duplicate"]
    assert [f.kind for f in scenario.http_faults] == ["status", "delay"]


def test_a_faults_table_takes_stdio_and_http_arrays() -> None:
    text = '[faults]\nstdio = [{ kind = "split" }]\nhttp = [{ reset = true }]\n'
    scenario = load_scenario("s", text=text)
    assert [f.kind for f in scenario.faults] == ["split"]
    assert [f.kind for f in scenario.http_faults] == ["reset"]


def test_every_builtin_still_has_its_faults_and_no_http_ones() -> None:
    for name in builtin_names():
        scenario = load_scenario(name)
        data = tomllib.loads(builtin_text(name))
        assert len(scenario.faults) == len(data.get("faults", [])), name
        assert scenario.http_faults == [], name


def test_a_child_stating_one_kind_of_fault_keeps_the_others_of_its_parent(
    tmp_path: Path,
) -> None:
    write(tmp_path / "parent.toml", '[[faults]]\nkind = "split"\n' + HTTP_ONLY)
    http_child = write(
        tmp_path / "http.toml", 'extends = "parent.toml"\n[[faults.http]]\nreset = true\n'
    )
    scenario = load_scenario(str(http_child))
    assert [f.kind for f in scenario.faults] == ["split"]
    assert [f.kind for f in scenario.http_faults] == ["reset"]  # its array replaces the parent's
    stdio_child = write(
        tmp_path / "stdio.toml", 'extends = "parent.toml"\n[[faults]]\nkind = "hang"\n'
    )
    scenario = load_scenario(str(stdio_child))
    assert [f.kind for f in scenario.faults] == ["hang"]
    assert [f.kind for f in scenario.http_faults] == ["status", "delay"]


def test_stdio_faults_still_replace_a_parents_whole(tmp_path: Path) -> None:
    child = write(tmp_path / "c.toml", 'extends = "noisy"\n[[faults]]\nkind = "hang"\n')
    assert [f.kind for f in load_scenario(str(child)).faults] == ["hang"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[faults.http]]\nstatus = 700\n", "faults.http[0]: status must be an integer 100-599"),
        (
            "[[faults.http]]\nreset = true\n[[faults.http]]\nreset = true\nstatus = 500\n",
            "faults.http[1]: an HTTP fault takes exactly one of status, delay, dribble, reset, "
            "close_after_headers",
        ),
        ("[[faults.http]]\nreset = true\ntoxicity = 1\n", "faults.http[0].toxicity: unknown key"),
        ("[[faults.http]]\ndelay = { fixed = -1 }\n", "faults.http[0].delay: fixed must be >= 0"),
        ('[[faults.http]]\nstatus = "503"\n', "faults.http[0].status: expected an integer"),
        ("[faults]\nhttpx = []\n", "faults.httpx: unknown key"),
        ("[faults]\nhttp = 3\n", "faults.http: expected an array"),
        (
            '[[faults]]\nkind = "split"\n[faults.http]\nreset = true\n',
            "faults.http: expected an array",
        ),
        ("http_faults = []\n", "http_faults: unknown key"),
        ('[[faults]]\nkind = "nope"\n', "faults[0].kind"),
    ],
)
def test_a_bad_http_fault_names_the_file_and_its_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path / "bad.toml", text)
    assert refusal(path).startswith(f"scenario {path}: {message}")


def test_a_bad_http_fault_in_a_parent_names_the_file_passed(tmp_path: Path) -> None:
    write(tmp_path / "parent.toml", "[[faults.http]]\nstatus = 1\n")
    child = write(tmp_path / "child.toml", 'extends = "parent.toml"\n')
    assert refusal(child).startswith(f"scenario {child}: faults.http[0]: status must be")


def test_out_of_descriptors_reading_a_scenario_file_is_raised_not_a_scenario_error(
    tmp_path: Path,
) -> None:
    from tests.e2e.helpers import run_starved

    (tmp_path / "s.toml").write_text('name = "s"\n')
    done = run_starved(
        "from simulator.scenario import load_scenario\n"
        "import simulator.formats.bounds, simulator.regularfile",  # imported when a file is read
        "try:\n"
        f"    load_scenario({str(tmp_path / 's.toml')!r})\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, getattr(err, 'errno', None))\n",
        spare=0,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"OSError {errno.EMFILE}\n"
