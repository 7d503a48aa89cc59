"""Tests for simulator.hosts.home: a Home in tmp_path, its overlay, its updates, its refusals.

Real SQLite files only: what one Home wrote, a Home opened later (or a second one open
at the same time) must read.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import stat
from pathlib import Path

import msgspec
import pytest

from simulator.core.effects import DraftLeft, SaveConfig, SaveLogin, StopServer, WikiGenerated
from simulator.hosts.home import DATABASE, Home, HomeError, new_version_id
from simulator.scenario import load_scenario, wiki
from simulator.scenario.world import Account, Draft, Settings, WikiVersion, World

ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
FIXED = dt.datetime(2026, 11, 29, 15, 30, 0, tzinfo=dt.UTC)


def reopened(path: Path, base: World | None = None, seed: int = 0) -> World:
    """The world a later process sees: a fresh Home on the same directory."""
    with Home(path) as home:
        return home.world(base or World(), seed=seed)


# -- opening ----------------------------------------------------------------------


def test_a_new_home_creates_a_private_directory_and_one_database(tmp_path: Path) -> None:
    path = tmp_path / "a" / "home"
    with Home(path) as home:
        assert home.path == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert (path / DATABASE).is_file()
    assert stat.S_IMODE((path / DATABASE).stat().st_mode) == 0o600


def test_an_empty_home_changes_nothing(tmp_path: Path) -> None:
    base = load_scenario("draft").world
    with Home(tmp_path) as home:
        assert home.world(base) == base


def test_the_database_is_in_wal_mode(tmp_path: Path) -> None:
    with Home(tmp_path):
        db = sqlite3.connect(tmp_path / DATABASE)
        try:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        finally:
            db.close()


# -- each effect, persisted and overlaid -------------------------------------------


def test_save_config_stores_typed_values_a_later_home_sees(tmp_path: Path) -> None:
    with Home(tmp_path) as home:
        home.world(World())
        home.apply(SaveConfig({"language": "fr", "max_concurrent": "2", "max_retries": "5"}))
    world = reopened(tmp_path)
    assert world.config == Settings(language="fr", max_concurrent=2, max_retries=5)
    assert isinstance(world.config.max_concurrent, int)
    assert world.account == World().account
    assert world.wikis == World().wikis


def test_save_config_writes_only_what_the_command_changed(tmp_path: Path) -> None:
    initial = {k: str(v) for k, v in msgspec.to_builtins(Settings()).items()}
    with Home(tmp_path) as first, Home(tmp_path) as second:
        # Both loaded the same config; each changed a different field.
        first.apply(SaveConfig({**initial, "language": "de"}, initial=initial))
        second.apply(SaveConfig({**initial, "max_retries": "7"}, initial=initial))
    config = reopened(tmp_path).config
    assert (config.language, config.max_retries) == ("de", 7)


def test_save_config_without_initial_writes_every_value(tmp_path: Path) -> None:
    with Home(tmp_path) as home:
        home.apply(SaveConfig({"language": "de"}))
        home.apply(SaveConfig({"language": "en", "max_retries": "0"}))
    config = reopened(tmp_path).config
    assert (config.language, config.max_retries) == ("en", 0)


def test_a_config_value_out_of_range_is_refused_and_nothing_stored(tmp_path: Path) -> None:
    with Home(tmp_path) as home:
        with pytest.raises(HomeError, match="cannot save config"):
            home.apply(SaveConfig({"language": "fr", "max_concurrent": "99"}))
        assert home.world(World()) == World()


def test_save_login_stores_the_account_and_the_model(tmp_path: Path) -> None:
    base = World(account=Account(username="ada", logged_in=False))
    with Home(tmp_path) as home:
        home.world(base)
        home.apply(SaveConfig({"language": "ja"}))
        home.apply(SaveLogin("ada", "cn", "glm-4.5-air"))
    world = reopened(tmp_path, base)
    assert world.account == Account(username="ada", logged_in=True)
    assert world.config.llm_model == "glm-4.5-air"
    assert world.config.language == "ja"  # the earlier save is kept


def test_draft_left_stores_the_draft(tmp_path: Path) -> None:
    with Home(tmp_path) as home:
        home.apply(DraftLeft(5))
    world = reopened(tmp_path)
    assert world.draft == Draft(done=5)
    assert world.wikis == World().wikis


def test_wiki_generated_adds_the_current_version_and_clears_the_draft(tmp_path: Path) -> None:
    base = load_scenario("versions").world
    drawn = wiki.versions(base, 3)
    with Home(tmp_path, clock=lambda: FIXED) as home:
        home.world(base, seed=3)
        home.apply(DraftLeft(4))
        home.apply(WikiGenerated(pages_done=16, pages_total=16))
    world = reopened(tmp_path, base)
    assert world.draft is None
    *old, new = world.wikis
    # The base's versions keep the ids and dates browse drew for them with that seed.
    assert [(w.id, w.timestamp) for w in old] == [(v.id, v.timestamp) for v in drawn]
    assert not any(w.current for w in old)
    assert new.current
    assert new.timestamp == "2026-11-29T15:30:00Z"
    assert new.id.startswith("20261129-153000-")
    assert ID.match(new.id)
    listed = wiki.versions(world, 3)
    assert [v.id for v in listed if v.is_current] == [new.id]


def test_a_stored_draft_cleared_hides_the_scenarios_draft(tmp_path: Path) -> None:
    base = load_scenario("draft").world
    assert base.draft is not None
    with Home(tmp_path) as home:
        home.world(base)
        home.apply(WikiGenerated(16, 16))
    assert reopened(tmp_path, base).draft is None


def test_wall_clock_stamps_are_utc_iso_8601(tmp_path: Path) -> None:
    with Home(tmp_path) as home:
        home.apply(WikiGenerated(1, 1))
    new = reopened(tmp_path).wikis[-1]
    assert STAMP.match(new.timestamp)
    assert ID.match(new.id)
    stamp = dt.datetime.strptime(new.timestamp, "%Y-%m-%dT%H:%M:%SZ")
    assert new.id[:15] == stamp.strftime("%Y%m%d-%H%M%S")


def test_version_ids_never_repeat_within_one_second(tmp_path: Path) -> None:
    with Home(tmp_path, clock=lambda: FIXED) as home:
        for _ in range(40):
            home.apply(WikiGenerated(16, 16))
    wikis = reopened(tmp_path).wikis
    assert len(wikis) == 41
    assert len({w.id for w in wikis}) == 41
    assert [w.current for w in wikis] == [False] * 40 + [True]


def test_new_version_id_avoids_the_ids_taken() -> None:
    taken = {new_version_id(FIXED) for _ in range(200)}
    assert all(ID.match(i) for i in taken)
    fresh = new_version_id(FIXED, taken)
    assert fresh not in taken
    assert fresh.startswith("20261129-153000-")


def test_other_effects_are_not_stored(tmp_path: Path) -> None:
    with Home(tmp_path) as home:
        home.apply(StopServer())
    db = sqlite3.connect(tmp_path / DATABASE)
    try:
        assert db.execute("SELECT count(*) FROM part").fetchone() == (0,)
    finally:
        db.close()


def test_each_part_overlays_only_itself(tmp_path: Path) -> None:
    base = World(wikis=[WikiVersion(id="20260101-000000-aaaaaa", timestamp="2026-01-01T00:00:00Z")])
    with Home(tmp_path) as home:
        home.world(base)
        home.apply(DraftLeft(2))
    world = reopened(tmp_path, base)
    assert world == msgspec.structs.replace(base, draft=Draft(done=2))


# -- refusals ------------------------------------------------------------------------


def test_a_corrupt_database_is_one_line_and_left_as_it_was(tmp_path: Path) -> None:
    garbage = b"this is not a database\n" * 200
    (tmp_path / DATABASE).write_bytes(garbage)
    with pytest.raises(HomeError) as caught:
        Home(tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert str(tmp_path) in message and DATABASE in message
    assert (tmp_path / DATABASE).read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == [DATABASE]


def test_a_file_where_the_directory_should_be_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "home"
    path.write_text("x")
    with pytest.raises(HomeError, match=f"^home {re.escape(str(tmp_path / 'home'))}: "):
        Home(path)
    assert path.read_text() == "x"


def test_a_database_that_cannot_be_opened_is_refused(tmp_path: Path) -> None:
    (tmp_path / DATABASE).mkdir()
    with pytest.raises(HomeError, match=re.escape(f"cannot use {DATABASE}")):
        Home(tmp_path)
    assert (tmp_path / DATABASE).is_dir()


def test_a_stored_part_that_does_not_validate_is_refused(tmp_path: Path) -> None:
    with Home(tmp_path):
        pass
    db = sqlite3.connect(tmp_path / DATABASE)
    with db:
        db.execute("INSERT INTO part VALUES ('config', '{\"max_concurrent\": 0}')")
    db.close()
    with Home(tmp_path) as home, pytest.raises(HomeError, match="stored config is not valid"):
        home.world(World())


def test_a_database_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / DATABASE)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(HomeError, match="schema 99"):
        Home(tmp_path)


def test_a_closed_home_refuses_updates(tmp_path: Path) -> None:
    home = Home(tmp_path)
    home.close()
    home.close()
    with pytest.raises(HomeError, match="closed"):
        home.apply(DraftLeft(1))


def test_versions_the_scenario_names_keep_their_ids(tmp_path: Path) -> None:
    named = [
        WikiVersion(id="20260301-000000-bbbbbb", timestamp="2026-03-01T00:00:00Z"),
        WikiVersion(id="20260201-000000-aaaaaa", timestamp="2026-02-01T00:00:00Z", current=True),
    ]
    base = World(wikis=named)
    with Home(tmp_path, clock=lambda: FIXED) as home:
        home.world(base)
        home.apply(WikiGenerated(16, 16))
    wikis = reopened(tmp_path, base).wikis
    assert [(w.id, w.current) for w in wikis] == [
        ("20260201-000000-aaaaaa", False),
        ("20260301-000000-bbbbbb", False),
        (wikis[-1].id, True),
    ]
