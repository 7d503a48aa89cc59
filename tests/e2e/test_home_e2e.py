"""``--home`` end to end: a client's multi-command flow over real processes and pipes.

Each test runs several ``python -m simulator CMD --stdio --home DIR`` processes one
after the other (or all at once) on a home in tmp_path, and checks that what one
command saved is what the next one sees, as with zread.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from simulator.hosts.home import DATABASE, Home
from simulator.scenario.world import Account, World

from .helpers import Proc, write_scenario

Event = dict[str, Any]
SAVE = {"type": "save"}


def update(**fields: str) -> dict[str, Any]:
    return {"type": "update_fields", "params": {"fields": fields}}


def config_values(event: Event) -> dict[str, str]:
    return {f["json_key"]: f["value"] for f in event["vm"]["fields"] if f["json_key"]}


def stored(home: Path) -> World:
    with Home(home) as opened:
        return opened.world(World())


def generate_to_done(home: Path, *args: str) -> list[Event]:
    with Proc("generate", "-y", "--home", str(home), *args) as proc:
        proc.drive([])
        proc.finish()
        return proc.events


def browse_versions(home: Path) -> list[Event]:
    """The versions browse offers at select_version (then quit)."""
    with Proc("browse", "--home", str(home)) as proc:
        event = proc.drive_until([], lambda e: "select_version" in e["waiting_for"])
        proc.send({"type": "quit"})
        proc.read_until_done()
        proc.finish()
        versions: list[Event] = event["vm"]["versions"]
        return versions


def test_config_save_changes_what_generate_uses(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Proc("config", "--home", str(home)) as proc:
        proc.drive([update(max_concurrent="2", max_retries="5"), SAVE])
        proc.finish()
    events = generate_to_done(home)
    running = [sum(t["state"] == "running" for t in e["vm"]["pages"]["tasks"]) for e in events]
    assert max(running) == 2
    assert {e["vm"]["max_retries"] for e in events} == {5}
    assert events[-1]["vm"]["done_total"] == 16
    with Proc("config", "--home", str(home)) as proc:
        first = proc.read_event()
        proc.send({"type": "quit"})
        proc.read_until_done()
        proc.finish()
    values = config_values(first)
    assert (values["max_concurrent"], values["max_retries"]) == ("2", "5")


def test_login_stores_the_account_and_the_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    logged_out = write_scenario(
        tmp_path, "logged-out", '[world.account]\nusername = "ada"\nlogged_in = false\n'
    )
    with Proc("login", "--home", str(home), scenario=logged_out) as proc:
        proc.drive(
            [
                {"type": "select_region", "params": {"region": "cn"}},
                {"type": "select_model", "params": {"model": "glm-4.5-air"}},
            ]
        )
        proc.finish()
    assert proc.events[-1]["vm"]["username"] == "ada"
    world = stored(home)
    assert world.account == Account(username="ada", logged_in=True)
    assert world.config.llm_model == "glm-4.5-air"
    with Proc("config", "--home", str(home)) as proc:
        first = proc.read_event()
        proc.send({"type": "quit"})
        proc.read_until_done()
    assert config_values(first)["llm_model"] == "glm-4.5-air"


def test_a_finished_generate_is_a_new_current_version_browse_lists(tmp_path: Path) -> None:
    home = tmp_path / "home"
    before = Proc("browse", "--home", str(home))  # one version: straight to serving
    with before:
        served = before.drive_until([], lambda e: e["vm"]["state"] == "serving")
        assert "versions" not in served["vm"]
    generate_to_done(home)
    versions = browse_versions(home)
    assert len(versions) == 2
    current = [v for v in versions if v["is_current"]]
    assert len(current) == 1
    (old,) = [v for v in versions if not v["is_current"]]
    assert current[0]["id"] != old["id"]
    assert [current[0]["id"]] == [w.id for w in stored(home).wikis if w.current]
    # generate now offers the wiki it made, dated as browse lists it.
    with Proc("generate", "--home", str(home)) as proc:
        gate = proc.read_event()["vm"]["select_action"]
    assert gate["scenario"] == "has_wiki"
    assert gate["wiki_date"] == current[0]["timestamp"]


def test_a_generate_cancelled_while_running_leaves_a_draft(tmp_path: Path) -> None:
    home = tmp_path / "home"
    many = write_scenario(tmp_path, "many", "[world.project]\npages = 64\n")
    with Proc("generate", "-y", "--home", str(home), speed=0.05, scenario=many) as proc:
        proc.read_until(lambda e: e["vm"]["pages"]["done"] >= 3)
        proc.send({"type": "cancel"})
        final = proc.read_until_done()
        proc.finish()
    done = final["vm"]["pages"]["done"]
    assert 3 <= done < 64
    with Proc("generate", "--home", str(home), scenario=many) as proc:
        gate = proc.read_event()
    assert gate["waiting_for"] == ["select_action", "cancel", "quit"]
    assert gate["vm"]["select_action"]["scenario"] == "has_draft"
    assert gate["vm"]["select_action"]["draft_done"] == done
    assert stored(home).wikis == World().wikis  # no version was added


def test_a_quit_at_the_retry_gate_leaves_a_draft_then_resume_finishes_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    failing = write_scenario(tmp_path, "one-fails", '[[failures]]\npoint = "page"\ntarget = 2\n')
    with Proc("generate", "-y", "--home", str(home), scenario=failing) as proc:
        proc.drive_until([], lambda e: "skip_all" in e["waiting_for"])
        proc.send({"type": "quit"})
        proc.read_until_done()
        proc.finish()
    assert stored(home).draft is not None
    events = generate_to_done(home)  # -y resumes the draft
    assert events[-1]["vm"]["catalog"]["status"] == "resumed"
    world = stored(home)
    assert world.draft is None
    assert [w.current for w in world.wikis] == [False, True]


def test_zread_sim_home_works_like_the_flag(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Proc("config", env={"ZREAD_SIM_HOME": str(home)}) as proc:
        proc.drive([update(language="fr"), SAVE])
        proc.finish()
    with Proc("config", "--home", str(home)) as proc:
        first = proc.read_event()
    assert config_values(first)["language"] == "fr"


def test_without_a_home_nothing_is_written(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "config", "--stdio", "--speed", "0"],
        input=b'{"type":"update_fields","params":{"fields":{"language":"fr"}}}\n{"type":"save"}\n',
        capture_output=True,
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=20,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert b'"saved":true' in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_home_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / DATABASE).write_bytes(b"not a database" * 100)
    with Proc("version", "--home", str(tmp_path)) as proc:
        assert proc.wait(10) == 2
        err = proc.stderr
    assert err.startswith("zread-sim: home ") and err.count("\n") == 1, err
    assert (tmp_path / DATABASE).read_bytes() == b"not a database" * 100


def test_concurrent_processes_never_lose_an_update(tmp_path: Path) -> None:
    home = tmp_path / "home"
    edits = {
        "language": "de",
        "doc_language": "ja",
        "max_concurrent": "7",
        "max_retries": "9",
        "llm_provider": "openai",
        "llm_base_url": "https://llm.example/v1",
        "llm_model": "gpt-sim",
        "llm_api_key": "sk-sim-concurrent",
    }
    generators = 6
    configs = [Proc("config", "--home", str(home)) for _ in edits]
    runs = [Proc("generate", "-y", "--home", str(home)) for _ in range(generators)]
    try:
        for proc in configs:  # every editor has loaded the same config
            proc.read_event()
        for proc, (key, value) in zip(configs, edits.items(), strict=True):
            proc.send(update(**{key: value}))
            proc.send(SAVE)
        for proc in configs + runs:
            proc.read_until_done(timeout=15)
            proc.finish()
    finally:
        for proc in configs + runs:
            proc.kill()
    world = stored(home)
    assert {key: str(getattr(world.config, key)) for key in edits} == edits
    ids = [w.id for w in world.wikis]
    assert len(ids) == 1 + generators
    assert len(set(ids)) == len(ids)
    assert sum(w.current for w in world.wikis) == 1
    assert len(browse_versions(home)) == 1 + generators
    db = sqlite3.connect(home / DATABASE)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        db.close()


def test_a_signed_or_padded_integer_is_saved_as_the_number(tmp_path: Path) -> None:
    """Go's Atoi takes "+2" and "03"; the home stores them as the numbers they are."""
    home = tmp_path / "home"
    argv = [sys.executable, "-m", "simulator", "config", "--stdio", "--home", str(home)]
    lines = (
        b'{"type":"update_fields","params":{"fields":{"max_concurrent":"+2","max_retries":"03"}}}\n'
        b'{"type":"save"}\n'
    )
    done = subprocess.run(argv, input=lines, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["done"] is True
    assert last["vm"]["saved"] is True
    values = {f["json_key"]: f["value"] for f in last["vm"]["fields"]}
    assert values["max_concurrent"] == "2"
    assert values["max_retries"] == "3"
