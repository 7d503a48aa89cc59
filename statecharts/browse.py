"""``zread browse --stdio``: pick a wiki version, serve it on a local URL until quit.

Owns: the browse vm and its flow, and :class:`WikiSite`, the wiki drawn from the seed
with the shape of a ``simulator.hosts.wikiserver.Site``. No wiki in the world: ``no_wiki``
(terminal), whatever the flags. ``--version ID``: that version is served at once
(``loading``), or, when the world has no such version, ``error`` (terminal) with
``wiki version "ID" not found (one of ...)``. Otherwise several versions:
``select_version`` (vm.versions filled) until the client picks one by
``{"wiki_id": ...}`` or ``{"current": true}``. One version, or a picked one:
``loading`` while the server starts, then ``serving`` (vm.url) or ``error``
(terminal). ``quit`` stops the server.

The chart stays sans-I/O: it asks for a :class:`~simulator.core.effects.StartServer`
with the site, ``--host`` and ``--port``, and leaves ``loading`` when both the
``server_start`` delay has run out and the runner has answered with
:class:`~simulator.core.effects.ServerStarted`, whichever comes last. A scenario
failure at point ``server`` ends in ``error`` without starting one.

Over 400 lines, on purpose: a command is its module, and browse's includes the site it
serves (:class:`WikiSite`) and the checks of its ``--host`` and ``--port``; the server
itself is ``simulator.hosts.wikiserver``.
"""

from __future__ import annotations

import ipaddress
import random
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from simulator.core.command import Answer, Examples, Flag
from simulator.core.driver import EVERY_VERSION, Driver, Flags, InvalidParams
from simulator.core.effects import ServerStarted, StartServer, StopServer
from simulator.scenario import wiki, wikiwords

if TYPE_CHECKING:
    from collections.abc import Mapping

    from transitions import EventData


SUMMARY = "Browse the generated wiki in a local web server"
HELP = """Browse the generated wiki in a local web server.

Serves the project's .zread/wiki (the current version, or the one --version names)
on http://127.0.0.1:9681, the next free port upward when that one is busy."""
ABOUT = (
    "Serves the generated wiki: start-up picks the version (asking with "
    "`select_version` when there are several), the server starts on a timer, and the "
    "wiki is served until `quit`."
)

LOOPBACK = ("127.0.0.1", "localhost", "::1", "127.x.y.z")
"""The hosts ``--host`` takes: the simulator serves on this machine only."""


def loopback_host(text: str) -> str:
    """A loopback host; ValueError for any other: the simulator never listens elsewhere."""
    if text.lower() == "localhost":
        return text
    try:
        loopback = ipaddress.ip_address(text).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"refusing to serve on {text!r}: the simulator listens on a loopback address "
            f"only ({', '.join(LOOPBACK)})"
        )
    return text


def port_number(text: str) -> int:
    """A TCP port, 0 for any free one; ValueError for anything else."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"expected a port 0-65535 (0: any free port), got {text!r}")
    return port


class BrowseFlags(Flags, frozen=True):
    """``zread browse``'s flags."""

    host: Annotated[
        str, Flag("--host", metavar="string", parse=loopback_host, help="host to serve on")
    ] = "127.0.0.1"
    port: Annotated[
        int,
        Flag(
            "--port",
            metavar="int",
            parse=port_number,
            help="port to serve on, the next free one upward when busy; 0: any free port",
        ),
    ] = 9681
    version: Annotated[
        str,
        Flag(
            "--version",
            metavar="string",
            help="the wiki version to serve (an id under .zread/wiki/versions)",
        ),
    ] = ""
    generate: Annotated[
        bool,
        Flag(
            "--generate",
            help="generate the wiki first when there is none (accepted, not simulated)",
        ),
    ] = False


def _served_version(vm: Mapping[str, Any]) -> tuple[str, ...] | None:
    versions = vm.get("versions") or []
    return ("--port", "0", "--version", versions[0]["id"]) if versions else None


EXAMPLES = Examples(
    flags=(("--port", "0"), ("--port", "0", "--version", "no-such-version")),
    flags_from_vm=_served_version,
)


ANSWERS = frozenset({"select_version", "quit"})
"""The gates :func:`answer` answers: it is asked only when an event offers one."""


def answer(waiting: list[str], vm: Mapping[str, Any], memory: dict[str, Any]) -> Answer:
    """A sensible client: the current version (else the newest), quit once served."""
    if "select_version" in waiting:
        if vm.get("has_current"):
            return ("select_version", {"current": True})
        return ("select_version", {"wiki_id": vm["versions"][-1]["id"]})
    if waiting == ["quit"] and vm.get("state") == "serving":
        return ("quit", {})
    return None


DEFAULT_SERVER_ERROR = "start server: listen tcp 127.0.0.1:0: bind: address already in use"
"""vm.error when a scenario's ``server`` failure gives no text of its own."""


class VersionEntry(msgspec.Struct):
    """One entry of vm.versions."""

    id: str
    timestamp: str
    is_current: bool


class BrowseVM(msgspec.Struct):
    state: str = ""
    url: str | msgspec.UnsetType = msgspec.UNSET
    browser_opened: bool = False
    has_current: bool = False
    versions: list[VersionEntry] | msgspec.UnsetType = msgspec.UNSET
    error: str | msgspec.UnsetType = msgspec.UNSET


class SelectVersionParams(msgspec.Struct):
    """``{"wiki_id": "<id>"}`` or ``{"current": true}``; an empty id or false is absent."""

    wiki_id: str = ""
    current: bool = False


class WikiSite:
    """One version of the project's wiki drawn from the seed (a ``Site``): the catalog
    generate draws, each page's markdown drawn as generate writes one (citing no file:
    the seed's project has none). The current version's pages are drawn with the seed
    itself, as generate draws them; every other version's with a seed of its own, so
    versions read differently."""

    def __init__(
        self,
        *,
        project: str,
        version: str,
        timestamp: str,
        catalog: tuple[wiki.Page, ...],
        language: wikiwords.Language,
        seed: int,
        version_index: int,
        current: bool = False,
    ) -> None:
        self.project = project
        self.version = version
        self.timestamp = timestamp
        self.catalog = catalog
        self.language: wikiwords.Language = language
        self.seed = seed
        self.version_index = version_index
        self.current = current
        self._page_seed = (
            seed
            if current
            else random.Random(f"zread-sim:{seed}:version:{version_index}").getrandbits(32)
        )
        self.pages = catalog  # a page of the catalog has the shape of a SitePage
        self._by_slug = {page.slug: page for page in catalog}
        self._links = tuple((page.title, page.slug) for page in catalog)

    def markdown(self, slug: str) -> str | None:
        page = self._by_slug.get(slug)
        if page is None:
            return None
        return wiki.page_markdown(
            page, language=self.language, seed=self._page_seed, others=self._links, sources=()
        )

    def wiki_json(self) -> bytes:
        """wiki.json as zread writes it: keys in zread's order, ``group`` only when set,
        2-space indent, non-ASCII raw, no trailing newline; ``generated_at`` is the
        version's timestamp with a fraction drawn from the seed."""
        from simulator.formats import wiki as wf

        stamp = self.timestamp.removesuffix("Z")
        if "." not in stamp:  # Go's RFC 3339 with nanoseconds: no trailing zeros
            nanos = random.Random(f"zread-sim:{self.seed}:{self.version}").randrange(1, 10**9)
            stamp += "." + f"{nanos:09d}".rstrip("0")
        index = wf.wiki_index(self.version, f"{stamp}Z", self.language, self.pages)
        return wf.encode_wiki(index)


class BrowseModel(Driver):
    flags: BrowseFlags
    vm_type = BrowseVM
    vm: BrowseVM
    _versions: tuple[wiki.Version, ...] | None = None
    _chosen = 0
    _requested = False
    _elapsed = False
    _failure = ""
    _started: ServerStarted | None = None

    @classmethod
    def versions_read(cls, flags: Flags) -> str:
        """The version asked for, or every one: select_version shows each one's date."""
        assert isinstance(flags, BrowseFlags)
        return flags.version or EVERY_VERSION

    def versions(self) -> tuple[wiki.Version, ...]:
        """The world's wiki versions (ids and dates drawn where the scenario left them)."""
        if self._versions is None:
            self._versions = wiki.versions(self.rt.scenario.world, self.rt.seed)
        return self._versions

    # -- starting ------------------------------------------------------------------

    def begin(self, _: EventData) -> None:
        self.vm.has_current = any(v.is_current for v in self.versions())

    def no_wiki(self, _: EventData) -> bool:
        return not self.rt.scenario.world.wikis

    def several(self, _: EventData) -> bool:
        return len(self.rt.scenario.world.wikis) > 1

    # -- --version ID --------------------------------------------------------------

    def version_asked(self, _: EventData) -> bool:
        return bool(self.flags.version)

    def version_unknown(self, _: EventData) -> bool:
        wanted = self.flags.version
        return bool(wanted) and all(v.id != wanted for v in self.versions())

    def refuse_version(self, _: EventData) -> None:
        ids = ", ".join(v.id for v in self.versions())
        self._failure = f'wiki version "{self.flags.version}" not found (one of {ids})'

    def choose_asked_version(self, _: EventData) -> None:
        ids = [v.id for v in self.versions()]
        self._chosen = ids.index(self.flags.version)

    # -- select_version ------------------------------------------------------------

    def offer_versions(self, _: EventData) -> None:
        self.vm.versions = [VersionEntry(v.id, v.timestamp, v.is_current) for v in self.versions()]

    def withdraw_versions(self, _: EventData) -> None:
        self.vm.versions = msgspec.UNSET

    def version_examples(self) -> list[dict[str, Any]]:
        """The answers a client may give now: the current version, and each other one."""
        versions = self.vm.versions or []
        examples: list[dict[str, Any]] = [{"current": True}] if self.vm.has_current else []
        return examples + [{"wiki_id": v.id} for v in versions if not v.is_current]

    def check_version(self, params: SelectVersionParams) -> None:
        if params.wiki_id and params.current:
            raise InvalidParams("give either wiki_id or current:true, not both")
        if params.current:
            if not self.vm.has_current:
                raise InvalidParams("no current wiki version; choose one by wiki_id")
            return
        if not params.wiki_id:
            raise InvalidParams('expected {"wiki_id":"<id>"} or {"current":true}')
        ids = [v.id for v in self.versions()]
        if params.wiki_id not in ids:
            raise InvalidParams(f"unknown wiki_id {params.wiki_id!r} (one of {', '.join(ids)})")

    def choose_version(self, event: EventData) -> None:
        params: SelectVersionParams = event.kwargs["params"]
        for index, version in enumerate(self.versions()):
            if version.id == params.wiki_id or (params.current and version.is_current):
                self._chosen = index
                return

    # -- loading -------------------------------------------------------------------

    def site(self) -> WikiSite:
        """What to serve: the chosen version of the project's wiki."""
        world = self.rt.scenario.world
        version = self.versions()[self._chosen]
        return WikiSite(
            project=world.project.name,
            version=version.id,
            timestamp=version.timestamp,
            catalog=wiki.world_catalog(world, self.rt.seed),
            language=wikiwords.wiki_language(world.config.language),
            seed=self.rt.seed,
            version_index=self._chosen,
            current=version.is_current,
        )

    def start_server(self, _: EventData) -> None:
        failure = self.rt.failure("server")
        if failure is not None:
            self._failure = failure.error or DEFAULT_SERVER_ERROR
            return
        self._requested = True
        flags = self.flags
        self.rt.effect(StartServer(self.site(), host=flags.host, port=flags.port))

    def on_effect(self, effect: object, result: object) -> None:
        if not isinstance(effect, StartServer) or not isinstance(result, ServerStarted):
            return
        self._started = result
        if self._elapsed and self.state == "loading":
            self.rt.schedule("_loaded", 0.0)  # the delay ran out first: leave loading now

    def delay_elapsed(self, _: EventData) -> None:
        self._elapsed = True

    def server_failed(self, _: EventData) -> bool:
        return bool(self._failure) or (self._started is not None and not self._started.url)

    def server_ready(self, _: EventData) -> bool:
        return self._started is not None and bool(self._started.url)

    def show_error(self, _: EventData) -> None:
        if self._failure:
            self.vm.error = self._failure
        elif self._started is not None:
            self.vm.error = f"start server: {self._started.error or 'no address'}"

    def serve(self, _: EventData) -> None:
        assert self._started is not None
        self.vm.url = self._started.url
        self.vm.browser_opened = self.rt.scenario.world.browser_opens

    def on_quit(self) -> None:
        if self._requested:
            self.rt.effect(StopServer())


CHART = {
    "name": "browse",
    "project": True,  # reads the project's .zread/wiki: a read-only project serves
    "model": "BrowseModel",
    "flags": "BrowseFlags",
    "timing": {"server_start": {"uniform": [0.2, 0.5]}},
    "failures": ["server"],
    "initial": "starting",
    "states": [
        {"name": "starting"},
        {
            "name": "select_version",
            "on_enter": "offer_versions",
            "on_exit": "withdraw_versions",
            "waiting_for": ["select_version", "quit"],
        },
        {
            "name": "loading",
            "on_enter": "start_server",
            "timers": [{"after": "server_start", "trigger": "_loaded"}],
        },
        {"name": "serving", "on_enter": "serve", "waiting_for": ["quit"]},
        {"name": "no_wiki", "terminal": True},
        {"name": "error", "on_enter": "show_error", "terminal": True},
    ],
    "transitions": [
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "no_wiki",
            "conditions": "no_wiki",
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "error",
            "conditions": "version_unknown",
            "before": ["begin", "refuse_version"],
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "loading",
            "conditions": "version_asked",
            "before": ["begin", "choose_asked_version"],
        },
        {
            "trigger": "_start",
            "source": "starting",
            "dest": "select_version",
            "conditions": "several",
            "before": "begin",
        },
        {"trigger": "_start", "source": "starting", "dest": "loading", "before": "begin"},
        {
            "trigger": "select_version",
            "source": "select_version",
            "dest": "loading",
            "before": "choose_version",
        },
        # _loaded fires when the server_start delay runs out, and again (from
        # on_effect) if the runner's answer came later; until both are in, no
        # transition runs and no event is emitted.
        {
            "trigger": "_loaded",
            "source": "loading",
            "dest": "error",
            "prepare": "delay_elapsed",
            "conditions": "server_failed",
        },
        {
            "trigger": "_loaded",
            "source": "loading",
            "dest": "serving",
            "prepare": "delay_elapsed",
            "conditions": "server_ready",
        },
    ],
    "commands": {
        "select_version": {
            "params": "SelectVersionParams",
            "check": "check_version",
            "examples": "version_examples",
        },
    },
}
