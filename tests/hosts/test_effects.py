"""Tests for simulator.hosts.effects: the EffectHost with and without a home, and the effects
the charts ask for.

Without a home, saving is a no-op that writes nothing anywhere (the working directory
is an empty tmp_path and must stay so); with one, each persisted effect reaches it.
Which effect a generate run asks for, and when, is checked on a sans-I/O Session in
virtual time. Starting and stopping the browse server is checked against real servers
on ephemeral ports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from simulator.core.driver import Flags
from simulator.core.effects import (
    DraftLeft,
    SaveConfig,
    SaveLogin,
    ServerStarted,
    StartServer,
    StopServer,
    WikiGenerated,
)
from simulator.core.session import Outcome, Session
from simulator.hosts.effects import EffectHost
from simulator.hosts.home import Home, HomeError
from simulator.scenario import load_scenario
from simulator.scenario.wiki import Page
from simulator.scenario.world import Account, Draft, World
from statecharts import load_chart

PERSISTED = [
    SaveConfig({"language": "fr", "max_concurrent": "3"}),
    SaveLogin("ada", "cn", "glm-4.5-air"),
    DraftLeft(4),
    WikiGenerated(pages_done=16, pages_total=16),
]


def test_without_a_home_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    host = EffectHost()
    assert host.home is None
    for effect in PERSISTED:
        assert host.perform(0, effect) is None
    host.close()
    assert list(tmp_path.iterdir()) == []


def test_with_a_home_each_saved_effect_persists(tmp_path: Path) -> None:
    host = EffectHost(home=Home(tmp_path / "home"))
    for effect in PERSISTED[:3]:
        assert host.perform(0, effect) is None
    host.close()
    with Home(tmp_path / "home") as home:
        world = home.world(World())
    assert (world.config.language, world.config.max_concurrent) == ("fr", 3)
    assert world.config.llm_model == "glm-4.5-air"
    assert world.account == Account(username="ada", logged_in=True)
    assert world.draft == Draft(done=4)


def test_with_a_home_a_generated_wiki_persists(tmp_path: Path) -> None:
    host = EffectHost(home=Home(tmp_path))
    host.perform(0, DraftLeft(2))
    host.perform(0, PERSISTED[3])
    host.close()
    with Home(tmp_path) as home:
        world = home.world(World())
    assert len(world.wikis) == 2
    assert [w.current for w in world.wikis] == [False, True]
    assert world.draft is None


def test_other_effects_do_not_touch_the_home(tmp_path: Path) -> None:
    home = Home(tmp_path)
    host = EffectHost(home=home)
    assert host.perform(0, StopServer()) is None
    assert home.world(World()) == World()
    host.close()


def test_close_closes_the_home(tmp_path: Path) -> None:
    home = Home(tmp_path)
    host = EffectHost(home=home)
    host.close()
    with pytest.raises(HomeError, match="closed"):
        home.apply(DraftLeft(1))


# -- what the charts ask for (a sans-I/O Session in virtual time) --------------------


class Run:
    """One generate session; ``effects`` keeps every effect it asked for, in order."""

    def __init__(self, scenario: str = "default", **flags: Any) -> None:
        self.session = Session(
            load_chart("generate"), load_scenario(scenario), flags=Flags(**flags), speed=1.0
        )
        self.effects: list[object] = []
        self.last: dict[str, Any] = {}
        self._take(self.session.start())

    def _take(self, out: Outcome) -> None:
        if out:
            self.last = json.loads(out[-1])
        self.effects += out.effects

    def until(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        """Fire timers one event at a time until an event satisfies ``predicate``."""
        while not predicate(self.last):
            deadline = self.session.next_deadline()
            assert deadline is not None, self.last
            self._take(self.session.advance(deadline, limit=1))

    def feed(self, type_: str, **params: Any) -> None:
        self._take(self.session.feed(json.dumps({"type": type_, "params": params}).encode()))
        assert self.last["error"] == "", self.last

    def quit(self) -> None:
        self._take(self.session.quit())


def running(event: dict[str, Any]) -> bool:
    return bool(event["vm"]["pages"]["done"] >= 3)


def test_generate_to_done_asks_for_a_new_version() -> None:
    run = Run(yes=True)
    run.until(lambda e: e["done"])
    assert run.effects == [WikiGenerated(pages_done=16, pages_total=16)]


def test_generate_skip_all_asks_for_a_new_version_with_the_pages_done() -> None:
    run = Run("failing-pages", yes=True)
    run.until(lambda e: "skip_all" in e["waiting_for"])
    assert run.effects == []
    done = run.last["vm"]["pages"]["done"]
    run.feed("skip_all")
    assert run.last["done"] is True
    assert run.effects == [WikiGenerated(pages_done=done, pages_total=16)]
    assert done < 16


def test_generate_skip_failed_flag_asks_for_a_new_version() -> None:
    run = Run("failing-pages", yes=True, skip_failed=True)
    run.until(lambda e: e["done"])
    assert len(run.effects) == 1
    assert isinstance(run.effects[0], WikiGenerated)


@pytest.mark.parametrize("action", ["cancel", "browse"])
def test_generate_ended_at_select_action_asks_for_nothing(action: str) -> None:
    run = Run()
    if action == "cancel":
        run.feed("cancel")
    else:
        run.feed("select_action", action="browse")
    assert run.last["done"] is True
    assert run.effects == []


def test_generate_quit_at_select_action_asks_for_nothing() -> None:
    run = Run("draft")
    run.quit()
    assert run.effects == []


def test_generate_draft_cancelled_by_flag_asks_for_nothing() -> None:
    run = Run("draft", draft_action="cancel")
    assert run.last["done"] is True
    assert run.effects == []


def test_generate_cancel_while_pages_run_leaves_a_draft() -> None:
    run = Run(yes=True)
    run.until(running)
    run.feed("cancel")
    assert run.last["done"] is True
    done = run.last["vm"]["pages"]["done"]
    assert run.effects == [DraftLeft(done)]
    assert 3 <= done < 16


def test_generate_cancel_in_the_catalog_leaves_an_empty_draft() -> None:
    run = Run(yes=True)
    run.until(lambda e: e["vm"]["catalog"]["tool_name"] != "")
    run.feed("cancel")
    assert run.effects == [DraftLeft(0)]


@pytest.mark.parametrize(
    ("scenario", "where"),
    [
        ("default", lambda e: e["vm"]["catalog"]["tool_name"] != ""),
        ("default", running),
        ("catalog-error", lambda e: "retry_catalog" in e["waiting_for"]),
        ("failing-pages", lambda e: "skip_all" in e["waiting_for"]),
    ],
    ids=["catalog", "pages", "catalog_error", "retry_gate"],
)
def test_generate_quit_while_running_leaves_a_draft(
    scenario: str, where: Callable[[dict[str, Any]], bool]
) -> None:
    run = Run(scenario, yes=True)
    run.until(where)
    done = run.last["vm"]["pages"]["done"]
    run.quit()
    assert run.effects == [DraftLeft(done)]


def test_generate_resumed_draft_to_done_asks_for_a_new_version() -> None:
    run = Run("draft", yes=True)
    run.until(lambda e: e["done"])
    assert run.effects == [WikiGenerated(pages_done=16, pages_total=16)]


def test_config_save_says_which_values_it_started_from() -> None:
    session = Session(load_chart("config"), load_scenario())
    session.start()
    session.feed(b'{"type":"update_fields","params":{"fields":{"language":"fr"}}}')
    (saved,) = session.feed(b'{"type":"save"}').effects
    assert isinstance(saved, SaveConfig)
    assert saved.values["language"] == "fr"
    assert saved.initial["language"] == "en"
    assert {k for k in saved.values if saved.values[k] != saved.initial[k]} == {"language"}


# -- the browse server -------------------------------------------------------------


class OnePage:
    """The smallest site: one page."""

    project = "acme/one"
    version = "v1"
    pages = (Page(1, "Overview", "1-overview", "Start", "", "Beginner"),)

    def markdown(self, slug: str) -> str | None:
        return "One page.\n" if slug == "1-overview" else None

    def wiki_json(self) -> bytes:
        return b"{}"


def answers(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bool(resp.status == 200)
    except urllib.error.URLError:
        return False


def test_start_server_serves_the_site_until_stop() -> None:
    host = EffectHost()
    try:
        started = host.perform(7, StartServer(OnePage(), port=0))
        assert isinstance(started, ServerStarted)
        assert started.error == ""
        assert started.url == host.servers[7].url
        assert started.url.startswith("http://127.0.0.1:")
        assert answers(started.url + "/1-overview")
        assert host.perform(7, StopServer()) is None
        assert host.servers == {}
        assert not answers(started.url)
        assert host.perform(7, StopServer()) is None  # nothing left to stop
    finally:
        host.close()


def test_start_server_takes_the_effects_host_and_port() -> None:
    host = EffectHost()
    try:
        started = host.perform(0, StartServer(OnePage(), host="localhost", port=0))
        assert isinstance(started, ServerStarted)
        assert started.url == f"http://localhost:{host.servers[0].port}"
    finally:
        host.close()


def test_a_second_start_for_one_session_replaces_its_server() -> None:
    host = EffectHost()
    try:
        first = host.perform(0, StartServer(OnePage(), port=0))
        second = host.perform(0, StartServer(OnePage(), port=0))
        assert isinstance(first, ServerStarted) and isinstance(second, ServerStarted)
        assert list(host.servers) == [0]
        assert not answers(first.url)
        assert answers(second.url)
    finally:
        host.close()


def test_servers_of_several_sessions_and_close_stops_them_all() -> None:
    host = EffectHost()
    urls = []
    for owner in (1, 2):
        started = host.perform(owner, StartServer(OnePage(), port=0))
        assert isinstance(started, ServerStarted)
        urls.append(started.url)
    assert len(set(urls)) == 2
    assert all(answers(url) for url in urls)
    host.close()
    assert host.servers == {}
    assert not any(answers(url) for url in urls)


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ({"host": "0.0.0.0", "port": 0}, "listen tcp 0.0.0.0:0"),
        ({"host": "10.1.2.3", "port": 80}, "listen tcp 10.1.2.3:80"),
    ],
)
def test_a_server_that_cannot_listen_is_an_answer_not_a_raise(
    where: dict[str, Any], error: str
) -> None:
    host = EffectHost()
    try:
        started = host.perform(0, StartServer(OnePage(), **where))
        assert started == ServerStarted(error=f"{error}: refusing a non-loopback address")
        assert host.servers == {}
    finally:
        host.close()


def test_a_busy_port_is_an_answer_once_every_port_tried_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import errno

    from simulator.hosts import wikiserver

    def busy(*args: object) -> None:
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(wikiserver, "_Server", busy)
    host = EffectHost()
    try:
        started = host.perform(0, StartServer(OnePage()))
        assert started == ServerStarted(
            error="listen tcp 127.0.0.1:9780: bind: address already in use (tried ports 9681-9780)"
        )
    finally:
        host.close()
