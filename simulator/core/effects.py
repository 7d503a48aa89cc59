"""Effects: what a driver asks the outside world to do, as plain data.

Owns: the effect types, frozen values a driver hands to ``Runtime.effect`` and a
session returns with its events, and the results a host hands back
(:class:`ServerStarted`). Performing them is :mod:`simulator.hosts.effects`'s job.

Must not: do anything: these are descriptions, never actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PERSISTED",
    "AskApproval",
    "CancelApproval",
    "DraftLeft",
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


PERSISTED = (SaveConfig, SaveLogin, WikiGenerated, DraftLeft)
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


@dataclass(frozen=True, slots=True)
class AskApproval:
    """Ask the control peer to play the user in the browser (login's ``authorize``)."""

    url: str
    timeout_ns: int


@dataclass(frozen=True, slots=True)
class CancelApproval:
    """The authorization is no longer awaited: cancel the pending request."""
