"""Tests for simulator.hosts.effects: the EffectHost with and without a store, and the
effects the charts ask for.

Without a store, a persisted effect is a no-op that writes nothing anywhere (the working
directory is an empty tmp_path and must stay so); with one, each persisted effect
reaches it, and a :class:`~simulator.hosts.files.FileStore` turns it into zread's files
(``config.yaml``, ``login.json``, the draft, the versions, ``current``). Which effect a
generate run asks for, and when, is checked on a sans-I/O Session in virtual time.
Starting and stopping the browse server is checked against real servers on ephemeral
ports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.core.effects import (
    PERSISTED,
    CatalogReady,
    DraftLeft,
    PageWritten,
    SaveConfig,
    SaveLogin,
    ServerStarted,
    StartServer,
    StopServer,
    WikiGenerated,
)
from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.formats.config import config_values, read_config
from simulator.formats.wiki import decode_current, decode_wiki
from simulator.hosts.effects import EffectHost
from simulator.hosts.files import FileStore
from simulator.scenario import load_scenario, wiki
from simulator.scenario.httpfaults import HttpFault, HttpFaultPlan
from simulator.scenario.wiki import Page
from simulator.scenario.world import Account, Draft, World
from statecharts import load_chart
from statecharts.generate import GenerateFlags

CATALOG = wiki.catalog(0, "acme/widget", 3)
SAVED: list[object] = [
    SaveConfig({"language": "fr", "max_concurrent": "3"}),
    SaveLogin("ada", "cn", "glm-4.5-air"),
    CatalogReady(CATALOG, "en"),
    PageWritten(1),
    PageWritten(2),
    WikiGenerated(pages_done=2, pages_total=3),
    DraftLeft(2),
]
"""One of each persisted effect (a run that ends leaves no draft: the last is a no-op)."""


class Recorder:
    """A store that keeps what it was asked (the :class:`Store` interface)."""

    def __init__(self) -> None:
        self.applied: list[object] = []
        self.closed = False

    def world(self, base: World, *, seed: int = 0, versions: str = "") -> World:
        return base

    def apply(self, effect: object) -> None:
        self.applied.append(effect)

    def site(self, version: str) -> None:
        return None  # the drawn wiki stands in

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """An empty HOME and an empty project, side by side."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_every_persisted_effect_type_has_an_example() -> None:
    assert {type(effect) for effect in SAVED} == set(PERSISTED)


def test_without_a_store_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    host = EffectHost()
    assert host.home is None
    for effect in SAVED:
        assert host.perform(0, effect) is None
    host.close()
    assert list(tmp_path.iterdir()) == []


def test_with_a_store_each_persisted_effect_reaches_it_and_close_closes_it() -> None:
    store = Recorder()
    host = EffectHost(home=store)
    for effect in SAVED:
        assert host.perform(0, effect) is None
    assert host.perform(0, StopServer()) is None
    assert store.applied == SAVED  # in order, and nothing but the persisted ones
    assert not store.closed
    host.close()
    assert store.closed


def test_saved_config_and_login_are_zreads_files(places: tuple[Path, Path]) -> None:
    home, project = places
    host = EffectHost(home=FileStore(home, project))
    for effect in SAVED[:2]:
        assert host.perform(0, effect) is None
    host.close()
    assert {"config.yaml", "login.json"} <= set(files_under(home / ".zread"))
    for name in ("config.yaml", "login.json"):
        assert (home / ".zread" / name).stat().st_mode & 0o777 == 0o600
    assert files_under(project) == []
    world = FileStore(home, project).world(World())
    assert (world.config.language, world.config.max_concurrent) == ("fr", 3)
    assert world.account == Account(username="ada", logged_in=True)


def test_a_generated_wiki_is_a_new_current_version(places: tuple[Path, Path]) -> None:
    home, project = places
    host = EffectHost(home=FileStore(home, project))
    for effect in SAVED[2:]:
        host.perform(0, effect)
    host.close()
    wiki = project / ".zread" / "wiki"
    current = decode_current((wiki / "current").read_bytes())
    assert current is not None
    version = wiki / "versions" / current
    index = decode_wiki((version / "wiki.json").read_bytes())
    assert [p.slug for p in index.pages] == [p.slug for p in CATALOG[:2]]  # the pages written
    assert sorted(p.name for p in version.iterdir()) == sorted(
        ["wiki.json", *(f"{p.slug}.md" for p in CATALOG[:2])]
    )
    assert not (wiki / "drafts").exists()
    world = FileStore(home, project).world(World())
    assert [(w.id, w.current) for w in world.wikis] == [(current, True)]
    assert world.draft is None


def test_a_stopped_run_leaves_its_draft(places: tuple[Path, Path]) -> None:
    home, project = places
    host = EffectHost(home=FileStore(home, project))
    for effect in (CatalogReady(CATALOG, "en"), PageWritten(2), DraftLeft(1)):
        host.perform(0, effect)
    host.close()
    wiki = project / ".zread" / "wiki"
    draft_id = decode_wiki((wiki / "drafts" / "wiki.json").read_bytes()).id
    assert sorted(p.name for p in wiki.iterdir()) == [f".draft-{draft_id}", "drafts"]
    assert list((wiki / f".draft-{draft_id}").iterdir()) == []  # the id it claimed
    world = FileStore(home, project).world(World())
    assert world.draft == Draft(done=1, id=draft_id, finished=[CATALOG[1].slug])
    assert world.wikis == []


def test_other_effects_do_not_touch_the_store(places: tuple[Path, Path]) -> None:
    home, project = places
    store = FileStore(home, project)
    host = EffectHost(home=store)
    assert host.perform(0, StopServer()) is None
    host.close()
    assert store.world(World()) == World()
    assert files_under(home) == files_under(project) == []


def test_a_closed_file_store_holds_nothing_and_still_writes(places: tuple[Path, Path]) -> None:
    home, project = places
    store = FileStore(home, project)
    store.close()
    store.apply(SaveConfig({"language": "fr"}))
    values = config_values(read_config((home / ".zread" / "config.yaml").read_bytes()))
    assert values["language"] == "fr"


# -- what the charts ask for (a sans-I/O Session in virtual time) --------------------


class Run:
    """One generate session; ``effects`` keeps every effect it asked for, in order."""

    def __init__(self, scenario: str = "default", **flags: Any) -> None:
        self.session = Session(
            load_chart("generate"), load_scenario(scenario), flags=GenerateFlags(**flags), speed=1.0
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
            self.step()

    def step(self) -> None:
        """Fire the next timer."""
        deadline = self.session.next_deadline()
        assert deadline is not None, self.last
        self._take(self.session.advance(deadline, limit=1))

    def feed(self, type_: str, **params: Any) -> None:
        self._take(self.session.feed(json.dumps({"type": type_, "params": params}).encode()))
        assert self.last["error"] == "", self.last

    def quit(self) -> None:
        self._take(self.session.quit())

    def done_ids(self) -> list[int]:
        """The tasks the last event shows done, by id."""
        return [t["id"] for t in self.last["vm"]["pages"]["tasks"] if t["state"] == "done"]


def running(event: dict[str, Any]) -> bool:
    return bool(event["vm"]["pages"]["done"] >= 3)


def catalog_of(run: Run, *, resumed: bool = False) -> CatalogReady:
    """The run's first effect: the catalog, its pages the tasks the vm shows."""
    first = run.effects[0]
    assert isinstance(first, CatalogReady)
    assert first.resumed is resumed
    assert first.language == "en"
    tasks = run.last["vm"]["pages"]["tasks"]
    assert [(p.id, p.title, p.slug) for p in first.pages] == [
        (t["id"], t["title"], t["slug"]) for t in tasks
    ]
    return first


def written(run: Run) -> list[int]:
    """The pages the run asked to write, in the order it asked."""
    return [effect.page_id for effect in run.effects if isinstance(effect, PageWritten)]


def test_generate_to_done_writes_the_catalog_each_page_then_a_version() -> None:
    run = Run(yes=True)
    run.until(lambda e: e["done"])
    catalog = catalog_of(run)
    assert len(catalog.pages) == 16
    assert sorted(written(run)) == list(range(1, 17))  # each page once, as it finished
    assert run.effects[1:-1] == [PageWritten(n) for n in written(run)]
    assert run.effects[-1] == WikiGenerated(pages_done=16, pages_total=16)


def test_each_page_is_written_in_the_event_that_shows_it_done() -> None:
    run = Run(yes=True)
    while not run.last["done"]:
        run.step()
        assert sorted(written(run)) == run.done_ids()


def test_generate_skip_all_writes_a_version_of_the_pages_done() -> None:
    run = Run("failing-pages", yes=True)
    run.until(lambda e: "skip_all" in e["waiting_for"])
    assert not any(isinstance(effect, WikiGenerated | DraftLeft) for effect in run.effects)
    done = run.last["vm"]["pages"]["done"]
    assert sorted(written(run)) == run.done_ids()
    assert {3, 7}.isdisjoint(written(run))
    run.feed("skip_all")
    assert run.last["done"] is True
    assert run.effects[-1] == WikiGenerated(pages_done=done, pages_total=16)
    assert done == 14


def test_generate_skip_failed_flag_writes_a_version() -> None:
    run = Run("failing-pages", yes=True, skip_failed=True)
    run.until(lambda e: e["done"])
    catalog_of(run)
    assert run.effects[-1] == WikiGenerated(pages_done=14, pages_total=16)
    assert sum(isinstance(effect, WikiGenerated) for effect in run.effects) == 1


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
    catalog_of(run)
    assert sorted(written(run)) == run.done_ids()
    assert run.effects[-1] == DraftLeft(done)
    assert 3 <= done < 16


def test_generate_cancel_in_the_catalog_leaves_an_empty_draft() -> None:
    run = Run(yes=True)
    run.until(lambda e: e["vm"]["catalog"]["tool_name"] != "")
    run.feed("cancel")
    assert run.effects == [DraftLeft(0)]


@pytest.mark.parametrize(
    ("scenario", "where", "catalog_made"),
    [
        ("default", lambda e: e["vm"]["catalog"]["tool_name"] != "", False),
        ("default", running, True),
        ("catalog-error", lambda e: "retry_catalog" in e["waiting_for"], False),
        ("failing-pages", lambda e: "skip_all" in e["waiting_for"], True),
    ],
    ids=["catalog", "pages", "catalog_error", "retry_gate"],
)
def test_generate_quit_while_running_leaves_a_draft(
    scenario: str, where: Callable[[dict[str, Any]], bool], catalog_made: bool
) -> None:
    run = Run(scenario, yes=True)
    run.until(where)
    done = run.last["vm"]["pages"]["done"]
    run.quit()
    assert run.effects[-1] == DraftLeft(done)
    assert isinstance(run.effects[0], CatalogReady) is catalog_made
    assert sorted(written(run)) == run.done_ids()


def test_generate_yes_alone_starts_a_draft_over() -> None:
    run = Run("draft", yes=True)
    run.until(lambda e: e["done"])
    assert catalog_of(run).resumed is False
    assert sorted(written(run)) == list(range(1, 17))
    assert run.effects[-1] == WikiGenerated(pages_done=16, pages_total=16)


def test_generate_resumed_draft_writes_only_the_rest_then_a_version() -> None:
    run = Run("draft", draft_action="resume")
    run.until(lambda e: e["done"])
    catalog_of(run, resumed=True)
    assert sorted(written(run)) == list(range(7, 17))  # the draft had pages 1-6
    assert run.effects[-1] == WikiGenerated(pages_done=16, pages_total=16)


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

    monkeypatch.setattr(wikiserver, "_bind", busy)
    host = EffectHost()
    try:
        started = host.perform(0, StartServer(OnePage()))
        assert started == ServerStarted(
            error="listen tcp 127.0.0.1:9780: bind: address already in use (tried ports 9681-9780)"
        )
    finally:
        host.close()


# -- HTTP faults -----------------------------------------------------------------------


def http_fault(**fields: Any) -> HttpFault:
    return msgspec.convert(fields, HttpFault)


def status_of(url: str) -> int:
    """The status a GET of ``url`` is answered with (an error status included)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_a_host_without_faults_has_an_empty_plan_to_add_to() -> None:
    host = EffectHost()
    try:
        assert not host.http_faults
        assert host.http_faults is host.http_faults  # one plan, made once
        assert host.http_journal is None
    finally:
        host.close()


def test_the_scenarios_faults_are_in_the_plan_its_servers_use() -> None:
    scenario = load_scenario(
        "s", text='[[faults.http]]\npath = "/1-overview"\nstatus = 503\nfirst = 1\n'
    )
    plan = HttpFaultPlan(scenario.http_faults, seed=3)
    host = EffectHost(http_faults=plan)
    try:
        assert host.http_faults is plan
        started = host.perform(0, StartServer(OnePage(), port=0))
        assert isinstance(started, ServerStarted)
        assert host.servers[0].faults is plan
        assert [status_of(started.url + "/1-overview") for _ in range(2)] == [503, 200]
        assert plan.entries()[0]["fired"] == 1
    finally:
        host.close()


def test_a_fault_added_before_or_after_the_server_starts_applies() -> None:
    host = EffectHost()
    try:
        before = host.http_faults.add(http_fault(path="/", status=502, first=1))
        started = host.perform(0, StartServer(OnePage(), port=0))
        assert isinstance(started, ServerStarted)
        after = host.http_faults.add(http_fault(path="/1-overview", status=500, first=1))
        assert (before, after) == ("http-1", "http-2")
        assert status_of(started.url + "/") == 502
        assert status_of(started.url + "/1-overview") == 500
        assert status_of(started.url + "/1-overview") == 200
        restarted = host.perform(0, StartServer(OnePage(), port=0))  # the same plan
        assert isinstance(restarted, ServerStarted)
        assert status_of(restarted.url + "/") == 200  # http-1 took its one request
        assert [e["fired"] for e in host.http_faults.entries()] == [1, 1]
    finally:
        host.close()


def test_the_journal_is_told_of_each_request_that_meets_a_fault() -> None:
    told: list[dict[str, str]] = []
    host = EffectHost(http_journal=told.append)
    try:
        host.http_faults.add(http_fault(path="/1-*", status=503))
        started = host.perform(0, StartServer(OnePage(), port=0))
        assert isinstance(started, ServerStarted)
        assert status_of(started.url + "/") == 200
        assert status_of(started.url + "/1-overview") == 503
        host.http_journal = None  # looked up at each request
        assert status_of(started.url + "/1-overview") == 503
    finally:
        host.close()
    assert told == [{"method": "GET", "path": "/1-overview", "fault": "http-1", "kind": "status"}]


def test_a_journal_that_raises_does_not_stop_the_answer() -> None:
    def broken(_: dict[str, str]) -> None:
        raise RuntimeError("journal gone")

    host = EffectHost(http_journal=broken)
    try:
        host.http_faults.add(http_fault(status=503))
        started = host.perform(0, StartServer(OnePage(), port=0))
        assert isinstance(started, ServerStarted)
        assert status_of(started.url + "/") == 503
    finally:
        host.close()


def test_a_host_for_a_scenario_has_its_http_faults_and_none_without_one() -> None:
    from simulator.scenario import load_scenario

    faulty = load_scenario(
        "faulty", text='extends = "default"\n[[faults.http]]\npath = "/"\nreset = true\n'
    )
    host = EffectHost.for_scenario(faulty, seed=3)
    (entry,) = host.http_faults.entries()
    assert (entry["id"], entry["kind"], entry["source"]) == ("http-1", "reset", "scenario")
    assert EffectHost.for_scenario(None, seed=3).http_faults.entries() == []
