"""The HTTP server behind ``zread browse``: one version of a wiki, on a loopback address.

Owns: :class:`Site` and :class:`SitePage`, what a server serves (one version of a
wiki, whoever made it: drawn from the seed, or read from a wiki's files); and
:class:`WikiServer`, a real HTTP server served from a daemon thread; where it listens
(a loopback host only, the port search); its routes; and the HTML of the index and of
each page (the page's markdown rendered with markdown-it-py, imported when the first
page is served). The routes::

    GET /                     the index: the project, the version, every page linked
    GET /<slug>               one page: its markdown rendered to HTML
    GET /api/wiki             the version's wiki.json bytes (application/json)
    GET /api/pages/<slug>     the page's raw markdown (text/markdown; charset=utf-8)

Everything else is ``404``; any method but GET and HEAD is ``405`` with
``Allow: GET, HEAD``. HEAD sends the headers GET would send, without the body. Every
response has a ``Content-Length`` and closes its connection. A request body is never
used: a ``Content-Length`` that is not one decimal number is ``400``, one over
:data:`MAX_BODY` is ``413`` (answered at once, the body unread); a smaller body is read
within the request's deadline and dropped, and one sent chunked or after
``Expect: 100-continue`` is not waited for.

Where: the host must be ``localhost`` (bound as ``127.0.0.1``) or a loopback address
(``127.0.0.0/8``, ``::1``), else :class:`ListenError` before any socket is made (the
command line refuses other hosts already; this is the second guard). A port is tried,
then the next ones up while they are in use, :data:`PORT_TRIES` in all; port 0 is any
free port. :attr:`WikiServer.url` is ``http://<host>:<port>`` with the host as given
(an IPv6 address in brackets).

Must not: serve the file system (a path is looked up in the site's index, never joined
to a directory, and the site is asked only for slugs of its index), know where a site's
pages come from (anything with the shape of :class:`Site` will do),
bind anything but a loopback address, answer a request whose ``Host`` names another
server (a web page reaching it through DNS rebinding: 421, and one stderr line for each
of the first few such names), write to stdout (the protocol's) or log requests to
stderr, or hold a thread or a connection without
bound. Requests are bounded: http.server's limits on the request line (64 KiB) and
headers (100); a connection has :data:`REQUEST_TIMEOUT` (``request_timeout=``) from
when its handler takes it up to send the whole request, line, headers and body (a
deadline, not an idle time: a client trickling a byte a second is dropped at it as
a silent one is), and each of the answer's two writes (headers, body) has as long again.
:data:`MAX_CONNECTIONS` are served at once; the next ones wait, unaccepted, in a listen
backlog of :data:`LISTEN_BACKLOG` (beyond it the kernel drops their SYNs and the
client retries). :meth:`WikiServer.close` stops accepting and ends the connections
still open, stalled or not, at once.

``http.server`` is enough: the server answers a handful of GETs from one person's
browser or from a client's test, on loopback; it needs no TLS, no keep-alive, no
streaming and no routing beyond a few prefixes. ``ThreadingHTTPServer`` keeps a slow
reader from blocking the others, and its daemon threads never hold the process up.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import html
import io
import ipaddress
import os
import socket
import socketserver
import sys
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable
from urllib.parse import quote, unquote, urlsplit

from simulator.core.effects import DEFAULT_HOST, DEFAULT_PORT
from simulator.core.errors import ConfigurationError
from simulator.formats.wiki import WikiPage

if TYPE_CHECKING:
    from collections.abc import Sequence, Set
    from email.message import Message

    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

__all__ = [
    "LISTEN_BACKLOG",
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "PORT_TRIES",
    "REQUEST_TIMEOUT",
    "ListenError",
    "Site",
    "SitePage",
    "WikiServer",
    "loopback",
    "page_path",
    "render_markdown",
]

PORT_TRIES: Final = 100
"""How many ports are tried, from the one asked for upward, before giving up."""
MAX_CONNECTIONS: Final = 64
"""Connections served at once; the next ones wait in the listen backlog."""
LISTEN_BACKLOG: Final = 128
"""The listen queue (``request_queue_size``): connections not yet accepted. socketserver's
5 overflowed under a burst: 200 GETs at once waited for SYN retries (p99 ~30 s)."""
REQUEST_TIMEOUT: Final = 10.0
"""Seconds a connection has to send its whole request (the default of
``WikiServer(request_timeout=)``); each write of the answer has as long."""
MAX_BODY: Final = 8 << 10
"""The largest request body read (and dropped); a larger one is ``413``."""
ALLOWED_METHODS: Final = ("GET", "HEAD")
_POLL_INTERVAL: Final = 0.02
"""How often the serving loop checks for shutdown: bounds how long close() takes."""
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
    :meth:`markdown` only ever sees a slug of the index. An implementation must be
    safe to call from several threads at once (requests are answered in parallel).
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


def page_path(slug: str) -> str:
    """The path a page is served at."""
    return "/" + quote(slug, safe="")


# -- markdown ----------------------------------------------------------------------


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """Links to pages go to ``/<slug>``; other relative targets (source citations such
    as ``src/app.py#L1-L9``) keep their text, with the target as a title, and no href:
    the server serves no file of the project."""
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    parts = urlsplit(href)
    if href and not (parts.scheme or parts.netloc or href.startswith(("/", "#"))):
        target = unquote(parts.path).removeprefix("./").removesuffix(".md")
        slugs: Set[str] = env["slugs"]
        if target in slugs:
            fragment = f"#{parts.fragment}" if parts.fragment else ""
            token.attrSet("href", page_path(target) + fragment)
        else:
            token.attrs.pop("href", None)
            token.attrSet("class", "source")
            token.attrSet("title", href)
    return renderer.renderToken(tokens, idx, options, env)


def _is_mermaid(token: Token) -> bool:
    return token.info.strip().split(maxsplit=1)[:1] == ["mermaid"]


@functools.cache
def _markdown_it() -> MarkdownIt:
    """One parser for the process (markdown-it keeps no state between renders)."""
    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    assert isinstance(md.renderer, RendererHTML)
    default_fence = md.renderer.rules["fence"]

    def fence(
        renderer: RendererHTML,
        tokens: Sequence[Token],
        idx: int,
        options: OptionsDict,
        env: EnvType,
    ) -> str:
        # A mermaid block stays its text, in <pre class="mermaid">; others as usual.
        if _is_mermaid(tokens[idx]):
            return f'<pre class="mermaid">{_esc(tokens[idx].content)}</pre>\n'
        return str(default_fence(tokens, idx, options, env))

    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("fence", fence)
    return md


def render_markdown(text: str, slugs: Set[str]) -> str:
    """``text`` (a page's markdown) as HTML: raw HTML is escaped, links to a slug of
    ``slugs`` point at its page, fenced code and mermaid blocks are ``<pre>``."""
    return str(_markdown_it().render(text, {"slugs": slugs}))


# -- the pages ---------------------------------------------------------------------


def _document(title: str, main: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n</head>\n<body>\n{main}</body>\n</html>\n"
    )


def _entry(page: SitePage) -> str:
    level = f' <span class="level">{_esc(page.level)}</span>' if page.level else ""
    return f'<li><a href="{_esc(page_path(page.slug))}">{_esc(page.title)}</a>{level}</li>\n'


def _index(site: Site, pages: Sequence[SitePage]) -> str:
    """Every page in order; a heading wherever the section (or the group) changes."""
    parts: list[str] = []
    section: str | None = None
    group: str | None = None
    for page in pages:
        if page.section != section or page.group != group:
            if section is not None:
                parts.append("</ul>\n")
            if page.section != section:
                if section is not None:
                    parts.append("</section>\n")
                parts.append(f"<section>\n<h2>{_esc(page.section or 'Pages')}</h2>\n")
                section = page.section
            if page.group:
                parts.append(f"<h3>{_esc(page.group)}</h3>\n")
            group = page.group
            parts.append("<ul>\n")
        parts.append(_entry(page))
    if section is not None:
        parts.append("</ul>\n</section>\n")
    listing = "".join(parts) or "<p>This wiki has no pages.</p>\n"
    main = (
        f"<main>\n<h1>{_esc(site.project)}</h1>\n"
        f'<p class="version">Version <code>{_esc(site.version)}</code></p>\n'
        f"<nav>\n{listing}</nav>\n</main>\n"
    )
    return _document(f"{site.project} wiki", main)


def _page(site: Site, page: SitePage, body: str) -> str:
    about = " / ".join(_esc(part) for part in (page.section, page.group) if part)
    if page.level:
        about = f"{about} · {_esc(page.level)}" if about else _esc(page.level)
    main = (
        f'<nav><a href="/">{_esc(site.project)}</a> / {_esc(page.title)}</nav>\n'
        f"<main>\n<article>\n<h1>{_esc(page.title)}</h1>\n"
        + (f'<p class="about">{about}</p>\n' if about else "")
        + body
        + "</article>\n</main>\n"
        f'<footer><a href="/">Index</a> · version <code>{_esc(site.version)}</code></footer>\n'
    )
    return _document(f"{page.title} - {site.project}", main)


_NOT_FOUND: Final = _document(
    "404 Not Found", '<main>\n<h1>Not found</h1>\n<p><a href="/">The index</a></p>\n</main>\n'
).encode()
_NOT_ALLOWED: Final = _document(
    "405 Method Not Allowed",
    "<main>\n<h1>Method not allowed</h1>\n<p>This wiki answers GET and HEAD.</p>\n</main>\n",
).encode()
_BAD_LENGTH: Final = _document(
    "400 Bad Request",
    "<main>\n<h1>Bad request</h1>\n<p>Content-Length is not a length.</p>\n</main>\n",
).encode()
_TOO_LARGE: Final = _document(
    f"413 {HTTPStatus.REQUEST_ENTITY_TOO_LARGE.phrase}",
    "<main>\n<h1>Content too large</h1>\n<p>This wiki takes no request body.</p>\n</main>\n",
).encode()
_API_NOT_FOUND: Final = b'{"error":"not found"}'


@dataclass(frozen=True, slots=True)
class _Reply:
    status: HTTPStatus
    content_type: str
    body: bytes


class _Routes:
    """What each path answers, for one site. The index is drawn once; a page's
    markdown is asked for (and rendered) on each request."""

    def __init__(self, site: Site) -> None:
        self.site = site
        pages = tuple(site.pages)
        self._by_slug: dict[str, SitePage] = {}
        for page in pages:
            self._by_slug.setdefault(page.slug, page)
        self._slugs = frozenset(self._by_slug)
        self._index = _Reply(HTTPStatus.OK, _HTML, _index(site, pages).encode())

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
            return _Reply(HTTPStatus.NOT_FOUND, _HTML, _NOT_FOUND)
        page = self._by_slug[slug]
        body = _page(self.site, page, render_markdown(text, self._slugs))
        return _Reply(HTTPStatus.OK, _HTML, body.encode())

    def _markdown(self, slug: str) -> str | None:
        if slug not in self._by_slug:
            return None  # only a slug of the index ever reaches the site
        return self.site.markdown(slug)


# -- the server --------------------------------------------------------------------


def _body_length(headers: Message) -> int | None:
    """The body length a request declares: 0 when it declares none, None when its
    ``Content-Length`` is not one decimal number (repeated, the values must agree)."""
    values = [
        part.strip() for value in headers.get_all("Content-Length", ()) for part in value.split(",")
    ]
    if not all(text.isascii() and text.isdigit() for text in values):
        return None
    # Past 18 digits it is too large however large (and int() refuses 4,300 digits).
    lengths = {
        MAX_BODY + 1 if len(digits) > 18 else int(digits or "0")
        for digits in (text.lstrip("0") for text in values)
    }
    if len(lengths) > 1:
        return None
    return lengths.pop() if lengths else 0


class _DeadlineReader(io.RawIOBase):
    """A connection's input that ends at a deadline: each receive waits at most for
    what is left, and one past the deadline raises :class:`TimeoutError` (which
    http.server takes as "discard this connection")."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        # The request's deadline runs from now, however the client spends it.
        deadline = time.monotonic() + self.server.request_timeout
        self.rfile.close()
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline))

    def version_string(self) -> str:
        return "zread-sim"

    def parse_request(self) -> bool:
        # Refuse here, before http.server's "501 Unsupported method": a length that is
        # none (400), a body too large to read (413), another method (405).
        if not super().parse_request():
            return False
        if not self.server.names(self.headers.get("Host")):
            self.server.refused_host(self.headers.get("Host", ""))
            self._reply(_Reply(HTTPStatus.MISDIRECTED_REQUEST, _HTML, _MISDIRECTED))
            return False
        length = _body_length(self.headers)
        if length is None:
            self._reply(_Reply(HTTPStatus.BAD_REQUEST, _HTML, _BAD_LENGTH))
            return False
        if length > MAX_BODY:
            self._reply(_Reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _HTML, _TOO_LARGE))
            return False
        if length and self._body_coming():
            # Read (within the deadline) so the client is not reset mid-send; dropped.
            self.rfile.read(length)
        if self.command in ALLOWED_METHODS:
            return True
        self._reply(
            _Reply(HTTPStatus.METHOD_NOT_ALLOWED, _HTML, _NOT_ALLOWED),
            allow=", ".join(ALLOWED_METHODS),
        )
        return False

    def _body_coming(self) -> bool:
        """Whether the body follows the headers unasked, ``Content-Length`` bytes: not
        when it is chunked (never read) or waits for a ``100 Continue`` (never sent)."""
        if "Transfer-Encoding" in self.headers:
            return False
        return self.headers.get("Expect", "").strip().lower() != "100-continue"

    def flush_headers(self) -> None:
        # The answer's writes: the request is in (or given up on), a fresh bound each.
        self.connection.settimeout(self.server.request_timeout)
        super().flush_headers()

    def do_GET(self) -> None:
        self._reply(self.server.routes.get(unquote(urlsplit(self.path).path)))

    do_HEAD = do_GET

    def _reply(self, reply: _Reply, *, allow: str = "") -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        if allow:
            self.send_header("Allow", allow)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def log_message(self, format: str, *args: object) -> None:
        """Silenced: stdout is the protocol's, stderr is for the simulator's own lines."""


_REFUSALS_SHOWN: Final = 16
"""How many refused ``Host`` values get their stderr line."""
_MISDIRECTED = _document(
    "Misdirected request",
    "<main><h1>Misdirected request</h1><p>This server answers only its own "
    "loopback address.</p></main>",
).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    # On Windows SO_REUSEADDR lets a second socket take a port in use: the port search
    # would never see it busy.
    allow_reuse_address = os.name != "nt"
    request_timeout: float = REQUEST_TIMEOUT

    def __init__(
        self, routes: _Routes, family: socket.AddressFamily, address: tuple[str, int]
    ) -> None:
        self.routes = routes
        self.address_family = family
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._stopping = False
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind also looks the host's name up (socket.getfqdn): slow on
        # some machines, and of no use here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        names = {"localhost", str(host).lower(), _host_port(str(host), 0).rsplit(":", 1)[0]}
        self._hosts = frozenset({*names, *(f"{name}:{self.server_port}" for name in names)})
        self._refused: set[str] = set()

    def names(self, host: str | None) -> bool:
        """Whether a request's ``Host`` names this server: ``localhost`` or the loopback
        address it listens on, with or without its port (no ``Host``: an HTTP/1.0 client,
        answered). Any other name is a web page that reached the server through DNS
        rebinding, and is not answered."""
        return host is None or host.strip().lower() in self._hosts

    def refused_host(self, host: str) -> None:
        """One stderr line per refused ``Host``, the first :data:`_REFUSALS_SHOWN` of
        them (a page could send thousands)."""
        with self._lock:
            if host in self._refused or len(self._refused) >= _REFUSALS_SHOWN:
                return
            self._refused.add(host)
        shown = ascii(host)[1:-1][:200]
        line = f"zread-sim: browse: refused a request for Host {shown!r}: not this server\n"
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(line)
            sys.stderr.flush()

    def process_request(self, request: Any, client_address: Any) -> None:
        # Too many at once: wait for a slot (a handler ends by its deadlines at the
        # latest), and meanwhile accept nothing: the next connections wait in the backlog.
        while not self._slots.acquire(timeout=_POLL_INTERVAL):
            if self._stopping:
                self.shutdown_request(request)
                return
        with self._lock:
            stopping = self._stopping
            if not stopping:
                self._open.add(request)
        if stopping:
            self._slots.release()
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: socket.socket) -> None:
        with self._lock:
            self._open.discard(request)
        self._slots.release()

    def shutdown(self) -> None:
        """Stop the serving loop, and end every connection still open: a handler
        blocked on a stalled client sees the end of its input at once."""
        with self._lock:
            self._stopping = True
            for request in self._open:
                with contextlib.suppress(OSError):
                    request.shutdown(socket.SHUT_RDWR)
        super().shutdown()

    def handle_error(self, request: object, client_address: object) -> None:
        """Silenced: a browser that hangs up mid-response is not worth a traceback."""


def _listen(routes: _Routes, host: str, port: int) -> _Server:
    """A server bound at ``port`` or the first free one above it (any, for 0)."""
    try:
        family, address = loopback(host)
    except ValueError:
        raise ListenError(
            f"listen tcp {_host_port(host, port)}: refusing a non-loopback address"
        ) from None
    last = port if port == 0 else min(port + PORT_TRIES - 1, 65535)
    for candidate in range(port, last + 1):
        try:
            return _Server(routes, family, (address, candidate))
        except OSError as err:
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
    (:data:`REQUEST_TIMEOUT` unless a test wants a short one). Raises
    :class:`ListenError` when it cannot listen: a host that is not loopback, no free
    port among those tried, or any other bind failure; :class:`ValueError` for a
    ``request_timeout`` that is not positive.
    """

    def __init__(
        self,
        site: Site,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be positive, not {request_timeout!r}")
        self.site = site
        self.host = host
        self._httpd = _listen(_Routes(site), host, port)
        self._httpd.request_timeout = request_timeout
        url_host = host if host.lower() == "localhost" else self._httpd.server_name
        self.url = f"http://{_host_port(url_host, self.port)}"
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name=f"wikiserver:{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._httpd.server_address[1])

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop serving, end the connections still open and release the port; later
        calls do nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=1.0)

    def __enter__(self) -> WikiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
