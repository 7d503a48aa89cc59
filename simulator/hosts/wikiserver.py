"""The HTTP server behind ``zread browse``: the simulated wiki on 127.0.0.1.

Owns: :class:`WikiServer`, a real HTTP server on ``127.0.0.1`` at an ephemeral port,
served from a daemon thread, and the HTML of the simulated wiki it serves. The URL
scheme is::

    GET /                     the index: project, version, the catalog as linked list
    GET /index.html           the same index
    GET /pages/<slug>.html    one page: its title, its paragraphs, a link back

Everything else is ``404``; any method but GET and HEAD is ``405`` with
``Allow: GET, HEAD``. HEAD sends the headers GET would send, without the body. Every
response is HTML in UTF-8 with a ``Content-Length``; every text from the site is
HTML-escaped.

Must not: serve the file system (paths are looked up in the site's catalog, never
joined to a directory), bind anything but 127.0.0.1, or write to stdout or stderr
(stdout carries the protocol; request logging is silenced).

``http.server`` is enough: the server answers a handful of GETs from one person's
browser or from a client's test, on loopback; it needs no TLS, no keep-alive, no
streaming and no routing beyond a dictionary. ``ThreadingHTTPServer`` keeps a slow
reader from blocking the others, and its daemon threads never hold the process up.

The site is anything with the shape of :class:`Site` (``statecharts.browse`` builds
one from the seed). Page bodies are drawn on first request and kept
(``simulator.scenario.wiki`` makes its draws safe from several threads).
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final, Protocol
from urllib.parse import quote, unquote, urlsplit

from simulator.scenario.wiki import Page

__all__ = ["Site", "WikiServer", "page_path"]

HOST: Final = "127.0.0.1"
ALLOWED_METHODS: Final = ("GET", "HEAD")
_POLL_INTERVAL: Final = 0.02
"""How often the serving loop checks for shutdown: bounds how long close() takes."""
_MAX_DRAINED_BODY: Final = 1 << 16
_PAGE_PATH: Final = re.compile(r"^/pages/(?P<slug>[^/]+)\.html$")
_CODE: Final = re.compile(r"`([^`]+)`")


class Site(Protocol):
    """What a wiki server serves: one version of one project's wiki."""

    @property
    def project(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def timestamp(self) -> str: ...

    @property
    def pages(self) -> Sequence[Page]: ...

    def body(self, page: Page) -> Sequence[str]:
        """The paragraphs of ``page``, plain text."""
        ...


def page_path(page: Page) -> str:
    """The path a page is served at."""
    return f"/pages/{quote(page.slug, safe='')}.html"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _document(title: str, main: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n</head>\n<body>\n{main}</body>\n</html>\n"
    )


def _paragraph(text: str) -> str:
    # Escape first, then mark `code` spans: the backticks survive escaping unchanged.
    return "<p>" + _CODE.sub(r"<code>\1</code>", _esc(text)) + "</p>\n"


class _Renderer:
    """The HTML of one site, drawn on demand and kept."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self._by_slug: dict[str, Page] = {}
        for page in site.pages:
            self._by_slug.setdefault(page.slug, page)
        self._index = self._render_index()
        self._rendered: dict[str, str] = {}

    def _version_line(self) -> str:
        site = self.site
        return (
            f'<p class="version">Version <code>{_esc(site.version)}</code>, '
            f"generated {_esc(site.timestamp)}</p>\n"
        )

    def _render_index(self) -> str:
        site = self.site
        items = "".join(
            f'<li><a href="{_esc(page_path(page))}">{_esc(page.title)}</a></li>\n'
            for page in site.pages
        )
        main = (
            f"<main>\n<h1>{_esc(site.project)}</h1>\n{self._version_line()}"
            f'<nav>\n<ol class="catalog">\n{items}</ol>\n</nav>\n</main>\n'
        )
        return _document(f"{site.project} wiki", main)

    def _render_page(self, page: Page) -> str:
        site = self.site
        paragraphs = tuple(site.body(page))
        main = (
            f'<nav><a href="/">{_esc(site.project)}</a> / {_esc(page.title)}</nav>\n'
            f"<main>\n<h1>{_esc(page.title)}</h1>\n{self._version_line()}"
            + "".join(map(_paragraph, paragraphs))
            + '<p><a href="/">Back to the catalog</a></p>\n</main>\n'
        )
        return _document(f"{page.title} - {site.project}", main)

    def render(self, path: str) -> str | None:
        """The HTML at ``path`` (no query), or None when there is nothing there."""
        if path in ("/", "/index.html"):
            return self._index
        match = _PAGE_PATH.match(path)
        if match is None:
            return None
        page = self._by_slug.get(match["slug"])
        if page is None:
            return None
        rendered = self._rendered.get(page.slug)
        if rendered is None:
            rendered = self._rendered.setdefault(page.slug, self._render_page(page))
        return rendered


_NOT_FOUND: Final = _document(
    "404 Not Found", '<main>\n<h1>Not found</h1>\n<p><a href="/">The catalog</a></p>\n</main>\n'
)
_NOT_ALLOWED: Final = _document(
    "405 Method Not Allowed",
    "<main>\n<h1>Method not allowed</h1>\n<p>This wiki answers GET and HEAD.</p>\n</main>\n",
)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def version_string(self) -> str:
        return "zread-sim"

    def parse_request(self) -> bool:
        # Refuse other methods here, before http.server's "501 Unsupported method".
        if not super().parse_request():
            return False
        if self.command in ALLOWED_METHODS:
            return True
        self._drain_body()
        self._reply(HTTPStatus.METHOD_NOT_ALLOWED, _NOT_ALLOWED, allow=", ".join(ALLOWED_METHODS))
        return False

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        text = self.server.renderer.render(path)
        if text is None:
            self._reply(HTTPStatus.NOT_FOUND, _NOT_FOUND)
        else:
            self._reply(HTTPStatus.OK, text)

    do_HEAD = do_GET

    def _drain_body(self) -> None:
        """Read a small request body so the client is not reset mid-send."""
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return
        if 0 < length <= _MAX_DRAINED_BODY:
            self.rfile.read(length)

    def _reply(self, status: HTTPStatus, text: str, *, allow: str = "") -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        if allow:
            self.send_header("Allow", allow)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Silenced: stdout is the protocol's, stderr is for the simulator's own lines."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, renderer: _Renderer) -> None:
        self.renderer = renderer
        super().__init__((HOST, 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """Silenced: a browser that hangs up mid-response is not worth a traceback."""


class WikiServer:
    """A running wiki server; :meth:`close` stops it (safe to call more than once).

    Raises :class:`OSError` when the socket cannot be bound.
    """

    def __init__(self, site: Site) -> None:
        self.site = site
        self._httpd = _Server(_Renderer(site))
        port = self._httpd.server_address[1]
        self.url = f"http://{HOST}:{port}/"
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL},
            name=f"wikiserver:{port}",
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
        """Stop serving and release the port; later calls do nothing."""
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
