"""Tests for simulator.hosts.wikiserver: a real server on a loopback address, spoken to
over HTTP.

Every server here listens on an ephemeral port (``port=0``) unless the test is about
the port search, which holds real sockets on a base port found free for the test.
"""

from __future__ import annotations

import contextlib
import errno
import html
import http.client
import json
import re
import select
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest

from simulator.core.effects import DEFAULT_PORT
from simulator.errors import ConfigurationError
from simulator.formats import wiki as wf
from simulator.hosts import httprequest, httpserver, wikiserver
from simulator.hosts.disksite import DiskSite
from simulator.hosts.wikihtml import RENDERED_MAX, page_path, render_markdown
from simulator.hosts.wikiserver import PORT_TRIES, ListenError, Site, SitePage, WikiServer, loopback
from simulator.scenario import wiki
from simulator.scenario.httpfaults import HttpFault, HttpFaultPlan
from tests.e2e.helpers import held_ports

OVERVIEW = """\
The widget turns <input> into output & keeps it.

## Parts

- the [Data Model](2-data-model), then
- the [tricky one](./3-tags-b-quotes-b.md#top)

```python
print("<hi>")
```

```mermaid
flowchart LR
    A["x < y"] --> B
```

Sources: [src/app.py](src/app.py#L1-L9), [docs](https://example.test/docs)
"""


@dataclass(frozen=True)
class Entry:
    """An index entry written by hand (a SitePage)."""

    slug: str
    title: str
    section: str = ""
    group: str = ""
    level: str = ""


@dataclass
class FakeSite:
    """A hand-written site that records which slugs it was asked for."""

    project: str = "acme/<widget>"
    version: str = "v-1"
    pages: tuple[Entry, ...] = (
        Entry("1-overview", "Overview", "Getting Started", "", "Beginner"),
        Entry("2-data-model", "Data Model", "Core", "Storage", "Intermediate"),
        Entry("3-tags-b-quotes-b", 'Tags <b>&"quotes"</b>', "Core", "Storage", "Advanced"),
        Entry("4-missing", "Listed, no file", "Core", "", "Advanced"),
    )
    bodies: dict[str, str] = field(
        default_factory=lambda: {
            "1-overview": OVERVIEW,
            "2-data-model": "Rows and columns.\n",
            "3-tags-b-quotes-b": "Back to [the start](1-overview).\n",
        }
    )
    document: bytes = b'{\n  "id": "v-1",\n  "pages": []\n}'
    asked: list[str] = field(default_factory=list)

    def markdown(self, slug: str) -> str | None:
        self.asked.append(slug)
        return self.bodies.get(slug)

    def wiki_json(self) -> bytes:
        return self.document


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


def get(server: WikiServer, path: str) -> Response:
    return request(server.url, "GET", path)


@pytest.fixture
def site() -> FakeSite:
    return FakeSite()


@pytest.fixture
def server(site: FakeSite) -> Iterator[WikiServer]:
    with WikiServer(site, port=0) as running:
        yield running


def refused(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


# -- the interface ---------------------------------------------------------------------


def test_a_hand_written_site_and_the_seeds_site_are_sites(site: FakeSite) -> None:
    from statecharts.browse import WikiSite

    sites: list[Site] = [site]
    drawn = WikiSite(
        project="p",
        version="v",
        timestamp="2026-01-01T00:00:00Z",
        catalog=wiki.catalog(0, "p", 3),
        language="en",
        seed=0,
        version_index=0,
    )
    sites.append(drawn)
    for one in sites:
        assert isinstance(one, Site)
        assert isinstance(one.project, str) and isinstance(one.version, str)
        assert all(isinstance(page, SitePage) for page in one.pages)
        assert isinstance(one.wiki_json(), bytes)
        assert isinstance(one.markdown(one.pages[0].slug), str)
        assert one.markdown("no-such-page") is None


# -- where it listens ------------------------------------------------------------------


def test_a_listen_error_is_the_users_setup() -> None:
    assert issubclass(ListenError, ConfigurationError)
    err = ListenError("listen tcp 127.0.0.1:9681: bind: address already in use", 98)
    assert str(err) == "listen tcp 127.0.0.1:9681: bind: address already in use"
    assert err.errno == 98


def test_binds_loopback_at_an_ephemeral_port(server: WikiServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", server.url)
    assert server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}"
    assert server.host == "127.0.0.1"


def test_the_default_port_is_zreads() -> None:
    assert DEFAULT_PORT == 9681
    assert WikiServer.__init__.__defaults__ == ("127.0.0.1", 9681)
    assert PORT_TRIES == 100


@pytest.mark.parametrize(
    ("host", "family", "address"),
    [
        ("127.0.0.1", socket.AF_INET, "127.0.0.1"),
        ("127.8.9.10", socket.AF_INET, "127.8.9.10"),
        ("localhost", socket.AF_INET, "127.0.0.1"),
        ("LocalHost", socket.AF_INET, "127.0.0.1"),
        ("::1", socket.AF_INET6, "::1"),
        ("[::1]", socket.AF_INET6, "::1"),
    ],
)
def test_loopback_hosts(host: str, family: socket.AddressFamily, address: str) -> None:
    assert loopback(host) == (family, address)


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "192.168.1.10", "8.8.8.8", "example.com", "", "127.0.0.1.nip.io"]
)
def test_a_host_that_is_not_loopback_is_refused_before_any_socket(
    site: FakeSite, host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        loopback(host)

    def no_socket(*args: object, **kwargs: object) -> None:
        raise AssertionError("a socket was made")

    monkeypatch.setattr(wikiserver, "_bind", no_socket)
    with pytest.raises(ListenError) as refused_host:
        WikiServer(site, host=host, port=0)
    assert str(refused_host.value).startswith("listen tcp ")
    assert str(refused_host.value).endswith(":0: refusing a non-loopback address")


def test_localhost_listens_on_127_0_0_1_and_says_localhost(site: FakeSite) -> None:
    with WikiServer(site, host="localhost", port=0) as running:
        assert running.url == f"http://localhost:{running.port}"
        assert get(running, "/").status == 200
        assert request(f"http://127.0.0.1:{running.port}", "GET", "/").status == 200


def test_another_loopback_address(site: FakeSite) -> None:
    try:
        running = WikiServer(site, host="127.0.0.2", port=0)
    except ListenError as err:  # only 127.0.0.1 on this machine (macOS)
        pytest.skip(str(err))
    with running:
        assert running.url == f"http://127.0.0.2:{running.port}"
        assert get(running, "/").status == 200


def test_ipv6_loopback_in_brackets(site: FakeSite) -> None:
    try:
        running = WikiServer(site, host="::1", port=0)
    except ListenError as err:
        pytest.skip(f"no IPv6 loopback here: {err}")
    with running:
        assert running.url == f"http://[::1]:{running.port}"
        assert get(running, "/").status == 200


def test_a_busy_port_moves_to_the_next_free_one_upward(site: FakeSite) -> None:
    base, held = held_ports(3)
    try:
        with WikiServer(site, port=base) as running:
            assert base + 3 <= running.port < base + PORT_TRIES
            assert running.url == f"http://127.0.0.1:{running.port}"
            assert get(running, "/").status == 200
    finally:
        for sock in held:
            sock.close()


def test_servers_started_at_once_from_one_port_each_get_one(site: FakeSite) -> None:
    # Browses starting at the same moment: with SO_REUSEADDR two sockets may bind one
    # port while neither listens; the one that listens second must move on, not fail.
    base, held = held_ports(1)
    held[0].close()
    barrier = threading.Barrier(12)
    started: list[WikiServer] = []
    failed: list[BaseException] = []

    def start() -> None:
        barrier.wait()
        try:
            started.append(WikiServer(site, port=base))
        except BaseException as error:
            failed.append(error)

    threads = [threading.Thread(target=start) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert failed == []
        assert len({server.port for server in started}) == 12
        assert all(get(server, "/").status == 200 for server in started)
    finally:
        for server in started:
            server.close()


def test_a_free_port_is_taken_as_asked(site: FakeSite) -> None:
    base, held = held_ports(1)
    held[0].close()
    with WikiServer(site, port=base) as running:
        assert running.port == base


def test_a_hundred_busy_ports_are_an_error(site: FakeSite) -> None:
    base, held = held_ports(PORT_TRIES)
    try:
        with pytest.raises(ListenError) as busy:
            WikiServer(site, port=base)
        last = base + PORT_TRIES - 1
        assert str(busy.value) == (
            f"listen tcp 127.0.0.1:{last}: bind: address already in use (tried ports {base}-{last})"
        )
        assert busy.value.errno == errno.EADDRINUSE
    finally:
        for sock in held:
            sock.close()


def test_the_port_zero_is_never_searched(site: FakeSite) -> None:
    with WikiServer(site, port=0) as first, WikiServer(site, port=0) as second:
        assert first.port != second.port


def test_another_bind_failure_is_not_searched_past(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[tuple[str, int]] = []

    def denied(family: object, address: tuple[str, int]) -> None:
        tried.append(address)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(wikiserver, "_bind", denied)
    with pytest.raises(ListenError) as failed:
        WikiServer(site, port=80)
    assert str(failed.value) == "listen tcp 127.0.0.1:80: bind: permission denied"
    assert tried == [("127.0.0.1", 80)]


def test_the_search_stops_at_the_last_port(site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[int] = []

    def busy(family: object, address: tuple[str, int]) -> None:
        tried.append(address[1])
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(wikiserver, "_bind", busy)
    with pytest.raises(ListenError, match=r"127\.0\.0\.1:65535: .*\(tried ports 65530-65535\)"):
        WikiServer(site, port=65530)
    assert tried == list(range(65530, 65536))


# -- the routes ------------------------------------------------------------------------


def test_index_lists_every_page_in_order_with_working_links(
    server: WikiServer, site: FakeSite
) -> None:
    resp = get(server, "/")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
    assert int(resp.headers["Content-Length"]) == len(resp.body)
    assert "<h1>acme/&lt;widget&gt;</h1>" in resp.text
    assert "<code>v-1</code>" in resp.text
    links = re.findall(r'<li><a href="([^"]+)">([^<]*)</a>', resp.text)
    assert [html.unescape(title) for _, title in links] == [p.title for p in site.pages]
    assert [href for href, _ in links] == [f"/{p.slug}" for p in site.pages]
    for href, _ in links[:3]:
        page = get(server, html.unescape(href))
        assert page.status == 200, href
        assert 'href="/"' in page.text
    assert site.asked == ["1-overview", "2-data-model", "3-tags-b-quotes-b"]


def test_index_heads_each_section_and_group_where_it_changes(server: WikiServer) -> None:
    text = get(server, "/").text
    headings = re.findall(r"<h([23])>([^<]*)</h\1>", text)
    assert headings == [("2", "Getting Started"), ("2", "Core"), ("3", "Storage")]
    assert text.count("<section>") == text.count("</section>") == 2
    assert text.count("<ul>") == text.count("</ul>") == 3
    assert '<span class="level">Intermediate</span>' in text


def test_index_keeps_the_order_when_a_section_comes_back() -> None:
    pages = (Entry("1-a", "A", "One"), Entry("2-b", "B", "Two"), Entry("3-c", "C", "One"))
    with WikiServer(FakeSite(pages=pages), port=0) as running:
        text = get(running, "/").text
    assert re.findall(r"<h2>([^<]*)</h2>", text) == ["One", "Two", "One"]
    assert re.findall(r'href="/([^"]+)"', text) == ["1-a", "2-b", "3-c"]


def test_an_empty_wiki_has_an_index_page() -> None:
    with WikiServer(FakeSite(pages=()), port=0) as running:
        resp = get(running, "/")
    assert resp.status == 200
    assert "This wiki has no pages." in resp.text


def test_a_page_is_its_markdown_rendered(server: WikiServer) -> None:
    resp = get(server, "/1-overview")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
    text = resp.text
    assert "<title>Overview - acme/&lt;widget&gt;</title>" in text
    assert "<h1>Overview</h1>" in text
    assert '<p class="about">Getting Started · Beginner</p>' in text
    assert "<p>The widget turns &lt;input&gt; into output &amp; keeps it.</p>" in text
    assert "<h2>Parts</h2>" in text
    assert '<ul>\n<li>the <a href="/2-data-model">Data Model</a>, then</li>' in text
    assert '<a href="/3-tags-b-quotes-b#top">tricky one</a>' in text
    assert '<pre><code class="language-python">print(&quot;&lt;hi&gt;&quot;)\n</code></pre>' in text
    assert '<pre class="mermaid">flowchart LR\n    A[&quot;x &lt; y&quot;] --&gt; B\n</pre>' in text
    assert '<a class="source" title="src/app.py#L1-L9">src/app.py</a>' in text
    assert '<a href="https://example.test/docs">docs</a>' in text
    assert "<input>" not in text


def test_page_titles_and_sections_are_escaped(server: WikiServer) -> None:
    index = get(server, "/").text
    assert "Tags &lt;b&gt;&amp;&quot;quotes&quot;&lt;/b&gt;" in index
    assert "<b>" not in index
    resp = get(server, "/3-tags-b-quotes-b")
    assert resp.status == 200
    assert "<h1>Tags &lt;b&gt;&amp;&quot;quotes&quot;&lt;/b&gt;</h1>" in resp.text
    assert '<a href="/1-overview">the start</a>' in resp.text
    assert "<b>" not in resp.text


def test_api_wiki_is_the_wiki_json_bytes(server: WikiServer, site: FakeSite) -> None:
    resp = get(server, "/api/wiki")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/json"
    assert resp.body == site.document
    assert int(resp.headers["Content-Length"]) == len(site.document)


def test_api_pages_is_the_raw_markdown(server: WikiServer) -> None:
    resp = get(server, "/api/pages/1-overview")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert resp.text == OVERVIEW


@pytest.mark.parametrize(
    "path",
    [
        "/api/pages/no-such-page",
        "/api/pages/4-missing",
        "/api/pages/",
        "/api/pages/1-overview/extra",
        "/api/wiki/extra",
        "/api/",
        "/api/nope",
    ],
)
def test_api_unknowns_are_404_json(server: WikiServer, path: str) -> None:
    resp = get(server, path)
    assert resp.status == 404
    assert resp.headers["Content-Type"] == "application/json"
    assert json.loads(resp.body) == {"error": "not found"}


def test_utf8_bodies_count_bytes() -> None:
    site = FakeSite(
        project="ünïcode/wiki",
        pages=(Entry("1-xiang-mu-gai-lan", "项目概览 ✓", "入门指南", "", "Beginner"),),
        bodies={"1-xiang-mu-gai-lan": "概览。\n"},
    )
    with WikiServer(site, port=0) as running:
        for path in ("/", "/1-xiang-mu-gai-lan", "/api/pages/1-xiang-mu-gai-lan"):
            resp = get(running, path)
            assert resp.status == 200
            assert int(resp.headers["Content-Length"]) == len(resp.body)
            assert "项目概览 ✓" in resp.text or resp.text == "概览。\n"


def test_query_strings_and_percent_escapes(server: WikiServer) -> None:
    root = get(server, "/").body
    assert get(server, "/?ref=client").body == root
    page = get(server, "/1-overview").body
    assert get(server, "/1-overview?x=1").body == page
    assert get(server, "/%31-overview").body == page


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/index.html",
        "/pages/1-overview.html",
        "/1-overview/",
        "/1-overview/extra",
        "/1-overview.md",
        "/4-missing",
        "/api",
        "/favicon.ico",
    ],
)
def test_unknown_paths_are_404(server: WikiServer, path: str) -> None:
    resp = get(server, path)
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
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..%2f..%2fetc%2fpasswd",
        "/api/pages/..%2f..%2fpyproject.toml",
        "/api/pages/../../pyproject.toml",
        "/simulator/hosts/wikiserver.py",
    ],
)
def test_serves_nothing_from_disk(server: WikiServer, site: FakeSite, path: str) -> None:
    resp = get(server, path)
    assert resp.status == 404
    assert b"[project]" not in resp.body
    assert b"root:" not in resp.body
    assert site.asked == []  # the site never saw a slug outside its index


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_other_methods_are_405_with_allow(server: WikiServer, method: str) -> None:
    for path in ("/", "/api/wiki"):
        resp = request(server.url, method, path, body=b"x=1")
        assert resp.status == 405
        assert resp.headers["Allow"] == "GET, HEAD"
        assert int(resp.headers["Content-Length"]) == len(resp.body)


@pytest.mark.parametrize("path", ["/", "/1-overview", "/api/wiki", "/api/pages/1-overview"])
def test_head_sends_headers_only(server: WikiServer, path: str) -> None:
    got = get(server, path)
    head = request(server.url, "HEAD", path)
    assert head.status == 200
    assert head.body == b""
    assert head.headers["Content-Length"] == got.headers["Content-Length"] != "0"
    assert head.headers["Content-Type"] == got.headers["Content-Type"]
    missing = request(server.url, "HEAD", "/missing")
    assert missing.status == 404
    assert missing.body == b""


# -- bounds ----------------------------------------------------------------------------
#
# Raw sockets, each with a client timeout well under the default deadline (10 s): an
# answer that waited for the deadline would fail the test as a TimeoutError.


def connect(server: WikiServer, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset ends it too)."""
    chunks: list[bytes] = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    sock.close()
    return b"".join(chunks)


def exchange(server: WikiServer, data: bytes) -> tuple[int, bytes]:
    """Send ``data`` raw; the answer's status and body (the connection then closes)."""
    sock = connect(server)
    sock.sendall(data)
    raw = read_all(sock)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert re.match(rb"HTTP/1\.[01] ", head), raw[:80]
    return int(head.split(b" ", 2)[1]), body


def test_the_bounds_defaults() -> None:
    assert wikiserver.REQUEST_TIMEOUT == 10.0
    assert WikiServer.__init__.__kwdefaults__ == {
        "request_timeout": 10.0,
        "faults": None,
        "journal": None,
    }
    assert httpserver.LISTEN_BACKLOG == 512
    assert httpserver.MAX_CONNECTIONS == 1024
    assert httprequest.MAX_BODY == 8192
    assert httprequest.MAX_HEAD == 32 << 10
    assert httprequest.MAX_HEADERS == 100


@pytest.mark.parametrize(("version", "expected"), [("1.0", b"HTTP/1.0 "), ("1.1", b"HTTP/1.1 ")])
def test_the_answer_speaks_the_requests_version(
    server: WikiServer, version: str, expected: bytes
) -> None:
    sock = connect(server)
    sock.sendall(f"GET / HTTP/{version}\r\nHost: 127.0.0.1\r\n\r\n".encode())
    raw = read_all(sock)
    assert raw.startswith(expected + b"200 OK\r\n"), raw[:80]
    head = raw.partition(b"\r\n\r\n")[0].decode().lower()
    assert "\r\nconnection: close" in head and "\r\ncontent-length: " in head


def test_an_http_1_1_request_without_host_is_400(server: WikiServer) -> None:
    # RFC 9112 section 3.2, and what Go's net/http answers too.
    status, body = exchange(server, b"GET / HTTP/1.1\r\n\r\n")
    assert status == 400 and b"names its server in one Host" in body
    status, _ = exchange(server, b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n")
    assert status == 400


@pytest.mark.parametrize(
    ("request_line", "headers", "expected"),
    [
        ("GET /" + "a" * (32 << 10) + " HTTP/1.1", "", 414),
        ("GET / HTTP/1.1", "X-Big: " + "a" * (32 << 10) + "\r\n", 431),
        ("GET / HTTP/1.1", "".join(f"X-{n}: v\r\n" for n in range(100)), 431),
        ("GET / HTTP/1.1", "".join(f"X-{n}: v\r\n" for n in range(99)), 200),
        ("GET / HTTP/1.1", "Transfer-Encoding: gzip\r\n", 501),
        ("GET /\xe9 HTTP/1.1", "", 400),
    ],
)
def test_the_head_is_bounded(
    server: WikiServer, request_line: str, headers: str, expected: int
) -> None:
    data = f"{request_line}\r\nHost: localhost\r\n{headers}\r\n".encode("latin-1")
    status, _ = exchange(server, data)
    assert status == expected


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_a_request_timeout_must_be_positive(site: FakeSite, timeout: float) -> None:
    with pytest.raises(ValueError, match="request_timeout must be positive"):
        WikiServer(site, port=0, request_timeout=timeout)


def test_two_hundred_gets_at_once_all_succeed(server: WikiServer) -> None:
    count = 200
    barrier = threading.Barrier(count)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def fetch() -> None:
        barrier.wait()
        try:  # a generous client timeout: the old backlog of 5 lost some to 30 s
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
            try:
                conn.request("GET", "/")
                resp = conn.getresponse()
                resp.read()
                statuses.append(resp.status)
            finally:
                conn.close()
        except BaseException as err:  # reported below, not lost in a thread
            errors.append(err)

    threads = [threading.Thread(target=fetch) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert statuses == [200] * count


def test_a_silent_connection_is_dropped_at_the_deadline(site: FakeSite) -> None:
    with WikiServer(site, port=0, request_timeout=0.2) as running:
        sock = connect(running)
        sock.sendall(b"GET / HT")  # and nothing more
        assert read_all(sock) == b""  # closed unanswered
        assert get(running, "/").status == 200


def test_a_trickled_request_is_dropped_at_the_deadline(site: FakeSite) -> None:
    """Slowloris: a header byte every 20 ms is never idle for long, and still ends."""
    with WikiServer(site, port=0, request_timeout=0.5) as running:
        sock = connect(running)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        started = time.monotonic()
        sent = 0
        ended = False
        while not ended and time.monotonic() - started < 5:
            if select.select([sock], [], [], 0.02)[0]:
                assert read_all(sock) == b""  # closed unanswered
                ended = True
                continue
            try:
                sock.sendall(b"a")
                sent += 1
            except (BrokenPipeError, ConnectionResetError):
                ended = True
        elapsed = time.monotonic() - started
        sock.close()
        assert ended, f"still open after {sent} bytes trickled over {elapsed:.1f} s"
        assert elapsed > 0.3  # it was the deadline, not the request
        assert get(running, "/").status == 200  # and its slot is free again


class Trickle:
    """``count`` peers, each sending a request a byte every ``interval`` seconds and
    never ending its headers, from one thread; records when the server ends each one
    and anything it sends them."""

    PREFIX = b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: "

    def __init__(self, port: int, count: int, interval: float = 0.1) -> None:
        self.started = time.monotonic()
        self.socks = [
            socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)
        ]
        self.interval = interval
        self.ended: dict[int, float] = {}
        self.received: dict[int, bytes] = {}
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        for index, sock in enumerate(self.socks):
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, index)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            byte = self.PREFIX[sent : sent + 1] or b"a"
            sent += 1
            for index, sock in enumerate(self.socks):
                if index not in self.ended:
                    with contextlib.suppress(OSError):
                        sock.send(byte)
            until = time.monotonic() + self.interval
            while (left := until - time.monotonic()) > 0:
                for key, _ in self._selector.select(left):
                    self._read(key.fileobj, key.data)

    def _read(self, sock: Any, index: int) -> None:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.received[index] = self.received.get(index, b"") + data
        else:
            self.ended[index] = time.monotonic()
            self._selector.unregister(sock)

    def wait_all_ended(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.ended) < len(self.socks) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.socks:
            sock.close()
        self._selector.close()


def test_two_hundred_trickling_peers_do_not_hold_up_a_get(site: FakeSite) -> None:
    """Slowloris at scale: while 200 connections trickle their requests a byte every
    100 ms, far from their deadline, another client's GET is answered (its 10 s client
    timeout is far beyond the wait: the figure is benchmarks/browse_concurrency.py
    --trickle's); close() then ends them all at once."""
    running = WikiServer(site, port=0, request_timeout=60)
    peers = Trickle(running.port, 200)
    try:
        time.sleep(0.5)  # each has sent a few bytes, and is waiting for more
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
        conn.request("GET", "/")
        resp = conn.getresponse()
        assert resp.status == 200 and b"<h1>" in resp.read()
        conn.close()
        assert peers.ended == {}
        running.close()
        peers.wait_all_ended(10)
        assert len(peers.ended) == 200 and peers.received == {}
    finally:
        running.close()
        peers.close()


def test_trickling_peers_are_dropped_at_their_deadline(site: FakeSite) -> None:
    timeout = 1.0  # ten trickled bytes each before it
    with WikiServer(site, port=0, request_timeout=timeout) as running:
        peers = Trickle(running.port, 200)
        try:
            peers.wait_all_ended(timeout + 20)
            assert len(peers.ended) == 200  # every one of them, unanswered
            assert peers.received == {}
            assert min(peers.ended.values()) - peers.started >= timeout * 0.9  # not before
            assert get(running, "/").status == 200
        finally:
            peers.close()


@pytest.mark.parametrize("method", ["POST", "GET", "PUT"])
@pytest.mark.parametrize("length", ["60000", "8193", "9" * 20])
def test_a_body_over_the_limit_is_413_at_once(server: WikiServer, method: str, length: str) -> None:
    # Three bytes of the body sent, the rest never: answered without waiting for it.
    request = f"{method} / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\nabc"
    status, body = exchange(server, request.encode())
    assert status == 413
    assert b"<h1>Content too large</h1>" in body
    assert get(server, "/").status == 200


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_body_that_never_comes_is_closed_at_the_deadline(site: FakeSite, method: str) -> None:
    with WikiServer(site, port=0, request_timeout=0.3) as running:
        sock = connect(running)
        sock.sendall(
            f"{method} / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nabc".encode()
        )
        assert read_all(sock) == b""  # within the client's 5 s, not held
        assert get(running, "/").status == 200


def test_a_small_body_is_read_and_dropped(server: WikiServer) -> None:
    body = b"x" * httprequest.MAX_BODY
    head = f"Host: localhost\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    status, page = exchange(server, b"GET / HTTP/1.1\r\n" + head + body)
    assert status == 200
    assert page == get(server, "/").body
    status, _ = exchange(server, b"POST /api/wiki HTTP/1.1\r\n" + head + body)
    assert status == 405


@pytest.mark.parametrize(
    "header",
    [
        "Content-Length: abc",
        "Content-Length: -1",
        "Content-Length: +3",
        "Content-Length: 1.5",
        "Content-Length: 0x10",
        "Content-Length: ",
        "Content-Length: \u0663",
        "Content-Length: 3, 4",
        "Content-Length: 3\r\nContent-Length: 4",
        "Content-Length: 3\r\nContent-Length: 003",  # the same number, not the same value
        "Content-Length: " + "9" * 21,  # more digits than h11 reads
    ],
)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_content_length_that_is_not_one_number_is_400(
    server: WikiServer, header: str, method: str
) -> None:
    request = f"{method} / HTTP/1.1\r\nHost: localhost\r\n{header}\r\n\r\nabc"
    status, body = exchange(server, request.encode("utf-8"))
    assert status == 400
    assert b"Content-Length is not a length." in body


def test_a_head_with_a_bad_length_is_400_without_a_body(server: WikiServer) -> None:
    status, body = exchange(server, b"HEAD / HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    assert status == 400
    assert body == b""


@pytest.mark.parametrize(
    "header", ["Content-Length: 3, 3", "Content-Length: 3\r\nContent-Length: 3"]
)
def test_repeated_lengths_that_agree_are_one(server: WikiServer, header: str) -> None:
    request = f"GET / HTTP/1.1\r\nHost: localhost\r\n{header}\r\n\r\nabc"
    status, _ = exchange(server, request.encode())
    assert status == 200


@pytest.mark.parametrize(
    ("method", "header", "expected"),
    [
        ("POST", "Expect: 100-continue\r\nContent-Length: 100", 405),
        ("GET", "Expect: 100-continue\r\nContent-Length: 100", 200),
        ("POST", "Transfer-Encoding: chunked", 405),
        ("GET", "Transfer-Encoding: chunked\r\nContent-Length: 100", 200),
    ],
)
def test_a_body_not_sent_unasked_is_not_waited_for(
    server: WikiServer, method: str, header: str, expected: int
) -> None:
    request = f"{method} / HTTP/1.1\r\nHost: localhost\r\n{header}\r\n\r\n"
    status, _ = exchange(server, request.encode())
    assert status == expected


def test_a_client_that_does_not_read_the_answer_is_dropped(site: FakeSite) -> None:
    site.document = b"x" * (16 << 20)  # more than the socket buffers hold
    with WikiServer(site, port=0, request_timeout=0.2) as running:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", running.port))
        sock.sendall(b"GET /api/wiki HTTP/1.0\r\n\r\n")
        time.sleep(0.6)  # reading nothing, past the write's bound
        received = read_all(sock)
        assert received.startswith(b"HTTP/1.0 200 ")
        assert len(received) < len(site.document)
        assert get(running, "/").status == 200


def test_connections_beyond_the_limit_wait_for_a_slot(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(httpserver, "MAX_CONNECTIONS", 2)
    with WikiServer(site, port=0, request_timeout=0.3) as running:
        silent = [connect(running) for _ in range(2)]
        # Accepted in order: these two hold the slots; the next ones wait in the
        # backlog until the deadline frees a slot.
        waiting = [connect(running) for _ in range(3)]
        for sock in waiting:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        for sock in waiting:
            raw = read_all(sock)
            assert raw.startswith(b"HTTP/1.0 200 "), raw[:80]
        for sock in silent:
            assert read_all(sock) == b""


def test_requests_at_once_each_get_their_page() -> None:
    from statecharts.browse import WikiSite

    drawn = WikiSite(
        project="acme/gadget",
        version="v",
        timestamp="2026-01-01T00:00:00Z",
        catalog=wiki.catalog(7, "acme/gadget", 12),
        language="en",
        seed=7,
        version_index=1,
    )
    with WikiServer(drawn, port=0) as running:
        expected = {page.slug: get(running, page_path(page.slug)).body for page in drawn.pages}
        results: dict[str, bytes] = {}

        def fetch(slug: str) -> None:
            results[slug] = get(running, page_path(slug)).body

        threads = [threading.Thread(target=fetch, args=(slug,)) for slug in expected]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert results == expected


# -- lifetime --------------------------------------------------------------------------


def test_close_refuses_connections_and_is_idempotent(site: FakeSite) -> None:
    running = WikiServer(site, port=0)
    assert get(running, "/").status == 200
    running.close()
    assert running.closed
    running.close()
    assert refused(running.port)


def test_stalled_connections_do_not_hold_close(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(httpserver, "MAX_CONNECTIONS", 2)
    running = WikiServer(site, port=0)  # the default deadline, 10 s
    try:
        stalled = [connect(running) for _ in range(4)]
        for sock in stalled:
            sock.sendall(b"GET / HT")
        # Two connections wait for their requests; the other two wait in the backlog.
        deadline = time.monotonic() + 5
        while running.open_connections < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        closer = threading.Thread(target=running.close)
        closer.start()
        closer.join(3)
        assert not closer.is_alive(), "close() waited for stalled connections"
        assert refused(running.port)
        for sock in stalled:  # each ended by the close, long before its deadline
            assert read_all(sock) == b""
    finally:
        running.close()


def test_two_servers_listen_apart_and_serve_their_own_site(site: FakeSite) -> None:
    other = FakeSite(project="other/project", pages=(Entry("1-elsewhere", "Elsewhere"),))
    with WikiServer(site, port=0) as first, WikiServer(other, port=0) as second:
        assert first.port != second.port
        assert "Elsewhere" in get(second, "/").text
        assert "Elsewhere" not in get(first, "/").text


def test_serves_the_seeds_site() -> None:
    from statecharts.browse import WikiSite

    catalog = wiki.catalog(7, "acme/gadget", 5)
    drawn = WikiSite(
        project="acme/gadget",
        version="2026-01-01-000000",
        timestamp="2026-01-01T00:00:00Z",
        catalog=catalog,
        language="en",
        seed=7,
        version_index=0,
    )
    with WikiServer(drawn, port=0) as running:
        index = get(running, "/").text
        assert "acme/gadget" in index
        for page in catalog:
            assert f'<a href="/{page.slug}">{html.escape(page.title)}</a>' in index
            text = get(running, page_path(page.slug)).text
            assert f"<h1>{html.escape(page.title)}</h1>" in text
            assert get(running, f"/api/pages/{page.slug}").text == drawn.markdown(page.slug)
        assert get(running, "/api/wiki").body == drawn.wiki_json()


def test_markdown_it_is_imported_only_when_a_page_is_served() -> None:
    code = (
        "import sys\n"
        "from simulator.hosts.wikiserver import WikiServer\n"
        "from simulator.scenario.wiki import Page\n"
        "class S:\n"
        "    project = 'p'; version = 'v'; pages = (Page(1, 'A', '1-a'),)\n"
        "    def markdown(self, slug): return 'text'\n"
        "    def wiki_json(self): return b'{}'\n"
        "import http.client\n"
        "def get(port, path):\n"
        "    c = http.client.HTTPConnection('127.0.0.1', port, timeout=5)\n"
        "    c.request('GET', path); c.getresponse().read(); c.close()\n"
        "with WikiServer(S(), port=0) as s:\n"
        "    get(s.port, '/'); get(s.port, '/api/wiki'); get(s.port, '/api/pages/1-a')\n"
        "    print('markdown_it' in sys.modules)\n"
        "    get(s.port, '/1-a')\n"
        "    print('markdown_it' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.split() == ["False", "True"]


def test_asyncio_and_h11_are_imported_only_when_a_server_starts() -> None:
    code = (
        "import sys\n"
        "from simulator.hosts.wikiserver import WikiServer\n"
        "print(sorted({'asyncio', 'h11'} & set(sys.modules)))\n"
        "class S:\n"
        "    project = 'p'; version = 'v'; pages = ()\n"
        "    def markdown(self, slug): return None\n"
        "    def wiki_json(self): return b'{}'\n"
        "with WikiServer(S(), port=0):\n"
        "    print(sorted({'asyncio', 'h11'} & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.splitlines() == ["[]", "['asyncio', 'h11']"]
    assert out.stderr == ""


# -- pages slow to render ------------------------------------------------------------------

SLOW = "[" * (64 << 10)
"""Markdown markdown-it takes long over (~1-2 s here), well below the render bound."""


def disk_site(root: Path, pages: dict[str, str]) -> DiskSite:
    """A real project at ``root`` whose wiki has one version of ``pages`` (slug:
    markdown), served from its files."""
    version = "2026-01-01-000000"
    where = root / ".zread" / "wiki" / "versions" / version
    where.mkdir(parents=True)
    catalog = [wiki.Page(n, slug.title(), slug) for n, slug in enumerate(pages, 1)]
    index = wf.wiki_index(version, "2026-01-01T00:00:00Z", "en", catalog)
    (where / wf.WIKI_JSON).write_bytes(wf.encode_wiki(index))
    for slug, text in pages.items():
        (where / wf.page_file(slug)).write_text(text)
    site = DiskSite.open(root, version)
    assert site is not None
    return site


class Slow(threading.Thread):
    """A client GETting ``path`` in the background, with all the time it needs: its
    status (None when it got no answer) and how long it took."""

    def __init__(self, server: WikiServer, path: str) -> None:
        super().__init__(daemon=True)
        self.url, self.path = server.url, path
        self.status: int | None = None
        self.elapsed = 0.0
        self.start()

    def run(self) -> None:
        started = time.monotonic()
        conn = http.client.HTTPConnection(*urlsplit(self.url).netloc.split(":"), timeout=120)
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn.request("GET", self.path)
            response = conn.getresponse()
            response.read()
            self.status = response.status
        conn.close()
        self.elapsed = time.monotonic() - started


def test_a_page_slow_to_render_holds_up_no_other_client(tmp_path: Path) -> None:
    site = disk_site(tmp_path / "project", {"1-slow": SLOW})
    with WikiServer(site, port=0) as running:
        slow = Slow(running, "/1-slow")
        time.sleep(0.2)  # its render is under way
        started = time.monotonic()
        assert get(running, "/api/wiki").body == site.wiki_json()
        quick = time.monotonic() - started
        assert slow.is_alive(), "the other client was answered only after the slow page"
        slow.join(60)
        assert slow.status == 200
        assert quick < slow.elapsed / 2


def test_close_during_a_render_frees_the_port_at_once(tmp_path: Path) -> None:
    site = disk_site(tmp_path / "project", {"1-slow": SLOW})
    running = WikiServer(site, port=0)
    try:
        slow = Slow(running, "/1-slow")
        time.sleep(0.3)
        assert slow.is_alive()
        started = time.monotonic()
        running.close()
        assert time.monotonic() - started < httpserver.STOP_WAIT / 2
        assert refused(running.port)
        slow.join(10)
        assert slow.status is None  # its connection ended with the server, unanswered
    finally:
        running.close()


def test_a_page_past_the_render_bound_is_shown_as_its_text(site: FakeSite) -> None:
    site.bodies["2-data-model"] = "<b>[x](1-overview)</b>\n" * (RENDERED_MAX // 20)
    with WikiServer(site, port=0) as running:
        text = get(running, "/2-data-model").text
    assert '<pre class="markdown">&lt;b&gt;[x](1-overview)&lt;/b&gt;\n' in text
    assert "<b>" not in text and 'href="/1-overview"' not in text
    assert "<h1>Data Model</h1>" in text  # still the page, under its title


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The markdown of each page the server renders."""
    rendered: list[str] = []

    def render(text: str, slugs: AbstractSet[str]) -> str:
        rendered.append(text)
        return render_markdown(text, slugs)

    monkeypatch.setattr(wikiserver, "render_markdown", render)
    return rendered


def test_a_page_is_rendered_again_only_when_its_markdown_changes(
    tmp_path: Path, renders: list[str]
) -> None:
    project = tmp_path / "project"
    site = disk_site(project, {"1-a": "one\n", "2-b": "two\n"})
    page = next(project.glob(".zread/wiki/versions/*/1-a.md"))
    with WikiServer(site, port=0) as running:
        first = get(running, "/1-a").body
        assert get(running, "/1-a").body == first
        assert get(running, "/2-b").status == 200
        assert renders == ["one\n", "two\n"]
        page.write_text("one, edited\n")
        assert "one, edited" in get(running, "/1-a").text
        assert renders == ["one\n", "two\n", "one, edited\n"]


def test_rendered_pages_are_kept_within_a_bound(
    tmp_path: Path, renders: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wikiserver, "RENDERED_KEPT", 2000)
    site = disk_site(tmp_path / "project", {"1-a": "a" * 600, "2-b": "b" * 600})
    with WikiServer(site, port=0) as running:
        for path in ("/1-a", "/1-a", "/2-b", "/1-a"):
            assert get(running, path).status == 200
    # a page kept costs its markdown and its HTML, over 1000 bytes: keeping 2-b dropped 1-a
    assert [text[0] for text in renders] == ["a", "b", "a"]


# -- Host: only this server's names --------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "127.0.0.1:{port}"])
def test_the_servers_own_names_are_answered(server: WikiServer, host: str) -> None:
    name = host.format(port=server.port)
    status, body = exchange(server, f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
    assert status == 200 and b"<h1>" in body


def test_a_request_without_host_is_answered(server: WikiServer) -> None:
    status, _ = exchange(server, b"GET / HTTP/1.0\r\n\r\n")  # HTTP/1.0 needs none
    assert status == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost.evil.example", ""]
)
def test_another_host_is_misdirected_and_named_once_on_stderr(
    server: WikiServer, host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = host.format(port=server.port)
    for _ in range(3):
        status, body = exchange(server, f"GET / HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
        assert status == 421 and b"Misdirected request" in body
    err = capsys.readouterr().err
    assert err.count("refused a request for Host") == 1 and repr(name) in err
    assert get(server, "/").status == 200  # the server's own name still works


def test_an_absolute_target_naming_another_server_is_misdirected(server: WikiServer) -> None:
    own = f"127.0.0.1:{server.port}"
    for target, expected in (
        (f"http://{own}/api/wiki", 200),
        ("http://evil.example/api/wiki", 421),
    ):
        data = f"GET {target} HTTP/1.1\r\nHost: {own}\r\n\r\n".encode()
        assert exchange(server, data)[0] == expected


def test_refused_hosts_are_named_on_stderr_at_most_sixteen_times(
    server: WikiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(40):
        exchange(server, f"GET / HTTP/1.1\r\nHost: rebind{n}.example\r\n\r\n".encode())
    assert capsys.readouterr().err.count("refused a request for Host") == 16


# -- HTTP faults -----------------------------------------------------------------------


def http_fault(**fields: Any) -> HttpFault:
    return msgspec.convert(fields, HttpFault)


@contextlib.contextmanager
def faulty(
    site: FakeSite, *faults: HttpFault, seed: int = 0
) -> Iterator[tuple[WikiServer, list[dict[str, str]]]]:
    """A server whose requests meet ``faults``; the list its journal callback fills."""
    seen: list[dict[str, str]] = []
    plan = HttpFaultPlan(faults, seed=seed)
    with WikiServer(site, port=0, faults=plan, journal=seen.append) as running:
        yield running, seen


def test_a_status_fault_answers_its_status_and_body(site: FakeSite) -> None:
    with faulty(site, http_fault(path="/api/*", status=503, body="try later")) as (server, _):
        answer = get(server, "/api/wiki")
        assert (answer.status, answer.body) == (503, b"try later")
        assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert answer.headers["Connection"] == "close"
        assert get(server, "/").status == 200  # another path is served as ever
        head = request(server.url, "HEAD", "/api/wiki")
        assert (head.status, head.body, head.headers["Content-Length"]) == (503, b"", "9")


def test_a_status_without_a_reason_phrase_keeps_its_number(site: FakeSite) -> None:
    with faulty(site, http_fault(status=599)) as (server, _):
        status, body = exchange(server, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert (status, body) == (599, b"")


def test_a_status_without_a_body_sends_none(site: FakeSite) -> None:
    with faulty(site, http_fault(status=204)) as (server, _):
        sock = connect(server)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        raw = read_all(sock)
        assert raw.startswith(b"HTTP/1.1 204 No Content\r\n")
        assert raw.endswith(b"\r\n\r\n")
        assert b"Content-Length" not in raw


def test_a_delay_holds_the_answer_then_gives_it(site: FakeSite) -> None:
    with faulty(site, http_fault(path="/api/wiki", delay={"fixed": 0.4})) as (server, _):
        started = time.monotonic()
        answer = get(server, "/api/wiki")
        waited = time.monotonic() - started
        assert (answer.status, answer.body) == (200, site.document)
        assert waited >= 0.35  # held at least about that long (never an upper bound)


def test_a_dribble_sends_the_body_in_its_chunks(site: FakeSite) -> None:
    chunks = 4
    with faulty(site, http_fault(path="/api/wiki", dribble={"chunks": chunks, "over": 0.8})) as (
        server,
        _,
    ):
        sock = connect(server)
        sock.sendall(b"GET /api/wiki HTTP/1.1\r\nHost: localhost\r\n\r\n")
        received: list[bytes] = []
        while chunk := sock.recv(65536):
            received.append(chunk)
        sock.close()
    raw = b"".join(received)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert body == site.document
    assert received[0] == head + b"\r\n\r\n"  # the headers first, on their own
    assert len(received) == 1 + chunks  # then each piece, apart


def test_a_dribble_of_a_head_sends_the_headers_only(site: FakeSite) -> None:
    with faulty(site, http_fault(dribble={"chunks": 3, "over": 0.3})) as (server, _):
        head = request(server.url, "HEAD", "/api/wiki")
        assert (head.status, head.body) == (200, b"")


def test_a_reset_is_a_connection_error_without_an_answer(site: FakeSite) -> None:
    with faulty(site, http_fault(reset=True)) as (server, _):
        with pytest.raises(ConnectionResetError):
            get(server, "/")
        sock = connect(server)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        with pytest.raises(ConnectionResetError):
            sock.recv(65536)
        sock.close()


def test_close_after_headers_sends_the_head_and_no_body(site: FakeSite) -> None:
    with faulty(site, http_fault(path="/api/wiki", close_after_headers=True)) as (server, _):
        parts = urlsplit(server.url)
        conn = http.client.HTTPConnection(str(parts.hostname), parts.port, timeout=5)
        try:
            conn.request("GET", "/api/wiki")
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.headers["Content-Length"] == str(len(site.document))
            with pytest.raises(http.client.IncompleteRead) as raised:
                resp.read()
            assert raised.value.partial == b""
        finally:
            conn.close()


def test_first_and_after_count_the_matching_requests(site: FakeSite) -> None:
    faults = (
        http_fault(path="/api/wiki", status=500, first=2),
        http_fault(path="/", status=502, after=1),
    )
    with faulty(site, *faults) as (server, _):
        assert [get(server, "/api/wiki").status for _ in range(3)] == [500, 500, 200]
        assert [get(server, "/").status for _ in range(3)] == [200, 502, 502]


def test_a_method_fault_takes_only_that_method(site: FakeSite) -> None:
    with faulty(site, http_fault(method="HEAD", status=500)) as (server, _):
        assert request(server.url, "HEAD", "/").status == 500
        assert get(server, "/").status == 200


def test_refused_requests_meet_no_fault(site: FakeSite) -> None:
    with faulty(site, http_fault(status=500)) as (server, seen):
        assert request(server.url, "POST", "/").status == 405
        status, _ = exchange(server, b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
        assert status == 421
        assert seen == []


def statuses(site: FakeSite, seed: int, count: int = 24) -> list[int]:
    with faulty(site, http_fault(status=503, probability=0.5), seed=seed) as (server, _):
        return [get(server, "/api/wiki").status for _ in range(count)]


def test_probabilities_are_reproduced_by_the_seed(site: FakeSite) -> None:
    first = statuses(site, 11)
    assert first == statuses(site, 11)
    assert first != statuses(site, 12)
    assert set(first) == {200, 503}


def test_the_journal_is_told_of_each_request_that_meets_a_fault(site: FakeSite) -> None:
    faults = (http_fault(path="/api/pages/*", reset=True), http_fault(path="/", status=500))
    with faulty(site, *faults) as (server, seen):
        with pytest.raises(ConnectionResetError):
            get(server, "/api/pages/1-overview?x=1")
        get(server, "/")
        get(server, "/api/wiki")
        request(server.url, "HEAD", "/")
    assert seen == [
        {"method": "GET", "path": "/api/pages/1-overview", "fault": "http-1", "kind": "reset"},
        {"method": "GET", "path": "/", "fault": "http-2", "kind": "status"},
        {"method": "HEAD", "path": "/", "fault": "http-2", "kind": "status"},
    ]


def test_a_journal_that_fails_does_not_fail_the_request(site: FakeSite) -> None:
    def broken(_: dict[str, str]) -> None:
        raise OSError("disk full")

    plan = HttpFaultPlan([http_fault(status=500)])
    with WikiServer(site, port=0, faults=plan, journal=broken) as server:
        assert get(server, "/").status == 500


def test_a_fault_added_to_a_running_servers_plan_applies_from_the_next_request(
    site: FakeSite,
) -> None:
    plan = HttpFaultPlan()
    with WikiServer(site, port=0, faults=plan) as server:
        assert server.faults is plan
        assert get(server, "/api/wiki").status == 200
        added = plan.add(http_fault(path="/api/wiki", status=503, first=1))
        assert added == "http-1"
        assert get(server, "/api/wiki").status == 503
        assert get(server, "/api/wiki").status == 200
        plan.add(http_fault(status=500))
        assert get(server, "/").status == 500
        plan.clear()
        assert get(server, "/").status == 200


def test_a_server_closes_promptly_while_a_delayed_answer_waits(site: FakeSite) -> None:
    with faulty(site, http_fault(delay={"fixed": 60.0})) as (server, _):
        sock = connect(server)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        while server.open_connections == 0:
            time.sleep(0.01)
        server.close()
        assert read_all(sock) == b""  # ended unanswered
        assert refused(server.port)
