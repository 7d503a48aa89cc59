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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.home import Home

__all__ = [
    "AskApproval",
    "CancelApproval",
    "DraftLeft",
    "EffectHost",
    "SaveConfig",
    "SaveLogin",
    "ServerStarted",
    "StartServer",
    "StopServer",
    "WikiGenerated",
]


@dataclass(frozen=True, slots=True)
class SaveConfig:
    """Persist these config values (``zread config`` saved).

    ``initial`` holds the values the command started from: a home then writes only the
    values that differ, so two processes editing different fields both keep theirs.
    Left empty, every value is written.
    """

    values: dict[str, str]
    initial: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SaveLogin:
    """Store the account and model the user chose (``zread login`` finished)."""

    username: str
    region: str
    model: str


@dataclass(frozen=True, slots=True)
class WikiGenerated:
    """A generate run finished: the wiki is a new version, now current; no draft is left."""

    pages_done: int
    pages_total: int


@dataclass(frozen=True, slots=True)
class DraftLeft:
    """A generate run stopped while running: a draft with ``done`` pages is left."""

    done: int


_PERSISTED = (SaveConfig, SaveLogin, WikiGenerated, DraftLeft)
"""The effects a home keeps; without a home they change nothing anywhere."""


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
    """Performs effects for the sessions of one runner; :meth:`close` releases all.

    With a ``home``, what a command saved persists there; without one it is dropped.
    """

    servers: dict[int, Any] = field(default_factory=dict)
    home: Home | None = None

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
        elif isinstance(effect, _PERSISTED) and self.home is not None:
            self.home.apply(effect)
        return None

    def close(self) -> None:
        """Stop every server still running, and close the home."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()
        if self.home is not None:
            self.home.close()


@dataclass(frozen=True, slots=True)
class AskApproval:
    """Ask the control peer to play the user in the browser (login's ``authorize``)."""

    url: str
    timeout_ns: int


@dataclass(frozen=True, slots=True)
class CancelApproval:
    """The authorization is no longer awaited: cancel the pending request."""
