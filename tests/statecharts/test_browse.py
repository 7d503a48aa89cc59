"""Tests for statecharts.browse: a Session with a real EffectHost, in virtual time.

Each test plays the stdio runner's part: after every session call it drains the
effects, performs them with an EffectHost (so the wiki server is real, on 127.0.0.1)
and resolves their results, then moves the clock to the next deadline. Sessions run
with ``--port 0`` (any free port) unless a test is about the port.
"""

from __future__ import annotations

import html
import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest

from simulator.core.effects import ServerStarted, StartServer, StopServer
from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.hosts.effects import EffectHost
from simulator.hosts.wikihtml import page_path
from simulator.hosts.wikiserver import Site, SitePage
from simulator.scenario import Scenario, load_scenario, wiki
from simulator.scenario.failures import Failure
from simulator.scenario.world import WikiVersion
from statecharts import load_chart
from statecharts.browse import DEFAULT_SERVER_ERROR, WikiSite
from statecharts.browse import BrowseFlags as Flags


class Event(msgspec.Struct):
    vm: msgspec.Raw
    waiting_for: list[str]
    done: bool
    error: str


def scenario(
    name: str = "default",
    *,
    wikis: list[WikiVersion] | None = None,
    failures: list[Failure] | None = None,
    browser_opens: bool | None = None,
    language: str | None = None,
) -> Scenario:
    base = load_scenario(name)
    world = base.world
    if wikis is not None:
        world = msgspec.structs.replace(world, wikis=wikis)
    if browser_opens is not None:
        world = msgspec.structs.replace(world, browser_opens=browser_opens)
    if language is not None:
        config = msgspec.structs.replace(world.config, language=language)
        world = msgspec.structs.replace(world, config=config)
    return msgspec.structs.replace(
        base, world=world, failures=base.failures if failures is None else failures
    )


class Run:
    """One browse session driven the way the stdio runner drives it."""

    def __init__(
        self, scn: Scenario | str = "default", *, seed: int = 0, flags: Flags | None = None
    ) -> None:
        self.scenario = load_scenario(scn) if isinstance(scn, str) else scn
        self.seed = seed
        self.host = EffectHost()
        self.flags = Flags(port=0) if flags is None else flags
        self.session = Session(
            load_chart("browse"), self.scenario, flags=self.flags, seed=seed, speed=0
        )
        self.lines: list[bytes] = []
        self.performed: list[object] = []
        self.deferred: list[object] = []

    def _out(self, events: Outcome, *, perform: bool = True) -> list[dict[str, Any]]:
        if perform:
            self.perform(events.effects)
        else:
            self.deferred += events.effects
        self.lines += events
        return [json.loads(line) for line in events]

    def perform(self, effects: list[object] | None = None) -> None:
        """Carry out ``effects`` (by default, those left for later), as a runner does."""
        if effects is None:
            effects, self.deferred = self.deferred, []
        self.performed += effects
        for effect, result in self.host.perform_all(0, effects):
            self._out(self.session.resolve(effect, result))

    def start(self) -> list[dict[str, Any]]:
        return self._out(self.session.start())

    def send(self, command: str, params: Any = None) -> list[dict[str, Any]]:
        line: dict[str, Any] = {"type": command}
        if params is not None:
            line["params"] = params
        return self.feed(json.dumps(line).encode())

    def feed(self, line: bytes) -> list[dict[str, Any]]:
        return self._out(self.session.feed(line))

    def settle(self) -> list[dict[str, Any]]:
        """Fire every timer, in order, until none is pending."""
        out: list[dict[str, Any]] = []
        while (deadline := self.session.next_deadline()) is not None:
            out += self._out(self.session.advance(deadline))
        return out

    def quit(self) -> dict[str, Any]:
        return self._out(self.session.quit())[0]

    def close(self) -> None:
        self.host.close()


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    made: list[Run] = []
    yield made
    for run in made:
        run.close()


def new(
    runs: list[Run],
    scn: Scenario | str = "default",
    *,
    seed: int = 0,
    flags: Flags | None = None,
) -> Run:
    run = Run(scn, seed=seed, flags=flags)
    runs.append(run)
    return run


def pages_of(run: Run) -> tuple[wiki.Page, ...]:
    return wiki.world_catalog(run.scenario.world, run.seed)


def fetch(url: str, content_type: str = "text/html; charset=utf-8") -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == content_type
        return str(resp.read().decode("utf-8"))


def markdown_at(url: str, slug: str) -> str:
    return fetch(f"{url}/api/pages/{slug}", "text/markdown; charset=utf-8")


def site_of(run: Run) -> WikiSite:
    [site] = [e.site for e in run.performed if isinstance(e, StartServer)]
    assert isinstance(site, WikiSite)
    return site


def refuses(url: str) -> bool:
    parts = urlsplit(url)
    assert parts.port is not None
    try:
        socket.create_connection(("127.0.0.1", parts.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def three_versions() -> list[WikiVersion]:
    return [WikiVersion(), WikiVersion(current=True), WikiVersion()]


# -- the chart ---------------------------------------------------------------------


def test_gates_are_the_fidelity_table() -> None:
    chart = load_chart("browse")
    gates = {name: (spec.waiting_for, spec.terminal) for name, spec in chart.states.items()}
    assert gates["loading"] == ((), False)
    assert gates["select_version"] == (("select_version", "quit"), False)
    assert gates["serving"] == (("quit",), False)
    assert gates["no_wiki"] == ((), True)
    assert gates["error"] == ((), True)


# -- one version: loading -> serving -----------------------------------------------


def test_one_version_loads_then_serves_the_wiki(runs: list[Run]) -> None:
    run = new(runs)
    [first] = run.start()
    assert first == {
        "vm": {"state": "loading", "browser_opened": False, "has_current": True},
        "waiting_for": [],
        "done": False,
        "error": "",
    }
    assert [type(e) for e in run.performed] == [StartServer]
    [serving] = run.settle()
    vm = serving["vm"]
    assert list(vm) == ["state", "url", "browser_opened", "has_current"]
    assert vm["state"] == "serving"
    assert vm["browser_opened"] is True
    assert vm["has_current"] is True
    assert serving["waiting_for"] == ["quit"]
    assert serving["done"] is False
    assert vm["url"] == run.host.servers[0].url == f"http://127.0.0.1:{run.host.servers[0].port}"
    index = fetch(vm["url"])
    for page in pages_of(run):
        assert f'<a href="/{page.slug}">{html.escape(page.title)}</a>' in index
    assert wiki.versions(run.scenario.world, 0)[0].id in index


def test_serving_pages_are_the_sites_markdown(runs: list[Run]) -> None:
    run = new(runs)
    run.start()
    url = run.settle()[0]["vm"]["url"]
    page = pages_of(run)[3]
    text = fetch(url + page_path(page.slug))
    assert f"<h1>{html.escape(page.title)}</h1>" in text
    markdown = markdown_at(url, page.slug)
    assert markdown == site_of(run).markdown(page.slug)
    assert not markdown.startswith("# ")
    assert "\n## " in markdown
    first = markdown.split("\n\n")[0]
    assert f"<p>{html.escape(first, quote=False)}</p>" in text.replace("&#x27;", "'")


def test_quit_while_serving_stops_the_server(runs: list[Run]) -> None:
    run = new(runs)
    run.start()
    serving = run.settle()[0]
    url = serving["vm"]["url"]
    fetch(url)
    last = run.quit()
    assert last == {**serving, "waiting_for": [], "done": True}
    assert isinstance(run.performed[-1], StopServer)
    assert run.session.done
    assert run.session.next_deadline() is None
    assert run.host.servers == {}
    assert refuses(url)


def test_browser_opened_reports_the_world(runs: list[Run]) -> None:
    run = new(runs, scenario(browser_opens=False))
    run.start()
    assert run.settle()[0]["vm"]["browser_opened"] is False


def test_no_url_while_loading_and_no_event_while_waiting(runs: list[Run]) -> None:
    run = new(runs)
    [first] = run.start()
    assert "url" not in first["vm"]
    assert "versions" not in first["vm"]
    assert "error" not in first["vm"]
    assert run.session.next_deadline() is not None
    assert run.session.state == "loading"


def test_server_answer_after_the_delay_still_serves(runs: list[Run]) -> None:
    run = new(runs)
    out = run._out(run.session.start(), perform=False)
    assert out[0]["vm"]["state"] == "loading"
    deadline = run.session.next_deadline()
    assert deadline is not None
    assert run._out(run.session.advance(deadline), perform=False) == []
    assert run.session.state == "loading"
    run.perform()  # the runner answers late: the chart leaves loading at once
    [serving] = run.settle()
    assert serving["vm"]["state"] == "serving"
    fetch(serving["vm"]["url"])


def test_quit_while_loading_stops_a_started_server(runs: list[Run]) -> None:
    run = new(runs)
    run.start()
    assert len(run.host.servers) == 1
    url = run.host.servers[0].url
    last = run.quit()
    assert last["done"] is True
    assert last["vm"]["state"] == "loading"
    assert run.host.servers == {}
    assert refuses(url)


# -- several versions: select_version ----------------------------------------------


def test_several_versions_open_on_select_version(runs: list[Run]) -> None:
    run = new(runs, "versions")
    [first] = run.start()
    drawn = wiki.versions(run.scenario.world, 0)
    assert len(drawn) >= 3
    assert first["waiting_for"] == ["select_version", "quit"]
    assert first["done"] is False
    vm = first["vm"]
    assert list(vm) == ["state", "browser_opened", "has_current", "versions"]
    assert vm["state"] == "select_version"
    assert vm["has_current"] is True
    assert vm["browser_opened"] is False
    assert vm["versions"] == [
        {"id": v.id, "timestamp": v.timestamp, "is_current": v.is_current} for v in drawn
    ]
    assert sum(v["is_current"] for v in vm["versions"]) == 1
    assert run.performed == []
    assert run.session.next_deadline() is None


def test_select_by_wiki_id_serves_that_version(runs: list[Run]) -> None:
    run = new(runs, "versions")
    versions = run.start()[0]["vm"]["versions"]
    chosen = next(v for v in versions if not v["is_current"])
    [loading] = run.send("select_version", {"wiki_id": chosen["id"]})
    assert loading["vm"] == {"state": "loading", "browser_opened": False, "has_current": True}
    assert loading["waiting_for"] == []
    [serving] = run.settle()
    assert serving["vm"]["state"] == "serving"
    assert "versions" not in serving["vm"]
    index = fetch(serving["vm"]["url"])
    assert chosen["id"] in index
    site = site_of(run)
    assert site.version == chosen["id"]
    assert site.timestamp == chosen["timestamp"]
    assert site.version_index == versions.index(chosen)


def test_select_current_serves_the_current_version(runs: list[Run]) -> None:
    run = new(runs, "versions")
    versions = run.start()[0]["vm"]["versions"]
    current = next(v for v in versions if v["is_current"])
    assert run.send("select_version", {"current": True})[0]["vm"]["state"] == "loading"
    serving = run.settle()[0]
    assert current["id"] in fetch(serving["vm"]["url"])


def test_versions_differ_in_their_pages(runs: list[Run]) -> None:
    texts = []
    for index in (0, 2):
        run = new(runs, "versions")
        page = pages_of(run)[0]
        versions = run.start()[0]["vm"]["versions"]
        run.send("select_version", {"wiki_id": versions[index]["id"]})
        url = run.settle()[0]["vm"]["url"]
        texts.append(markdown_at(url, page.slug))
        assert f"<h1>{html.escape(page.title)}</h1>" in fetch(url + page_path(page.slug))
    assert texts[0] != texts[1]


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"wiki_id": "WIKI", "current": True}, "not both"),
        ({}, 'expected {"wiki_id":"<id>"} or {"current":true}'),
        ({"current": False}, 'expected {"wiki_id":"<id>"} or {"current":true}'),
        ({"wiki_id": ""}, 'expected {"wiki_id":"<id>"} or {"current":true}'),
        ({"wiki_id": "no-such-wiki"}, "unknown wiki_id 'no-such-wiki'"),
        ({"wiki_id": 5}, "expected `str`, got `int`"),
        ({"current": "yes"}, "expected `bool`, got `str`"),
        ([1], "expected `object`, got `array`"),
    ],
)
def test_bad_select_params_change_nothing(runs: list[Run], params: Any, reason: str) -> None:
    run = new(runs, "versions")
    run.start()
    if isinstance(params, dict) and params.get("wiki_id") == "WIKI":
        params = {**params, "wiki_id": wiki.versions(run.scenario.world, 0)[0].id}
    before = msgspec.json.decode(run.lines[-1], type=Event)
    out = run.send("select_version", params)
    assert len(out) == 1
    after = msgspec.json.decode(run.lines[-1], type=Event)
    assert after.error.startswith("invalid params: ")
    assert reason in after.error
    assert bytes(after.vm) == bytes(before.vm)
    assert after.waiting_for == before.waiting_for
    assert after.done is False
    assert run.session.state == "select_version"
    assert run.performed == []


def test_unknown_id_error_lists_the_ids(runs: list[Run]) -> None:
    run = new(runs, "versions")
    ids = [v["id"] for v in run.start()[0]["vm"]["versions"]]
    [event] = run.send("select_version", {"wiki_id": "x"})
    assert event["error"] == f"invalid params: unknown wiki_id 'x' (one of {', '.join(ids)})"


def test_wiki_id_with_current_false_selects_by_id(runs: list[Run]) -> None:
    run = new(runs, "versions")
    first_id = run.start()[0]["vm"]["versions"][0]["id"]
    [event] = run.send("select_version", {"wiki_id": first_id, "current": False})
    assert event["error"] == ""
    assert event["vm"]["state"] == "loading"


def test_current_without_a_current_version_is_invalid(runs: list[Run]) -> None:
    run = new(runs, scenario(wikis=[WikiVersion(), WikiVersion()]))
    [first] = run.start()
    assert first["vm"]["has_current"] is False
    assert not any(v["is_current"] for v in first["vm"]["versions"])
    [event] = run.send("select_version", {"current": True})
    assert event["error"] == "invalid params: no current wiki version; choose one by wiki_id"
    assert event["vm"] == first["vm"]
    [loading] = run.send("select_version", {"wiki_id": first["vm"]["versions"][1]["id"]})
    assert loading["vm"]["state"] == "loading"


def test_explicit_ids_and_timestamps_from_the_scenario(runs: list[Run]) -> None:
    wikis = [
        WikiVersion(id="old", timestamp="2025-01-01T00:00:00Z"),
        WikiVersion(id="new", timestamp="2025-06-01T00:00:00Z", current=True),
    ]
    run = new(runs, scenario(wikis=wikis))
    assert run.start()[0]["vm"]["versions"] == [
        {"id": "old", "timestamp": "2025-01-01T00:00:00Z", "is_current": False},
        {"id": "new", "timestamp": "2025-06-01T00:00:00Z", "is_current": True},
    ]
    run.send("select_version", {"wiki_id": "old"})
    url = run.settle()[0]["vm"]["url"]
    assert "<code>old</code>" in fetch(url)
    document = json.loads(fetch(f"{url}/api/wiki", "application/json"))
    assert document["id"] == "old"
    assert document["generated_at"].startswith("2025-01-01T00:00:00.")


def test_quit_in_select_version_ends_without_effects(runs: list[Run]) -> None:
    run = new(runs, "versions")
    [first] = run.start()
    last = run.quit()
    assert last == {**first, "waiting_for": [], "done": True}
    assert run.performed == []


# -- gates -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["download", "serve", "_loaded", "_start", ""])
def test_commands_outside_waiting_for_in_select_version(runs: list[Run], command: str) -> None:
    run = new(runs, "versions")
    run.start()
    before = msgspec.json.decode(run.lines[-1], type=Event)
    [event] = run.send(command, {})
    assert event["error"] == f'command "{command}" not allowed in state select_version'
    after = msgspec.json.decode(run.lines[-1], type=Event)
    assert bytes(after.vm) == bytes(before.vm)
    assert after.waiting_for == before.waiting_for
    assert run.session.state == "select_version"


def test_select_version_is_refused_while_loading_and_serving(runs: list[Run]) -> None:
    run = new(runs)
    run.start()
    [loading_reject] = run.send("select_version", {"current": True})
    assert loading_reject["error"] == 'command "select_version" not allowed in state loading'
    assert loading_reject["waiting_for"] == []
    [serving] = run.settle()
    [rejected] = run.send("select_version", {"current": True})
    assert rejected["error"] == 'command "select_version" not allowed in state serving'
    assert rejected["vm"] == serving["vm"]
    assert rejected["waiting_for"] == ["quit"]
    [internal] = run.send("_loaded")
    assert internal["error"] == 'command "_loaded" not allowed in state serving'
    assert run.session.state == "serving"
    fetch(serving["vm"]["url"])


def test_invalid_json_while_serving_keeps_serving(runs: list[Run]) -> None:
    run = new(runs)
    run.start()
    serving = run.settle()[0]
    [event] = run.feed(b"{nope")
    assert event["error"].startswith("invalid JSON: ")
    assert event["vm"] == serving["vm"]
    fetch(serving["vm"]["url"])


# -- no wiki, error ----------------------------------------------------------------


def test_no_wiki_is_terminal_at_once(runs: list[Run]) -> None:
    run = new(runs, "empty")
    [first] = run.start()
    assert first == {
        "vm": {"state": "no_wiki", "browser_opened": False, "has_current": False},
        "waiting_for": [],
        "done": True,
        "error": "",
    }
    assert run.session.done
    assert run.performed == []


def test_browse_error_scenario_ends_in_error_without_a_server(runs: list[Run]) -> None:
    run = new(runs, "browse-error")
    [loading] = run.start()
    assert loading["vm"]["state"] == "loading"
    [last] = run.settle()
    assert last["done"] is True
    assert last["waiting_for"] == []
    vm = last["vm"]
    assert list(vm) == ["state", "browser_opened", "has_current", "error"]
    assert vm["state"] == "error"
    assert vm["error"] == run.scenario.failures[0].error != ""
    assert run.performed == []
    assert run.host.servers == {}


def test_server_failure_without_text_uses_the_default(runs: list[Run]) -> None:
    run = new(runs, scenario(failures=[Failure(point="server")]))
    run.start()
    assert run.settle()[0]["vm"]["error"] == DEFAULT_SERVER_ERROR


def test_server_failure_after_selecting_a_version(runs: list[Run]) -> None:
    run = new(runs, scenario("versions", failures=[Failure(point="server", error="boom")]))
    run.start()
    run.send("select_version", {"current": True})
    last = run.settle()[0]
    assert last["vm"]["state"] == "error"
    assert last["vm"]["error"] == "boom"
    assert "versions" not in last["vm"]


def test_a_host_that_cannot_listen_ends_in_error(runs: list[Run]) -> None:
    run = new(runs)
    run._out(run.session.start(), perform=False)
    [effect] = run.deferred
    assert isinstance(effect, StartServer)
    run.session.resolve(effect, ServerStarted(error="listen on 127.0.0.1: Permission denied"))
    [last] = run.settle()
    assert last["done"] is True
    assert last["vm"]["error"] == "start server: listen on 127.0.0.1: Permission denied"
    assert "url" not in last["vm"]


# -- determinism -------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 5])
def test_same_seed_same_catalog_and_events(runs: list[Run], seed: int) -> None:
    indexes, firsts = [], []
    for _ in range(2):
        run = new(runs, "versions", seed=seed)
        firsts.append(run.start()[0])
        run.send("select_version", {"current": True})
        url = run.settle()[0]["vm"]["url"]
        index = fetch(url)
        indexes.append(index)
        titles = [p.title for p in pages_of(run)]
        assert len(titles) == run.scenario.world.project.pages
        positions = [index.index(f">{html.escape(t)}</a>") for t in titles]
        assert positions == sorted(positions)
    assert firsts[0] == firsts[1]
    assert indexes[0] == indexes[1]


def test_different_seeds_draw_different_versions(runs: list[Run]) -> None:
    a = new(runs, "versions", seed=1).start()[0]["vm"]["versions"]
    b = new(runs, "versions", seed=2).start()[0]["vm"]["versions"]
    assert [v["id"] for v in a] != [v["id"] for v in b]


def test_site_describes_the_project(runs: list[Run]) -> None:
    run = new(runs, scenario(wikis=three_versions()), seed=3)
    run.start()
    run.send("select_version", {"current": True})
    site = site_of(run)
    catalog = wiki.world_catalog(run.scenario.world, 3)
    assert site.project == "acme/widget"
    assert site.version == wiki.versions(run.scenario.world, 3)[1].id
    assert site.catalog == catalog
    assert site.pages == catalog
    assert isinstance(site, Site)
    assert all(isinstance(page, SitePage) for page in site.pages)
    assert site.version_index == 1
    assert site.language == "en"
    assert site.current
    links = [(page.title, page.slug) for page in catalog]
    for page in catalog[:3]:  # the current version reads as generate writes its pages
        expected = wiki.page_markdown(page, language="en", seed=3, others=links, sources=())
        assert site.markdown(page.slug) == expected


# -- the site drawn from the seed ----------------------------------------------------


def drawn_site(runs: list[Run], scn: Scenario | str = "default") -> WikiSite:
    """The site a one-version browse asks to serve (the server is not started)."""
    run = new(runs, scn)
    run._out(run.session.start(), perform=False)
    [effect] = run.deferred
    assert isinstance(effect, StartServer)
    assert isinstance(effect.site, WikiSite)
    return effect.site


def test_the_sites_wiki_json_is_zreads_format(runs: list[Run]) -> None:
    site = drawn_site(runs)
    data = site.wiki_json()
    assert not data.endswith(b"\n")
    document = json.loads(data)
    assert list(document) == ["id", "generated_at", "language", "pages"]
    assert document["id"] == site.version
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,9}Z", document["generated_at"])
    assert not document["generated_at"].removesuffix("Z").endswith("0")
    assert document["generated_at"].startswith(site.timestamp.removesuffix("Z") + ".")
    assert document["language"] == "en"
    assert len(document["pages"]) == len(site.pages)
    for entry, page in zip(document["pages"], site.pages, strict=True):
        keys = ["slug", "title", "file", "section", "group", "level"]
        assert list(entry) == [k for k in keys if k != "group" or page.group]
        assert entry["file"] == f"{page.slug}.md"
        assert (entry["slug"], entry["title"], entry["section"], entry["level"]) == (
            page.slug,
            page.title,
            page.section,
            page.level,
        )
        assert entry.get("group", "") == page.group
    assert any(page.group for page in site.pages) and any(not p.group for p in site.pages)
    assert data == json.dumps(document, indent=2, ensure_ascii=False).encode()
    assert site.wiki_json() == data


def test_a_chinese_wiki_keeps_its_text_raw(runs: list[Run]) -> None:
    site = drawn_site(runs, scenario(language="zh"))
    assert site.language == "zh"
    data = site.wiki_json()
    assert json.loads(data)["language"] == "zh"
    assert "\\u" not in data.decode()
    assert any(ord(c) > 127 for c in data.decode())
    markdown = site.markdown(site.pages[0].slug)
    assert markdown is not None and any(ord(c) > 127 for c in markdown)


def test_the_sites_pages_link_to_each_other_by_slug(runs: list[Run]) -> None:
    site = drawn_site(runs)
    slugs = {page.slug for page in site.pages}
    linked = set()
    for page in site.pages:
        markdown = site.markdown(page.slug)
        assert markdown is not None
        assert markdown == site.markdown(page.slug)  # drawn the same each time
        for target in re.findall(r"\]\(([^)#]+)\)", markdown):
            assert target in slugs and target != page.slug
            linked.add(target)
    assert linked
    assert site.markdown("no-such-page") is None
    assert site.markdown("") is None


# -- --version ID ------------------------------------------------------------------


def test_version_flag_serves_that_version_without_asking(runs: list[Run]) -> None:
    drawn = wiki.versions(load_scenario("versions").world, 0)
    wanted = drawn[0]
    assert not wanted.is_current
    run = new(runs, "versions", flags=Flags(port=0, version=wanted.id))
    [first] = run.start()
    assert first == {
        "vm": {"state": "loading", "browser_opened": False, "has_current": True},
        "waiting_for": [],
        "done": False,
        "error": "",
    }
    site = site_of(run)
    assert (site.version, site.version_index) == (wanted.id, 0)
    [serving] = run.settle()
    assert serving["vm"]["state"] == "serving"
    assert "versions" not in serving["vm"]
    assert f"<code>{wanted.id}</code>" in fetch(serving["vm"]["url"])


def test_version_flag_with_one_version(runs: list[Run]) -> None:
    [only] = wiki.versions(load_scenario("default").world, 0)
    run = new(runs, flags=Flags(port=0, version=only.id))
    assert run.start()[0]["vm"]["state"] == "loading"
    assert run.settle()[0]["vm"]["state"] == "serving"


@pytest.mark.parametrize("name", ["versions", "default"])
def test_an_unknown_version_flag_ends_in_error(runs: list[Run], name: str) -> None:
    ids = [v.id for v in wiki.versions(load_scenario(name).world, 0)]
    run = new(runs, name, flags=Flags(port=0, version="2020-01-01-000000"))
    [first] = run.start()
    assert first == {
        "vm": {
            "state": "error",
            "browser_opened": False,
            "has_current": True,
            "error": f'wiki version "2020-01-01-000000" not found (one of {", ".join(ids)})',
        },
        "waiting_for": [],
        "done": True,
        "error": "",
    }
    assert run.performed == []
    assert run.session.done


def test_no_wiki_wins_over_the_version_flag(runs: list[Run]) -> None:
    run = new(runs, "empty", flags=Flags(port=0, version="2026-01-01-000000"))
    [first] = run.start()
    assert first["vm"] == {"state": "no_wiki", "browser_opened": False, "has_current": False}
    assert first["done"] is True


def test_a_server_failure_after_the_version_flag(runs: list[Run]) -> None:
    first_id = wiki.versions(load_scenario("versions").world, 0)[0].id
    scn = scenario("versions", failures=[Failure(point="server", error="boom")])
    run = new(runs, scn, flags=Flags(port=0, version=first_id))
    run.start()
    [last] = run.settle()
    assert last["vm"]["state"] == "error"
    assert last["vm"]["error"] == "boom"


# -- --host, --port ----------------------------------------------------------------


def test_the_server_is_asked_for_zreads_host_and_port_by_default(runs: list[Run]) -> None:
    run = new(runs, flags=Flags())
    run._out(run.session.start(), perform=False)
    [effect] = run.deferred
    assert isinstance(effect, StartServer)
    assert (effect.host, effect.port) == ("127.0.0.1", 9681)


def test_host_and_port_flags_reach_the_server(runs: list[Run]) -> None:
    run = new(runs, flags=Flags(host="localhost", port=0))
    run._out(run.session.start(), perform=False)
    [effect] = run.deferred
    assert isinstance(effect, StartServer)
    assert (effect.host, effect.port) == ("localhost", 0)
    run.perform()
    [serving] = run.settle()
    url = serving["vm"]["url"]
    assert url == f"http://localhost:{run.host.servers[0].port}"
    fetch(url)


def test_a_busy_port_flag_serves_on_the_next_free_one(runs: list[Run]) -> None:
    held = []
    for base in range(24_000, 60_000, 733):
        try:
            for port in (base, base + 1):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
                sock.listen()
            break
        except OSError:
            for sock in held:
                sock.close()
            held = []
    assert held, "no two free ports in a row"
    try:
        run = new(runs, flags=Flags(port=base))
        run.start()
        [serving] = run.settle()
        port = urlsplit(serving["vm"]["url"]).port
        assert port is not None and base + 2 <= port < base + 100
        fetch(serving["vm"]["url"])
    finally:
        for sock in held:
            sock.close()


def test_a_host_that_is_not_loopback_ends_in_error(runs: list[Run]) -> None:
    run = new(runs, flags=Flags(host="0.0.0.0", port=0))
    run.start()
    [last] = run.settle()
    assert last["done"] is True
    assert last["vm"]["state"] == "error"
    assert (
        last["vm"]["error"] == "start server: listen tcp 0.0.0.0:0: refusing a non-loopback address"
    )
    assert run.host.servers == {}
