"""Performing effects: what a runner does for a session's requests to the outside world.

Owns: :class:`EffectHost`, which starts and stops the browse server and persists what
a command saved in a :class:`Store` (with a home; without one, nothing is written
anywhere), and :class:`Store`, the small interface a world kept across commands offers:
the world a new session starts from, and the effects that change it.
:class:`~simulator.hosts.home.Home` is the store today.

Must not: call into a session. A runner hands it the effects a session call returned
(:meth:`EffectHost.perform_all`) and feeds any result back to the session as a new
input.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from simulator.core.effects import PERSISTED, ServerStarted, StartServer, StopServer

if TYPE_CHECKING:
    from simulator.scenario.world import World

__all__ = ["EffectHost", "Store"]


class Store(Protocol):
    """The world kept across commands, as a runner and a session's builder use it."""

    def world(self, base: World, *, seed: int = 0) -> World:
        """``base`` (a scenario's world) with what the store keeps laid over it."""
        ...

    def apply(self, effect: object) -> None:
        """Keep what a persisted effect (:data:`~simulator.core.effects.PERSISTED`) says."""
        ...

    def close(self) -> None: ...


@dataclass
class EffectHost:
    """Performs effects for the sessions of one runner; :meth:`close` releases all.

    With a ``home``, what a command saved persists there; without one it is dropped.
    """

    servers: dict[int, Any] = field(default_factory=dict)
    home: Store | None = None

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
        if isinstance(effect, StartServer):
            from simulator.hosts.wikiserver import WikiServer

            try:
                server = WikiServer(effect.site)
            except OSError as err:
                return ServerStarted(error=f"listen on 127.0.0.1: {err.strerror}")
            self.servers[owner] = server
            return ServerStarted(url=server.url)
        if isinstance(effect, StopServer):
            server = self.servers.pop(owner, None)
            if server is not None:
                server.close()
        elif isinstance(effect, PERSISTED) and self.home is not None:
            self.home.apply(effect)
        return None

    def close(self) -> None:
        """Stop every server still running, and close the home."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()
        if self.home is not None:
            self.home.close()
