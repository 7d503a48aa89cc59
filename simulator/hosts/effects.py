"""Performing effects: what a runner does for a session's requests to the outside world.

Owns: :class:`EffectHost`, which starts and stops the browse server (with the HTTP
faults its requests meet: :attr:`EffectHost.http_faults`, one plan for every server it
starts, which a control peer adds to while it runs) and persists what a command saved
in a :class:`Store` (with a home; without one, nothing is written anywhere), and
:class:`Store`, the small interface a world kept across commands offers:
the world a new session starts from, the effects that change it, and the wiki
versions it keeps for browse to serve.
:class:`~simulator.hosts.files.FileStore` (zread's files) is the store.

Out of descriptors, memory or threads, reading the wiki or starting the server, it
raises :class:`~simulator.errors.OutOfResources` (:mod:`~simulator.hosts.limits`):
never a server reported started that cannot serve, nor the drawn wiki served in place
of one it could not read.

Must not: call into a session. A runner hands it the effects a session call returned
(:meth:`EffectHost.perform_all`) and feeds any result back to the session as a new
input.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from simulator.scenario import Scenario
    from simulator.scenario.httpfaults import HttpFaultPlan
    from simulator.scenario.world import World

HttpJournal = Callable[[dict[str, str]], None]
"""Told of each request a server meets a fault with: ``method``, ``path``, ``fault``
(its id), ``kind``."""


class Store(Protocol):
    """The world kept across commands, as a runner and a session's builder use it."""

    def world(self, base: World, *, seed: int = 0, versions: str = "") -> World:
        """``base`` (a scenario's world) with what the store keeps laid over it;
        ``versions``: whose wiki.json to read (:meth:`simulator.core.driver.Driver.
        versions_read`)."""
        ...

    def apply(self, effect: object) -> None:
        """Keep what a persisted effect (:data:`~simulator.core.effects.PERSISTED`) says."""
        ...

    def site(self, version: str) -> Any:
        """Version ``version`` of the wiki as the store keeps it (a
        :class:`~simulator.hosts.wikiserver.Site`), or None: the drawn wiki stands in."""
        ...

    def close(self) -> None: ...


@functools.cache
def _effect_kinds() -> types.ModuleType:
    """:mod:`simulator.core.effects`, imported at the first effect, not with the host
    (most commands ask for none), and once: an import statement in :meth:`EffectHost.
    perform` would cost ~2 us an effect, and a load test performs one an event."""
    import simulator.core.effects

    return simulator.core.effects


class EffectHost:
    """Performs effects for the sessions of one runner; :meth:`close` releases all.

    With a ``home``, what a command saved persists there; without one it is dropped.
    ``http_faults`` are the HTTP faults of the servers it starts (a scenario's, drawn
    from the session's seed; none when not given); ``http_journal`` is told of each
    request that meets one (it may be set later: it is looked up at each request).
    """

    def __init__(
        self,
        servers: dict[int, Any] | None = None,
        home: Store | None = None,
        *,
        http_faults: HttpFaultPlan | None = None,
        http_journal: HttpJournal | None = None,
    ) -> None:
        self.servers: dict[int, Any] = {} if servers is None else servers
        self.home = home
        self._http_faults = http_faults
        self.http_journal = http_journal

    @classmethod
    def for_scenario(
        cls, scenario: Scenario | None, *, seed: int, home: Store | None = None
    ) -> EffectHost:
        """The host of a session of ``scenario`` (none: no HTTP fault): its wiki
        server meets the scenario's ``[[faults.http]]``, drawn from ``seed``."""
        from simulator.scenario.httpfaults import HttpFaultPlan

        faults = HttpFaultPlan(scenario.http_faults if scenario else (), seed=seed)
        return cls(home=home, http_faults=faults)

    @property
    def http_faults(self) -> HttpFaultPlan:
        """The HTTP faults of every server this host starts, running or to come: add to
        it, and the next request meets what was added. Made empty (seed 0) when first
        asked for, if none was given."""
        if self._http_faults is None:
            from simulator.scenario.httpfaults import HttpFaultPlan

            self._http_faults = HttpFaultPlan()
        return self._http_faults

    def __repr__(self) -> str:
        return f"EffectHost(servers={self.servers!r}, home={self.home!r})"

    def perform_all(self, owner: int, effects: Iterable[object]) -> list[tuple[object, object]]:
        """Do every effect of one session call, in order: what each runner calls.

        Returns the effects that have a result, each with it, for the runner to hand
        back to the session (``Session.resolve``) as a new input.
        """
        answered = []
        for effect in effects:
            result = self.perform(owner, effect)
            if result is not None:
                answered.append((effect, result))
        return answered

    def perform(self, owner: int, effect: object) -> object | None:
        """Do ``effect`` for the session ``owner`` (any stable id); its result, if any."""
        kinds = _effect_kinds()
        if isinstance(effect, kinds.StartServer):
            from simulator.hosts import limits
            from simulator.hosts.wikiserver import ListenError, WikiServer

            self._stop_server(owner)  # one server per session: a second start replaces it
            site = effect.site
            if self.home is not None:  # the wiki the store keeps, when it has that version
                with limits.doing("reading the wiki"):
                    site = self.home.site(site.version) or site
            try:
                with limits.doing("starting the wiki server"):
                    server = WikiServer(
                        site,
                        host=effect.host,
                        port=effect.port,
                        faults=self.http_faults,
                        journal=self._http_fault_seen,
                    )
            except (ListenError, TimeoutError) as err:  # (TimeoutError: it answered nothing)
                failed: object = kinds.ServerStarted(error=str(err) or "the server timed out")
                return failed
            self.servers[owner] = server
            started: object = kinds.ServerStarted(url=server.url)
            return started
        if isinstance(effect, kinds.StopServer):
            self._stop_server(owner)
        elif self.home is not None and isinstance(effect, kinds.PERSISTED):
            self.home.apply(effect)
        return None

    def _http_fault_seen(self, seen: dict[str, str]) -> None:
        """A server's request met a fault: :attr:`http_journal` is told (on the
        server's thread), if there is one; what it raises is dropped."""
        journal = self.http_journal
        if journal is not None:
            with contextlib.suppress(Exception):
                journal(seen)

    def _stop_server(self, owner: int) -> None:
        server = self.servers.pop(owner, None)
        if server is not None:
            server.close()

    def close(self) -> None:
        """Stop every server still running, and close the home."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()
        if self.home is not None:
            self.home.close()
