"""The HTTP server behind ``zread browse``: one version of a wiki, on a loopback address.

Owns: :class:`Site` and :class:`SitePage`, what a server serves (one version of a
wiki, whoever made it: drawn from the seed, or read from a wiki's files); and
:class:`WikiServer`, a real HTTP server: where it listens (a loopback host only, the
port search) and its routes (the HTML they answer is :mod:`~simulator.hosts.wikihtml`'s;
:func:`page_path` and :func:`render_markdown` are re-exported from it). The routes::

    GET /                     the index: the project, the version, every page linked
    GET /<slug>               one page: its markdown rendered to HTML (kept, for as long
                              as its markdown is the same: :data:`RENDERED_KEPT`)
    GET /api/wiki             the version's wiki.json bytes (application/json)
    GET /api/pages/<slug>     the page's raw markdown (text/markdown; charset=utf-8)

Everything else is ``404``. HEAD sends the headers GET would send, without the body.
With ``faults`` (an :class:`~simulator.scenario.httpfaults.HttpFaultPlan`: a scenario's
``[[faults.http]]``, and what a control peer adds while it runs), a GET or HEAD of any
of these may meet a fault instead (another status, a delay, a dribbled body, a reset,
a close after the headers); ``journal`` is called once for each request that does,
with its ``method``, ``path``, ``fault`` (the id) and ``kind``.
The rest is imported when a server starts (with asyncio and h11): the connections are
:mod:`simulator.hosts.httpserver`'s (how many are open at once, each one's deadline,
:data:`REQUEST_TIMEOUT` unless ``request_timeout=`` says otherwise, and
:meth:`WikiServer.close` ending them all at once), and each request's rules are
:mod:`simulator.hosts.httprequest`'s (the bounds on a request, methods other than GET
and HEAD ``405``, the ``Host`` rule: ``421`` for a name that is not this server's).

Where: the host must be ``localhost`` (bound as ``127.0.0.1``) or a loopback address
(``127.0.0.0/8``, ``::1``), else :class:`ListenError` before any socket is made (the
command line refuses other hosts already; this is the second guard). A port is tried,
then the next ones up while they are in use, :data:`PORT_TRIES` in all; port 0 is any
free port. :attr:`WikiServer.url` is ``http://<host>:<port>`` with the host as given
(an IPv6 address in brackets).

Must not: serve the file system (a path is looked up in the site's index, never joined
to a directory, and the site is asked only for slugs of its index), know where a site's
pages come from (anything with the shape of :class:`Site` will do), bind anything but a
loopback address, write to stdout (the protocol's) or log requests to stderr, or import
asyncio or h11 before a server starts (``zread browse`` starts faster without them,
other commands never need them).
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from simulator.core.effects import DEFAULT_HOST, DEFAULT_PORT
from simulator.errors import ConfigurationError
from simulator.formats.wiki import WikiPage
from simulator.hosts import limits
from simulator.hosts.wikihtml import NOT_FOUND, index_html, page_html, render_markdown

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from simulator.hosts.httpserver import HttpServer
    from simulator.scenario.httpfaults import HttpFaultPlan


PORT_TRIES: Final = 100
"""How many ports are tried, from the one asked for upward, before giving up."""
REQUEST_TIMEOUT: Final = 10.0
"""Seconds a connection has to send its whole request (the default of
``WikiServer(request_timeout=)``); the answer has as long to be written."""
RENDERED_KEPT: Final = 32 << 20
"""The most bytes of rendered pages kept, with the markdown each was made from (the
least recently served go first)."""
_HTML: Final = "text/html; charset=utf-8"
_JSON: Final = "application/json"
_MARKDOWN: Final = "text/markdown; charset=utf-8"
_IN_USE: Final = frozenset(
    code for code in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", None)) if code
)


SitePage = WikiPage
"""One entry of a wiki's index, in wiki.json's terms (:class:`~simulator.formats.wiki.
WikiPage`)."""


@runtime_checkable
class Site(Protocol):
    """One version of one project's wiki: everything a server shows.

    The server looks a page up in :attr:`pages` before it asks for its markdown, so
    :meth:`markdown` only ever sees a slug of the index. It is asked from the server's
    worker threads (others than the one that made it), several requests at once, and
    should answer without blocking for long (a request waits for it, and while the
    threads are all busy, so do the others).
    """

    @property
    def project(self) -> str:
        """The project's name, the index page's heading."""
        ...

    @property
    def version(self) -> str:
        """The version id (wiki.json's ``id``)."""
        ...

    @property
    def pages(self) -> Sequence[SitePage]:
        """The index, in the wiki's order."""
        ...

    def markdown(self, slug: str) -> str | None:
        """The raw markdown of the page ``slug``, or None when it has none."""
        ...

    def wiki_json(self) -> bytes:
        """The bytes of this version's wiki.json."""
        ...


class ListenError(ConfigurationError):
    """The server cannot listen where it was asked (the user's host or port); the text
    says why, as Go would (``listen tcp 127.0.0.1:9681: bind: address already in
    use``). ``errno`` is the bind's, when a bind failed."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


def loopback(host: str) -> tuple[socket.AddressFamily, str]:
    """The address family and the address to bind for ``host``.

    Raises :class:`ValueError` unless ``host`` is ``localhost`` or a loopback address.
    """
    if host.lower() == "localhost":
        return socket.AF_INET, "127.0.0.1"
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise ValueError(f"{host!r} is not a loopback address")
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return family, str(address)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


_API_NOT_FOUND: Final = b'{"error":"not found"}'


@dataclass(frozen=True, slots=True)
class _Reply:
    status: HTTPStatus
    content_type: str
    body: bytes


class _Rendered:
    """Pages rendered, by slug, each with the markdown it was made from: a page is
    rendered again only when its markdown changed (what the site gives is compared, so
    any change counts, whatever made it). At most ``limit`` bytes, the least recently
    served dropped first; asked from several threads at once."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pages: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, slug: str, markdown: str) -> bytes | None:
        with self._lock:
            kept = self._pages.get(slug)
            if kept is None or kept[0] != markdown:
                return None
            self._pages.move_to_end(slug)
            return kept[1]

    def put(self, slug: str, markdown: str, document: bytes) -> None:
        with self._lock:
            old = self._pages.pop(slug, None)
            if old is not None:
                self._size -= _cost(*old)
            self._pages[slug] = (markdown, document)
            self._size += _cost(markdown, document)
            while self._size > self._limit:
                self._size -= _cost(*self._pages.popitem(last=False)[1])


def _cost(markdown: str, document: bytes) -> int:
    return len(markdown) + len(document)


class _Routes:
    """What each path answers, for one site. The index is drawn once; a page's
    markdown is asked for on each request, and rendered when it changed."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._rendered = _Rendered(RENDERED_KEPT)
        pages = tuple(site.pages)
        self._by_slug: dict[str, SitePage] = {}
        for page in pages:
            self._by_slug.setdefault(page.slug, page)
        self._slugs = frozenset(self._by_slug)
        index = index_html(site.project, site.version, pages)
        self._index = _Reply(HTTPStatus.OK, _HTML, index.encode())

    def get(self, path: str) -> _Reply:
        """The reply to GET ``path`` (decoded, without the query)."""
        if path == "/":
            return self._index
        if path == "/api/wiki":
            return _Reply(HTTPStatus.OK, _JSON, self.site.wiki_json())
        if path.startswith("/api/"):
            slug = path.removeprefix("/api/pages/")
            text = self._markdown(slug) if slug != path else None
            if text is None:
                return _Reply(HTTPStatus.NOT_FOUND, _JSON, _API_NOT_FOUND)
            return _Reply(HTTPStatus.OK, _MARKDOWN, text.encode())
        slug = path.removeprefix("/")
        text = self._markdown(slug)
        if text is None:
            return _Reply(HTTPStatus.NOT_FOUND, _HTML, NOT_FOUND)
        document = self._rendered.get(slug, text)
        if document is None:
            body = render_markdown(text, self._slugs)
            page = page_html(self.site.project, self.site.version, self._by_slug[slug], body)
            document = page.encode()
            self._rendered.put(slug, text, document)
        return _Reply(HTTPStatus.OK, _HTML, document)

    def _markdown(self, slug: str) -> str | None:
        if slug not in self._by_slug:
            return None  # only a slug of the index ever reaches the site
        return self.site.markdown(slug)


# -- where it listens ----------------------------------------------------------------


def _bind(family: socket.AddressFamily, address: tuple[str, int]) -> socket.socket:
    """A socket bound at ``address`` and listening; OSError when it cannot be.

    It listens here, not later: with SO_REUSEADDR, Linux lets two sockets bind one port
    while neither listens, and the second then fails in ``listen`` (two browses
    starting at once). Failing here, the port search moves on to the next port."""
    from simulator.hosts.httpserver import LISTEN_BACKLOG  # the server is next anyway

    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # On Windows SO_REUSEADDR lets a second socket take a port in use: the port
        # search would never see it busy.
        if os.name != "nt":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound at ``port`` or the first free one above it (any, for 0)."""
    try:
        family, address = loopback(host)
    except ValueError:
        raise ListenError(
            f"listen tcp {_host_port(host, port)}: refusing a non-loopback address"
        ) from None
    last = port if port == 0 else min(port + PORT_TRIES - 1, 65535)
    for candidate in range(port, last + 1):
        try:
            return _bind(family, (address, candidate))
        except OSError as err:
            limits.reraise(err)  # out of descriptors: no answer about the address
            if err.errno in _IN_USE and candidate < last:
                continue
            reason = (err.strerror or str(err)).lower()
            where = _host_port(address, candidate)
            tried = f" (tried ports {port}-{last})" if err.errno in _IN_USE and last > port else ""
            raise ListenError(f"listen tcp {where}: bind: {reason}{tried}", err.errno) from err
    raise AssertionError("unreachable: the last candidate returns or raises")


class WikiServer:
    """A running wiki server; :meth:`close` stops it (safe to call more than once).

    ``request_timeout`` is the seconds a connection has to send its whole request
    (:data:`REQUEST_TIMEOUT` unless a test wants a short one). ``faults`` are the HTTP
    faults its requests meet (the plan is read at each request: one added to it later
    applies from the next), and ``journal`` is told of each request that meets one
    (see the module docstring). Raises
    :class:`ListenError` when it cannot listen: a host that is not loopback, no free
    port among those tried, or any other bind failure; :class:`ValueError` for a
    ``request_timeout`` that is not positive; out of descriptors, memory or threads
    (to bind, or to accept and answer: :mod:`~simulator.hosts.httpserver` proves it
    can), what the machine raised (:mod:`~simulator.hosts.limits` tells it).
    """

    def __init__(
        self,
        site: Site,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        faults: HttpFaultPlan | None = None,
        journal: Callable[[dict[str, str]], None] | None = None,
    ) -> None:
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be positive, not {request_timeout!r}")
        self.site = site
        self.host = host
        self.faults = faults
        routes = _Routes(site)
        listener = _listen(host, port)
        bound, self.port = listener.getsockname()[:2]
        url_host = host if host.lower() == "localhost" else str(bound)
        self.url = f"http://{_host_port(url_host, self.port)}"
        try:
            from simulator.hosts.httpserver import HttpServer

            self._http: HttpServer = HttpServer(
                listener,
                routes.get,
                request_timeout=request_timeout,
                name=f"wikiserver:{self.port}",
                faults=faults,
                on_fault=journal,
            )
        except BaseException:
            listener.close()
            raise

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._http.closed

    @property
    def open_connections(self) -> int:
        """How many connections are open now (accepted, not yet ended)."""
        return self._http.open_connections

    def close(self) -> None:
        """Stop serving, end the connections still open and release the port; later
        calls do nothing."""
        self._http.close()

    def __enter__(self) -> WikiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
