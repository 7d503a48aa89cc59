"""Effects: what a driver asks the outside world to do, and the host that does it.

Owns: the effect types (plain frozen data a driver hands to ``Runtime.effect``) and
:class:`EffectHost`, which a runner uses to perform them: start and stop the browse
server, and persist what a command saved (with a home; without one, nothing is
written anywhere). A runner drains ``Session.take_effects()``, calls
:meth:`EffectHost.perform`, and hands any result back with ``Session.resolve``.

The session and the drivers never import the host: they stay sans-I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EffectHost", "SaveConfig", "SaveLogin", "ServerStarted", "StartServer", "StopServer"]


@dataclass(frozen=True, slots=True)
class SaveConfig:
    """Persist these config values (``zread config`` saved)."""

    values: dict[str, str]


@dataclass(frozen=True, slots=True)
class SaveLogin:
    """Store the account and model the user chose (``zread login`` finished)."""

    username: str
    region: str
    model: str


@dataclass(frozen=True, slots=True)
class StartServer:
    """Serve a wiki over HTTP on 127.0.0.1 at an ephemeral port."""

    site: Any


@dataclass(frozen=True, slots=True)
class StopServer:
    """Stop the server started for this session."""


@dataclass(frozen=True, slots=True)
class ServerStarted:
    """The result of :class:`StartServer`: where it listens, or why it could not."""

    url: str = ""
    error: str = ""


@dataclass
class EffectHost:
    """Performs effects for the sessions of one runner; :meth:`close` releases all."""

    servers: dict[int, Any] = field(default_factory=dict)

    def perform(self, owner: int, effect: object) -> object | None:
        """Do ``effect`` for the session ``owner`` (any stable id); its result, if any."""
        if isinstance(effect, StartServer):
            from simulator.wikiserver import WikiServer

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
        return None

    def close(self) -> None:
        """Stop every server still running."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()
