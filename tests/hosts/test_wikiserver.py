"""Tests for simulator.hosts.wikiserver: a real server on 127.0.0.1, spoken to over HTTP."""

from __future__ import annotations

import html
import http.client
import re
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from simulator.hosts.wikiserver import WikiServer, page_path
from simulator.scenario.wiki import Page, catalog


@dataclass(frozen=True)
class FakeSite:
    """A hand-written site: titles and bodies chosen to exercise the HTML."""

    project: str
    version: str
    timestamp: str
    pages: tuple[Page, ...]

    def body(self, page: Page) -> Sequence[str]:
        return (f"First paragraph of {page.title}.", f"See `src/{page.slug}/` & <friends>.")


TRICKY = Page(3, 'Tags <b>&"quotes"</b>', "tags-b-quotes-b")
SITE = FakeSite(
    project="acme/<widget>",
    version="v-1",
    timestamp="2026-01-02T03:04:05Z",
    pages=(Page(1, "Overview", "overview"), Page(2, "Data Model", "data-model"), TRICKY),
)


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def request(url: str, method: str, path: str, body: bytes | None = None) -> Response:
    """One raw request: the path goes out exactly as given (no normalisation)."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return Response(resp.status, resp.headers, resp.read())
    finally:
        conn.close()


@pytest.fixture
def server() -> Iterator[WikiServer]:
    with WikiServer(SITE) as running:
        yield running


def test_binds_loopback_at_an_ephemeral_port(server: WikiServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", server.url)
    assert server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}/"


def test_index_lists_every_page_with_working_links(server: WikiServer) -> None:
    resp = request(server.url, "GET", "/")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
    assert int(resp.headers["Content-Length"]) == len(resp.body)
    assert "acme/&lt;widget&gt;" in resp.text
    assert "v-1" in resp.text
    assert "2026-01-02T03:04:05Z" in resp.text
    links = re.findall(r'<li><a href="([^"]+)">([^<]*)</a></li>', resp.text)
    assert [html.unescape(title) for _, title in links] == [p.title for p in SITE.pages]
    for href, _ in links:
        page = request(server.url, "GET", html.unescape(href))
        assert page.status == 200, href
        assert 'href="/"' in page.text


def test_index_html_and_query_string_serve_the_index(server: WikiServer) -> None:
    root = request(server.url, "GET", "/").body
    assert request(server.url, "GET", "/index.html").body == root
    assert request(server.url, "GET", "/?ref=client").body == root


def test_each_page_renders_title_paragraphs_and_a_link_back(server: WikiServer) -> None:
    page = SITE.pages[1]
    resp = request(server.url, "GET", page_path(page))
    assert resp.status == 200
    assert "<h1>Data Model</h1>" in resp.text
    assert "<title>Data Model - acme/&lt;widget&gt;</title>" in resp.text
    assert "<p>First paragraph of Data Model.</p>" in resp.text
    assert "<code>src/data-model/</code>" in resp.text
    assert '<a href="/">' in resp.text


def test_every_text_is_html_escaped(server: WikiServer) -> None:
    index = request(server.url, "GET", "/").text
    assert "Tags &lt;b&gt;&amp;&quot;quotes&quot;&lt;/b&gt;" in index
    assert "<b>" not in index
    resp = request(server.url, "GET", page_path(TRICKY))
    assert resp.status == 200
    assert "<h1>Tags &lt;b&gt;&amp;&quot;quotes&quot;&lt;/b&gt;</h1>" in resp.text
    assert "&amp; &lt;friends&gt;." in resp.text
    assert "<friends>" not in resp.text
    assert "<b>" not in resp.text


def test_utf8_body_length_counts_bytes() -> None:
    site = FakeSite("ünïcode/wiki", "v", "t", (Page(1, "Überblick ✓", "uberblick"),))
    with WikiServer(site) as running:
        resp = request(running.url, "GET", "/pages/uberblick.html")
        assert resp.status == 200
        assert int(resp.headers["Content-Length"]) == len(resp.body)
        assert "Überblick ✓" in resp.text


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/pages/unknown.html",
        "/pages/overview",
        "/overview",
        "/pages/overview.html/extra",
        "/favicon.ico",
    ],
)
def test_unknown_paths_are_404(server: WikiServer, path: str) -> None:
    resp = request(server.url, "GET", path)
    assert resp.status == 404
    assert int(resp.headers["Content-Length"]) == len(resp.body)
    assert resp.headers["Content-Type"] == "text/html; charset=utf-8"


@pytest.mark.parametrize(
    "path",
    [
        "/../pyproject.toml",
        "/pyproject.toml",
        "/etc/passwd",
        "//etc/passwd",
        "/pages/../../pyproject.toml",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/simulator/wikiserver.py",
    ],
)
def test_serves_nothing_from_disk(server: WikiServer, path: str) -> None:
    resp = request(server.url, "GET", path)
    assert resp.status == 404
    assert b"[project]" not in resp.body
    assert b"root:" not in resp.body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_other_methods_are_405_with_allow(server: WikiServer, method: str) -> None:
    resp = request(server.url, method, "/", body=b"x=1")
    assert resp.status == 405
    assert resp.headers["Allow"] == "GET, HEAD"
    assert int(resp.headers["Content-Length"]) == len(resp.body)


def test_head_sends_headers_only(server: WikiServer) -> None:
    got = request(server.url, "GET", page_path(SITE.pages[0]))
    head = request(server.url, "HEAD", page_path(SITE.pages[0]))
    assert head.status == 200
    assert head.body == b""
    assert head.headers["Content-Length"] == got.headers["Content-Length"] != "0"
    missing = request(server.url, "HEAD", "/missing")
    assert missing.status == 404
    assert missing.body == b""


def test_close_refuses_connections_and_is_idempotent() -> None:
    running = WikiServer(SITE)
    assert request(running.url, "GET", "/").status == 200
    running.close()
    assert running.closed
    running.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", running.port), timeout=2).close()


def test_two_servers_listen_apart_and_serve_their_own_site() -> None:
    other = FakeSite("other/project", "v-9", "t", (Page(1, "Elsewhere", "elsewhere"),))
    with WikiServer(SITE) as first, WikiServer(other) as second:
        assert first.port != second.port
        assert "Elsewhere" in request(second.url, "GET", "/").text
        assert "Elsewhere" not in request(first.url, "GET", "/").text


def test_serves_a_drawn_catalog_with_drawn_bodies() -> None:
    from statecharts.browse import WikiSite

    pages = catalog(7, "acme/gadget", 5)
    site = WikiSite("acme/gadget", "v", "t", pages, seed=7, version_index=0)
    with WikiServer(site) as running:
        index = request(running.url, "GET", "/").text
        for page in pages:
            assert html.escape(page.title) in index
            text = request(running.url, "GET", page_path(page)).text
            first = site.body(page)[0]
            assert html.escape(first).split("`")[0] in text
