"""Effects: what a driver asks the outside world to do, as plain data.

Owns: the effect types, frozen values a driver hands to ``Runtime.effect`` and a
session returns with its events, and the results a host hands back
(:class:`ServerStarted`). Performing them is :mod:`simulator.hosts.effects`'s job.

Must not: do anything: these are descriptions, never actions.
"""

from __future__ import annotations

from typing import Any

import msgspec


class SaveConfig(msgspec.Struct, frozen=True):
    """Persist these config values (``zread config`` saved).

    ``initial`` holds the values the command started from: a home then writes only the
    values that differ, so two processes editing different fields both keep theirs.
    Left empty, every value is written.
    """

    values: dict[str, str]
    initial: dict[str, str] = msgspec.field(default_factory=dict)


class SaveLogin(msgspec.Struct, frozen=True):
    """Store the account and model the user chose (``zread login`` finished)."""

    username: str
    region: str
    model: str


class CatalogReady(msgspec.Struct, frozen=True):
    """A generate run has its catalog: a new draft of these pages (``resumed``: the
    draft already on disk goes on). A store gives the draft its id now (local time) and
    writes ``drafts/wiki.json``."""

    pages: tuple[Any, ...]
    """The catalog's :class:`~simulator.scenario.wiki.Page` entries, in order."""
    language: str
    resumed: bool = False


class PageWritten(msgspec.Struct, frozen=True):
    """Page ``page_id`` (1-based, in catalog order) is done: its markdown goes into the
    draft."""

    page_id: int


class WikiGenerated(msgspec.Struct, frozen=True):
    """A generate run finished (every page, or the rest skipped): the draft, with the
    pages written, is a new version and the current one; no draft is left."""

    pages_done: int
    pages_total: int


class DraftLeft(msgspec.Struct, frozen=True):
    """A generate run stopped while running: a draft with ``done`` pages is left."""

    done: int


PERSISTED = (SaveConfig, SaveLogin, CatalogReady, PageWritten, WikiGenerated, DraftLeft)
"""The effects a store keeps; without one they change nothing anywhere."""


DEFAULT_HOST = "127.0.0.1"
"""Where ``zread browse`` listens unless ``--host`` says otherwise."""
DEFAULT_PORT = 9681
"""The port ``zread browse`` tries first (then the next ones up); 0 is any free port."""


class StartServer(msgspec.Struct, frozen=True):
    """Serve ``site`` over HTTP on ``host`` (a loopback address) at ``port``.

    ``site`` has the shape of :class:`simulator.hosts.wikiserver.Site` (one version of
    a wiki: its index, each page's markdown, its wiki.json). ``port`` is the first one
    tried, then the next ones up while they are busy; 0 is any free port.
    """

    site: Any
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT


class StopServer(msgspec.Struct, frozen=True):
    """Stop the server started for this session."""


class ServerStarted(msgspec.Struct, frozen=True):
    """The result of :class:`StartServer`: its URL (``http://<host>:<port>``), or why
    it could not listen (``error``, with ``url`` empty)."""

    url: str = ""
    error: str = ""


class AskApproval(msgspec.Struct, frozen=True):
    """Ask the control peer to play the user in the browser (login's ``authorize``)."""

    url: str
    timeout_ns: int


class CancelApproval(msgspec.Struct, frozen=True):
    """The authorization is no longer awaited: cancel the pending request."""
