"""Every scenario key does what docs/scenarios.md says, seen in a command's events.

In-process where no process is needed: ``load_scenario(path)`` and a ``Session`` driven
at speed 0 (virtual time), with a real :class:`EffectHost` for browse's server. The
refusal of a bad file is checked through the CLI, as a user meets it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.scenario import Scenario, failures, faults, load_scenario, timing, world
from statecharts import COMMANDS, failure_points, load_chart
from statecharts.generate import GenerateFlags

DOC = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"
REGION = {"type": "select_region", "params": {"region": "global"}}
MODEL = {"type": "select_model", "params": {"model": "glm-4.6"}}
DOWNLOAD = {"type": "download"}
QUIT = {"type": "quit"}


def drive(
    command: str,
    scenario: str | Scenario = "default",
    script: list[dict[str, Any]] | tuple[()] = (),
    *,
    seed: int = 0,
    speed: float = 0.0,
    **flags: Any,
) -> list[dict[str, Any]]:
    """The events of one session: timers run out first, then the next scripted command."""
    loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
    session = Session(
        load_chart(command),
        loaded,
        flags=load_chart(command).flags_type(**flags),
        seed=seed,
        speed=speed,
    )
    host = EffectHost()
    events: list[dict[str, Any]] = []

    def take(lines: Outcome) -> None:
        for effect, result in host.perform_all(0, lines.effects):
            take(session.resolve(effect, result))
        events.extend(json.loads(line) for line in lines)

    try:
        take(session.start())
        pending = list(script)
        while not session.done:
            deadline = session.next_deadline()
            if deadline is not None:
                take(session.advance(deadline, limit=1))
            elif pending:
                take(session.feed(json.dumps(pending.pop(0)).encode()))
            else:
                break
    finally:
        host.close()
    return events


def scenario(tmp_path: Path, text: str, name: str = "s") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def vms(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["vm"] for e in events]


def last_vm(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["done"] is True, events[-1]
    return dict(events[-1]["vm"])


def config_field(events: list[dict[str, Any]], key: str) -> str:
    (field,) = [f for f in events[0]["vm"]["fields"] if f["json_key"] == key]
    assert field["initial"] == field["value"]
    return str(field["value"])


# -- the documentation's examples ----------------------------------------------------


def doc_examples() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_doc_has_an_example_per_section() -> None:
    assert len(doc_examples()) >= 13


@pytest.mark.parametrize("index", range(len(doc_examples())))
def test_every_doc_example_loads(tmp_path: Path, index: int) -> None:
    text = doc_examples()[index]
    loaded = load_scenario(scenario(tmp_path, text, f"example{index}"))
    # Every example is a complete scenario a command can run on.
    for command in COMMANDS:
        Session(load_chart(command), loaded)


def test_the_doc_names_every_key_point_kind_and_delay() -> None:
    text = DOC.read_text(encoding="utf-8")
    structs = [
        Scenario,
        world.Account,
        world.Settings,
        world.Release,
        world.Login,
        world.Project,
        world.WikiVersion,
        world.Draft,
        failures.Failure,
        faults.Fault,
        timing.Delay,
        timing.Lognormal,
    ]
    names = {f.name for s in structs for f in msgspec.structs.fields(s)}
    names |= {f"world.{f.name}" for f in msgspec.structs.fields(world.World)} - {
        "world.browser_opens"
    }
    names |= {"browser_opens"} | set(failure_points()) | set(faults.KINDS)
    names |= {d for c in COMMANDS for d in load_chart(c).timing}
    missing = sorted(
        n for n in names if f"`{n}`" not in text and f"[{n}]" not in text and f"[[{n}]]" not in text
    )
    assert missing == []


def test_the_delays_the_doc_lists_are_the_charts_timing() -> None:
    """Each chart gives every delay it uses a default; the doc lists them all."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## [timing]") : text.index("## [[failures]]")]
    rows = re.findall(
        r"^\| `(\w+)` \| (update|login|browse|generate) \|[^|]*"
        r"\| uniform \[([\d.]+), ([\d.]+)\] \|$",
        section,
        re.M,
    )
    listed = {(name, command): (float(a), float(b)) for name, command, a, b in rows}
    assert listed == {
        (name, command): load_chart(command).timing[name].uniform
        for command in COMMANDS
        for name in load_chart(command).timing
    }


# -- [world]: every key has an observable effect --------------------------------------


def test_browser_opens(tmp_path: Path) -> None:
    path = scenario(tmp_path, "[world]\nbrowser_opens = false\n")
    warned = [vm["browser_warn"] for vm in vms(drive("login", path, [REGION, MODEL]))]
    assert any(warned)
    assert not any(vm["browser_warn"] for vm in vms(drive("login", "default", [REGION, MODEL])))
    serving = [vm for vm in vms(drive("browse", path, [QUIT])) if vm["state"] == "serving"]
    assert serving and serving[0]["browser_opened"] is False


def test_account_username(tmp_path: Path) -> None:
    path = scenario(tmp_path, '[world.account]\nusername = "alice"\n')
    assert last_vm(drive("login", path, [REGION, MODEL]))["username"] == "alice"
    assert last_vm(drive("login", "default", [REGION, MODEL]))["username"] == "octocat"


CONFIG_VALUES = {
    "language": "zh",
    "doc_language": "ja",
    "max_concurrent": 7,
    "max_retries": 5,
    "llm_provider": "openai",
    "llm_base_url": "https://api.example.test/v1",
    "llm_model": "gpt-x",
    "llm_api_key": "sk-test",
}


@pytest.mark.parametrize(("key", "value"), CONFIG_VALUES.items())
def test_config_values_are_configs_fields(tmp_path: Path, key: str, value: Any) -> None:
    path = scenario(tmp_path, f"[world.config]\n{key} = {json.dumps(value)}\n")
    assert config_field(drive("config", path), key) == str(value)
    assert config_field(drive("config", "default"), key) != str(value)


def test_config_read_only_field_shows_provider_and_model(tmp_path: Path) -> None:
    path = scenario(tmp_path, '[world.config]\nllm_provider = "openai"\nllm_model = "gpt-x"\n')
    (field,) = [f for f in drive("config", path)[0]["vm"]["fields"] if f["json_key"] == ""]
    assert field["value"] == "openai / gpt-x"


def test_max_concurrent_caps_running_pages(tmp_path: Path) -> None:
    def peak(path: str) -> int:
        events = drive("generate", path, yes=True)
        return max(sum(t["state"] == "running" for t in vm["pages"]["tasks"]) for vm in vms(events))

    assert peak(scenario(tmp_path, "[world.config]\nmax_concurrent = 2\n")) == 2
    assert peak("default") == 4


def test_max_retries_is_generates_max_retries(tmp_path: Path) -> None:
    path = scenario(tmp_path, "[world.config]\nmax_retries = 5\n")
    vm = last_vm(drive("generate", path, yes=True))
    assert vm["max_retries"] == 5
    assert {t["max_retries"] for t in vm["pages"]["tasks"]} == {5}


def test_release_in_version(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        '[world.release]\ncurrent_version = "1.2.3"\nchannel = "beta"\ngo_version = "go1.99"\n',
    )
    vm = last_vm(drive("version", path))
    assert (vm["version"], vm["channel"], vm["go_version"]) == ("1.2.3", "beta", "go1.99")
    default = last_vm(drive("version"))
    assert (default["version"], default["channel"], default["go_version"]) == (
        "0.2.13",
        "stable",
        "go1.24.4",
    )


def test_release_in_update(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        "[world.release]\n"
        'current_version = "1.0.0"\nlatest_version = "2.0.0"\n'
        'download_url = "https://dl.test/{version}/{os}-{arch}"\n'
        "download_bytes = 1000\ndownload_steps = 4\n",
    )
    events = drive("update", path, [DOWNLOAD, {"type": "restart"}])
    offer = next(vm for vm in vms(events) if vm["state"] == "has_update")
    assert offer["current_version"] == "1.0.0" and offer["latest_version"] == "2.0.0"
    assert re.fullmatch(r"https://dl\.test/2\.0\.0/\w+-\w+", offer["download_url"])
    steps = [vm for vm in vms(events) if vm["total_bytes"] and vm["state"] != "has_update"]
    assert {vm["total_bytes"] for vm in steps} == {1000}
    # One downloading event on entering, then one per step, the last at 100%.
    assert sum(vm["state"] == "downloading" for vm in vms(events)) == 1 + 4
    assert last_vm(events)["state"] == "done"


def test_release_download_steps_default_is_twelve() -> None:
    events = drive("update", "default", [DOWNLOAD])  # up to confirm_restart
    progress = [
        vm["download_percent"]
        for vm in vms(events)
        if vm["download_percent"] and vm["state"] == "downloading"
    ]
    assert len(progress) == 12 and progress[-1] == 100


def test_release_up_to_date_and_package_manager(tmp_path: Path) -> None:
    same = scenario(tmp_path, '[world.release]\nlatest_version = "0.2.13"\n', "same")
    assert last_vm(drive("update", same))["state"] == "up_to_date"
    brew = scenario(tmp_path, '[world.release]\npackage_manager = "scoop"\n', "brew")
    vm = last_vm(drive("update", brew))
    assert (vm["state"], vm["package_manager"]) == ("package_manager", "scoop")


def test_login_world(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        "[world.login]\n"
        'regions = ["eu"]\nmodels = ["m1", "m2"]\n'
        'authorize_url = "https://auth.test/go"\nauth_timeout = 7.5\n',
    )
    events = drive(
        "login",
        path,
        [REGION, {"type": "select_region", "params": {"region": "eu"}}, QUIT],
    )
    assert events[1]["error"].startswith("invalid params: unknown region 'global'")
    waiting = next(vm for vm in vms(events) if vm["state"] == "waiting")
    assert waiting["authorize_url"].startswith("https://auth.test/go?")
    assert waiting["auth_timeout"] == 7_500_000_000
    offered = next(vm for vm in vms(events) if vm["state"] == "select_model")
    assert offered["avail_models"] == ["m1", "m2"]
    # The default accepts any region and offers its own models.
    default = drive("login", "default", [REGION, QUIT])
    assert default[1]["error"] == "" and default[1]["vm"]["state"] == "init_flow"


def test_project_pages_and_name(tmp_path: Path) -> None:
    path = scenario(tmp_path, '[world.project]\nname = "other/repo"\npages = 5\n')
    vm = last_vm(drive("generate", path, yes=True))
    assert vm["pages"]["total"] == 5 and vm["done_total"] == 5
    titles = [t["title"] for t in last_vm(drive("generate", "default", yes=True))["pages"]["tasks"]]
    assert len(titles) == 16
    named = scenario(tmp_path, '[world.project]\nname = "other/repo"\n', "named")
    other = [t["title"] for t in last_vm(drive("generate", named, yes=True))["pages"]["tasks"]]
    assert other != titles


def test_wikis(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        '[[world.wikis]]\nid = "v1"\ntimestamp = "2026-01-02T03:04:05Z"\n\n'
        '[[world.wikis]]\nid = "v2"\ntimestamp = "2026-02-03T04:05:06Z"\ncurrent = true\n',
    )
    first = drive("browse", path, [QUIT])[0]["vm"]
    assert first["state"] == "select_version"
    assert first["versions"] == [
        {"id": "v1", "timestamp": "2026-01-02T03:04:05Z", "is_current": False},
        {"id": "v2", "timestamp": "2026-02-03T04:05:06Z", "is_current": True},
    ]
    assert first["has_current"] is True
    gate = drive("generate", path, [QUIT])[0]["vm"]["select_action"]
    assert gate["wiki_date"] == "2026-02-03T04:05:06Z"
    assert drive("browse", "default", [QUIT])[0]["vm"]["state"] == "loading"
    three = drive("browse", "versions", [QUIT])[0]["vm"]
    assert len(three["versions"]) == 3


def test_no_wikis(tmp_path: Path) -> None:
    path = scenario(tmp_path, "[world]\nwikis = []\n")
    assert last_vm(drive("browse", path))["state"] == "no_wiki"
    assert drive("generate", path, [QUIT])[0]["vm"]["select_action"]["scenario"] == "empty"


def test_wiki_current_false(tmp_path: Path) -> None:
    path = scenario(tmp_path, "[[world.wikis]]\n\n[[world.wikis]]\n")
    assert drive("browse", path, [QUIT])[0]["vm"]["has_current"] is False


def test_draft_done(tmp_path: Path) -> None:
    path = scenario(tmp_path, "[world.draft]\ndone = 4\n")
    gate = drive("generate", path, [QUIT])[0]["vm"]["select_action"]
    assert (gate["scenario"], gate["draft_done"], gate["draft_total"]) == ("has_draft", 4, 16)
    resumed = last_vm(drive("generate", path, yes=True, draft_action="resume"))
    assert [t["state"] for t in resumed["pages"]["tasks"]][:5] == ["resumed"] * 4 + ["done"]


# Each world key: a base world, the same with that key changed, the commands to look in.
TWO_WIKIS = "[[world.wikis]]\n\n[[world.wikis]]\ncurrent = true\n"
EVERY_WORLD_KEY: dict[str, tuple[str, str, list[str]]] = {
    "browser_opens": ("", "[world]\nbrowser_opens = false\n", ["login"]),
    "account.username": ("", '[world.account]\nusername = "bob"\n', ["login"]),
    "account.logged_in": ("", "[world.account]\nlogged_in = false\n", list(COMMANDS)),
    **{
        f"config.{key}": ("", f"[world.config]\n{key} = {json.dumps(value)}\n", ["config"])
        for key, value in CONFIG_VALUES.items()
    },
    "release.current_version": ("", '[world.release]\ncurrent_version = "0.1"\n', ["version"]),
    "release.latest_version": ("", '[world.release]\nlatest_version = "9.9"\n', ["update"]),
    "release.channel": ("", '[world.release]\nchannel = "dev"\n', ["version"]),
    "release.go_version": ("", '[world.release]\ngo_version = "go0"\n', ["version"]),
    "release.package_manager": ("", '[world.release]\npackage_manager = "apt"\n', ["update"]),
    "release.download_url": ("", '[world.release]\ndownload_url = "x"\n', ["update"]),
    "release.download_bytes": ("", "[world.release]\ndownload_bytes = 5\n", ["update"]),
    "release.download_steps": ("", "[world.release]\ndownload_steps = 3\n", ["update"]),
    "login.regions": ("", '[world.login]\nregions = ["eu"]\n', ["login"]),
    "login.models": ("", '[world.login]\nmodels = ["m"]\n', ["login"]),
    "login.authorize_url": ("", '[world.login]\nauthorize_url = "https://a"\n', ["login"]),
    "login.auth_timeout": ("", "[world.login]\nauth_timeout = 1.0\n", ["login"]),
    "project.name": ("", '[world.project]\nname = "x/y"\n', ["generate"]),
    "project.pages": ("", "[world.project]\npages = 3\n", ["generate"]),
    "wikis": ("", TWO_WIKIS, ["browse"]),
    "wikis.id": (TWO_WIKIS, TWO_WIKIS.replace("]]\n\n", ']]\nid = "w"\n\n', 1), ["browse"]),
    "wikis.timestamp": (
        TWO_WIKIS,
        TWO_WIKIS + 'timestamp = "2020-01-01T00:00:00Z"\n',
        ["generate", "browse"],
    ),
    "wikis.current": ("", "[[world.wikis]]\ncurrent = false\n", ["browse"]),
    "draft.done": ("[world.draft]\ndone = 1\n", "[world.draft]\ndone = 2\n", ["generate"]),
}
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "login": [REGION, MODEL],
    "update": [DOWNLOAD, {"type": "restart"}],
    "generate": [{"type": "select_action", "params": {"action": "generate"}}],
    "browse": [QUIT],
    "config": [QUIT],
    "version": [],
}


def comparable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events without browse's url (its port is the OS's choice)."""
    return [{**e, "vm": {k: v for k, v in e["vm"].items() if k != "url"}} for e in events]


@pytest.mark.parametrize("key", EVERY_WORLD_KEY)
def test_every_world_key_changes_some_commands_events(tmp_path: Path, key: str) -> None:
    base_text, changed_text, commands = EVERY_WORLD_KEY[key]
    base = scenario(tmp_path, base_text, "base")
    changed = scenario(tmp_path, changed_text, "changed")
    differ = [
        c
        for c in commands
        if comparable(drive(c, changed, SCRIPTS[c])) != comparable(drive(c, base, SCRIPTS[c]))
    ]
    assert differ, f"world.{key}: no command's events change"


# -- [timing] and speed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("delay", "command", "script"),
    [
        ("check", "update", []),
        ("download_step", "update", [DOWNLOAD]),
        ("init_flow", "login", [REGION]),
        ("open_browser", "login", [REGION]),
        ("authorize", "login", [REGION]),
        ("save_login", "login", [REGION, MODEL]),
        ("server_start", "browse", []),
        ("catalog_step", "generate", []),
        ("page", "generate", []),
        ("page_retry", "generate", []),
    ],
)
def test_each_delay_times_its_step(
    tmp_path: Path, delay: str, command: str, script: list[dict[str, Any]]
) -> None:
    """Fixed at 1000 s, the others at 0: the first wait is 1000 s x speed 2 x --speed 0.25."""
    every = {d for c in COMMANDS for d in load_chart(c).timing}
    others = "\n".join(f"{d} = {{ fixed = 0.0 }}" for d in sorted(every) if d != delay)
    failing = (
        '[[failures]]\npoint = "page"\ntarget = 1\nfirst = 1\n' if delay == "page_retry" else ""
    )
    text = (
        f"speed = 2.0\n\n[world.login]\nauth_timeout = 5000.0\n\n"
        f"[timing]\n{others}\n{delay} = {{ fixed = 1000.0 }}\n\n{failing}"
    )
    loaded = load_scenario(scenario(tmp_path, text))
    flags = GenerateFlags(yes=True) if command == "generate" else None
    session = Session(load_chart(command), loaded, flags=flags, speed=0.25)
    session.start()
    pending = list(script)
    while not session.done:
        deadline = session.next_deadline()
        if deadline is not None and deadline > 0:
            assert deadline == pytest.approx(500.0)
            return
        if deadline is not None:
            session.advance(deadline)
        elif pending:
            session.feed(json.dumps(pending.pop(0)).encode())
        else:
            break
    pytest.fail(f"{delay} never timed a step of {command}")


def test_auth_timeout_is_a_timer_scaled_by_speed(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        '[world.login]\nauth_timeout = 4.0\n\n[[failures]]\npoint = "authorization"\n'
        "timeout = true\n",
    )
    session = Session(load_chart("login"), load_scenario(path), speed=0.5)
    session.start()
    session.feed(json.dumps(REGION).encode())
    while session.state != "waiting":
        deadline = session.next_deadline()
        assert deadline is not None
        session.advance(deadline)
    entered = session.now
    deadlines = sorted(t.deadline - entered for t in session.pending())
    assert deadlines[-1] == pytest.approx(2.0)
    session.advance(entered + 2.0)
    assert session.done


# -- [[failures]]: every point has an observable effect ----------------------------------


def fail(tmp_path: Path, entry: str) -> str:
    return scenario(tmp_path, f"[[failures]]\n{entry}\n")


def test_point_check(tmp_path: Path) -> None:
    vm = last_vm(drive("update", fail(tmp_path, 'point = "check"')))
    assert (vm["state"], vm["error"]) == ("error", "check for updates: connection refused")
    vm = last_vm(drive("update", fail(tmp_path, 'point = "check"\nerror = "boom"')))
    assert vm["error"] == "boom"


def test_point_download_breaks_at_percent(tmp_path: Path) -> None:
    path = fail(tmp_path, 'point = "download"\nat_percent = 50.0\nerror = "eof"')
    events = drive("update", path, [DOWNLOAD])
    vm = last_vm(events)
    assert (vm["state"], vm["error"], vm["download_percent"]) == ("error", "eof", 50)
    assert vm["downloaded_bytes"] == vm["total_bytes"] // 2


def test_point_init_flow(tmp_path: Path) -> None:
    vm = last_vm(drive("login", fail(tmp_path, 'point = "init_flow"'), [REGION]))
    assert (vm["state"], vm["error"]) == ("error", "start login flow: service unavailable")


def test_point_authorization_denied_and_timeout(tmp_path: Path) -> None:
    vm = last_vm(drive("login", fail(tmp_path, 'point = "authorization"'), [REGION]))
    assert (vm["state"], vm["error"]) == ("error", "authorization denied")
    timeout = fail(tmp_path, 'point = "authorization"\ntimeout = true')
    vm = last_vm(drive("login", timeout, [REGION]))
    assert (vm["state"], vm["error"]) == ("error", "authorization timed out")
    vm = last_vm(drive("login", "login-timeout", [REGION]))
    assert vm["error"] == "authorization timed out"


def test_point_save(tmp_path: Path) -> None:
    vm = last_vm(drive("login", fail(tmp_path, 'point = "save"'), [REGION, MODEL]))
    assert (vm["state"], vm["error"]) == ("error", "save credentials: permission denied")


def test_point_repository(tmp_path: Path) -> None:
    vm = last_vm(drive("generate", fail(tmp_path, 'point = "repository"'), yes=True))
    assert (vm["state"], vm["error"]) == ("error", "open repository: not a git repository")


def test_point_catalog_and_its_attempt_numbering(tmp_path: Path) -> None:
    path = fail(tmp_path, 'point = "catalog"\nattempts = [1, 2, 3, 5]\nerror = "bad"')
    events = drive("generate", path, [{"type": "retry_catalog"}] * 2, yes=True)
    gates = [e for e in events if e["waiting_for"] == ["quit", "retry_catalog"]]
    # Round 1: attempts 1-3 fail (max_retries 2) -> gate; round 2: attempt 4 succeeds.
    assert len(gates) == 1
    assert gates[0]["vm"]["catalog"]["status"] == "error"
    assert gates[0]["vm"]["catalog"]["error"] == "bad"
    vm = last_vm(events)
    # auto_retry counts the automatic retries (2 in round 1, none in round 2).
    assert vm["state"] == "done" and vm["catalog"]["auto_retry"] == 2


def test_point_page_target_first_and_manual_retry_is_attempt_four(tmp_path: Path) -> None:
    path = fail(tmp_path, 'point = "page"\ntarget = 2\nfirst = 3')
    events = drive("generate", path, [{"type": "retry", "params": {"task_id": 2}}], yes=True)
    gate = next(e for e in events if e["waiting_for"] == ["quit", "retry", "skip_all"])
    states = {t["id"]: t["state"] for t in gate["vm"]["pages"]["tasks"]}
    assert states[2] == "failed" and all(s == "done" for i, s in states.items() if i != 2)
    task = gate["vm"]["pages"]["tasks"][1]
    assert task["retry_count"] == 2 and task["error"].startswith("page ")
    vm = last_vm(events)
    assert vm["done_total"] == 16


def test_page_attempts_list(tmp_path: Path) -> None:
    path = fail(tmp_path, 'point = "page"\ntarget = 1\nattempts = [2]')
    tasks = last_vm(drive("generate", path, yes=True))["pages"]["tasks"]
    assert [t["retry_count"] for t in tasks] == [0] * 16  # attempt 1 succeeded: never 2
    path = fail(tmp_path, 'point = "page"\ntarget = 1\nattempts = [1, 2]')
    tasks = last_vm(drive("generate", path, yes=True))["pages"]["tasks"]
    assert tasks[0]["retry_count"] == 2 and tasks[0]["state"] == "done"


def test_first_matching_entry_wins(tmp_path: Path) -> None:
    path = scenario(
        tmp_path,
        '[[failures]]\npoint = "check"\nerror = "first"\n\n'
        '[[failures]]\npoint = "check"\nerror = "second"\n',
    )
    assert last_vm(drive("update", path))["error"] == "first"
    path = scenario(
        tmp_path,
        '[[failures]]\npoint = "check"\nprobability = 0.0\nerror = "never"\n\n'
        '[[failures]]\npoint = "check"\nerror = "second"\n',
        "skip",
    )
    assert last_vm(drive("update", path))["error"] == "second"


def test_probability_zero_and_one(tmp_path: Path) -> None:
    never = fail(tmp_path, 'point = "page"\nprobability = 0.0')
    assert last_vm(drive("generate", never, yes=True))["done_total"] == 16
    always = fail(tmp_path, 'point = "page"\nprobability = 1.0')
    events = drive("generate", always, [{"type": "skip_all"}], yes=True)
    assert last_vm(events)["done_total"] == 0


def test_point_server(tmp_path: Path) -> None:
    vm = last_vm(drive("browse", fail(tmp_path, 'point = "server"\nerror = "port busy"')))
    assert (vm["state"], vm["error"]) == ("error", "port busy")


# -- determinism ------------------------------------------------------------------------


def failed_pages(scenario_ref: str, seed: int) -> list[tuple[int, int]]:
    tasks = last_vm(drive("generate", scenario_ref, yes=True, seed=seed, speed=1.0))["pages"][
        "tasks"
    ]
    return [(t["id"], t["retry_count"]) for t in tasks if t["retry_count"]]


def test_changing_a_delay_does_not_change_which_pages_fail(tmp_path: Path) -> None:
    """Separate streams: timing draws never move the failure draws (docs, session.py)."""
    slower = scenario(
        tmp_path, 'extends = "flaky-pages"\n\n[timing]\npage = { uniform = [0.1, 3.0] }\n'
    )
    for seed in (0, 1):
        assert failed_pages(slower, seed) == failed_pages("flaky-pages", seed)


def test_same_seed_same_events_other_seed_other_data() -> None:
    first = drive("generate", "flaky-pages", yes=True, seed=3, speed=1.0)
    assert first == drive("generate", "flaky-pages", yes=True, seed=3, speed=1.0)
    assert first != drive("generate", "flaky-pages", yes=True, seed=4, speed=1.0)


# -- a bad file, through the CLI -----------------------------------------------------------


def refuse(path: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "ZREAD_SIM_SERVER" or not k.startswith("ZREAD_SIM_")
    }
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "version", "--stdio", "--scenario", path],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=20,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    text = done.stderr.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
    return text


def test_unknown_key_is_refused_with_file_and_dotted_key(tmp_path: Path) -> None:
    path = scenario(tmp_path, "[world.config]\nmax_retrys = 3\n")
    text = refuse(path)
    assert path in text and "world.config.max_retrys: unknown key" in text


def test_wrong_type_is_refused_with_file_and_dotted_key(tmp_path: Path) -> None:
    path = scenario(tmp_path, '[world.release]\ndownload_steps = "many"\n')
    text = refuse(path)
    assert path in text and "world.release.download_steps" in text
    assert "int" in text and "str" in text
