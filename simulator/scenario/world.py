"""The simulated world: what zread would find on the user's machine and account.

Owns: the typed structure of a scenario's ``[world]`` table (the account, the config
values, the release channel, the login provider, the project, its wiki versions and
draft, whether a browser opens) and nothing else. Every field has the
value the ``default`` scenario uses; a scenario overrides what it needs.

Must not: draw random numbers or do I/O. Drivers read the world; they never write it
(persisting a world across commands is the runner's job).
"""

# No `from __future__ import annotations` here: msgspec resolves these Structs'
# annotations when a scenario is first loaded, and each one left a string costs a
# compile and an eval at start-up.
from typing import Literal

import msgspec

from simulator.formats.ids import LEVELS, is_plain_name

MAX_PAGES = 5000
"""The most pages a scenario's wiki may have."""


class Account(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Who is logged in."""

    username: str = "octocat"
    logged_in: bool = True


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The values ``zread config`` edits (its nine fields but the read-only one)."""

    language: str = "en"
    doc_language: str = "en"
    max_concurrent: int = 4
    max_retries: int = 2
    llm_provider: str = "zhipu"
    llm_base_url: str = "https://open.bigmodel.cn/api/paas/v4"
    llm_model: str = "glm-4.6"
    llm_api_key: str = "sk-sim-0000000000000000"

    def __post_init__(self) -> None:
        if not 1 <= self.max_concurrent <= 64:
            raise ValueError("max_concurrent must be an integer 1-64")
        if not 0 <= self.max_retries <= 10:
            raise ValueError("max_retries must be an integer 0-10")


class Release(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The installed zread and what the update server offers."""

    current_version: str = "0.2.13"
    latest_version: str = "0.2.14"
    channel: str = "stable"
    go_version: str = "go1.24.4"
    package_manager: str = ""
    download_url: str = "https://download.zread.ai/zread/v{version}/zread_{os}_{arch}.tar.gz"
    download_bytes: int = 18_874_368
    download_steps: int = 12

    def __post_init__(self) -> None:
        if self.download_bytes < 1:
            raise ValueError("download_bytes must be >= 1")
        if self.download_steps < 3:
            raise ValueError("download_steps must be >= 3")


class Login(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The login provider: its regions, its models, its browser flow."""

    regions: list[str] = msgspec.field(default_factory=list)
    models: list[str] = msgspec.field(default_factory=lambda: ["glm-4.6", "glm-4.5-air"])
    authorize_url: str = "https://zread.ai/oauth/authorize"
    auth_timeout: float = 300.0
    approver: Literal["user", "control"] = "user"
    """Who approves in the browser: the simulated user (after the ``authorize``
    delay), or the control peer, when one is attached (``--control``)."""

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("models must not be empty")
        if not 0 < self.auth_timeout < float("inf"):
            raise ValueError("auth_timeout must be a finite number of seconds > 0")


class PageSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """One page a scenario asks for, in catalog order (a ``[[world.project.pages]]`` table).

    ``section`` and ``level`` left empty are filled in from the seed like a drawn page's;
    ``group`` empty means the page belongs to no group. Frozen, so a catalog of them can
    be a cache key.
    """

    title: str
    section: str = ""
    group: str = ""
    level: str = ""

    def __post_init__(self) -> None:
        if not self.title.strip():
            raise ValueError("title must not be empty")
        if self.level and self.level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {self.level!r}")


class Project(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The repository zread documents and its wiki's pages.

    ``pages`` is a count (the titles, sections and levels are drawn from the seed) or
    the pages themselves, in catalog order. The wiki's language is not here: it is the
    config's ``language`` (``zh...`` is Chinese, anything else English), as zread takes
    it from ``config.yaml``.
    """

    name: str = "acme/widget"
    pages: int | list[PageSpec] = 16

    def __post_init__(self) -> None:
        if isinstance(self.pages, int):
            if not 1 <= self.pages <= MAX_PAGES:
                raise ValueError(f"pages must be an integer 1-{MAX_PAGES}")
        elif not 1 <= len(self.pages) <= MAX_PAGES:
            raise ValueError(f"pages must list 1-{MAX_PAGES} [[world.project.pages]] tables")

    @property
    def page_count(self) -> int:
        """How many pages the wiki has, whichever way ``pages`` gives them."""
        return self.pages if isinstance(self.pages, int) else len(self.pages)


# Frozen: one made for a version on disk is shared by every session that lists it.
class WikiVersion(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A wiki generated earlier; ``id`` and ``timestamp`` are drawn when left empty."""

    id: str = ""
    timestamp: str = ""
    current: bool = False

    def __post_init__(self) -> None:
        _check_id(self.id)


class Draft(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A generation left half done: its first ``done`` catalog pages are finished, or,
    for a draft read from disk, the pages whose slugs ``finished`` lists (``id`` is the
    wiki id it was given when its catalog was made)."""

    done: int = 0
    id: str = ""
    finished: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.done < 0:
            raise ValueError("done must be >= 0")
        _check_id(self.id)
        for name in self.finished:
            if not is_plain_name(name):
                raise ValueError(f"finished: {name!r} is not a page slug (a plain file name)")


def _check_id(wiki_id: str) -> None:
    """A wiki id names a directory: one plain name, checked when the scenario loads."""
    if wiki_id and not is_plain_name(wiki_id):
        raise ValueError(
            f"id {wiki_id!r} is not a wiki id: one file name, without '/', '\\', "
            "spaces or control characters, not '.' or '..'"
        )


class World(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Everything a driver reads about the machine and the account."""

    account: Account = msgspec.field(default_factory=Account)
    config: Settings = msgspec.field(default_factory=Settings)
    release: Release = msgspec.field(default_factory=Release)
    login: Login = msgspec.field(default_factory=Login)
    project: Project = msgspec.field(default_factory=Project)
    wikis: list[WikiVersion] = msgspec.field(default_factory=lambda: [WikiVersion(current=True)])
    draft: Draft | None = None
    browser_opens: bool = True
    """Whether launching a browser works (login's browser_warn, browse's browser_opened)."""
