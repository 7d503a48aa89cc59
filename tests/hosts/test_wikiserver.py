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
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest

from simulator.core.effects import DEFAULT_PORT
from simulator.core.errors import ConfigurationError
from simulator.hosts import wikiserver
from simulator.hosts.wikiserver import (
    PORT_TRIES,
    ListenError,
    Site,
    SitePage,
    WikiServer,
    loopback,
    page_path,
    render_markdown,
)
from simulator.scenario import wiki

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

    monkeypatch.setattr(wikiserver, "_Server", no_socket)
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


def free_run(count: int) -> tuple[int, list[socket.socket]]:
    """A base port with ``count`` ports from it held by listening sockets (not a port
    near 9681: tests running at once may use those)."""
    for base in range(23_000, 60_000, 617):
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(sock)
                sock.bind(("127.0.0.1", port))
                sock.listen()
        except OSError:
            for sock in held:
                sock.close()
            continue
        return base, held
    raise AssertionError("no free run of ports")


def test_a_busy_port_moves_to_the_next_free_one_upward(site: FakeSite) -> None:
    base, held = free_run(3)
    try:
        with WikiServer(site, port=base) as running:
            assert base + 3 <= running.port < base + PORT_TRIES
            assert running.url == f"http://127.0.0.1:{running.port}"
            assert get(running, "/").status == 200
    finally:
        for sock in held:
            sock.close()


def test_a_free_port_is_taken_as_asked(site: FakeSite) -> None:
    base, held = free_run(1)
    held[0].close()
    with WikiServer(site, port=base) as running:
        assert running.port == base


def test_a_hundred_busy_ports_are_an_error(site: FakeSite) -> None:
    base, held = free_run(PORT_TRIES)
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

    def denied(routes: object, family: object, address: tuple[str, int]) -> None:
        tried.append(address)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(wikiserver, "_Server", denied)
    with pytest.raises(ListenError) as failed:
        WikiServer(site, port=80)
    assert str(failed.value) == "listen tcp 127.0.0.1:80: bind: permission denied"
    assert tried == [("127.0.0.1", 80)]


def test_the_search_stops_at_the_last_port(site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[int] = []

    def busy(routes: object, family: object, address: tuple[str, int]) -> None:
        tried.append(address[1])
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(wikiserver, "_Server", busy)
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


def test_markdown_is_rendered_safely() -> None:
    text = render_markdown(
        '<script>alert(1)</script>\n\n<b onclick="x">b</b> [js](javascript:alert(1)) '
        "[data](data:text/html,hi) [up](../../etc/passwd) ![img](x.png)\n",
        {"1-a"},
    )
    assert "<script>" not in text and "<b " not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert 'href="javascript:' not in text and 'href="data:' not in text
    assert '<a class="source" title="../../etc/passwd">up</a>' in text


def test_links_to_pages_tolerate_a_dot_md_and_a_leading_dot_slash() -> None:
    text = render_markdown(
        "[a](1-a) [b](1-a.md) [c](./1-a) [d](/1-a) [e](#here) [f](2-b)\n", {"1-a"}
    )
    assert text.count('href="/1-a"') == 4
    assert 'href="#here"' in text
    assert '<a class="source" title="2-b">f</a>' in text


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


def test_an_idle_connection_is_dropped(site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> None:
    assert wikiserver.IDLE_TIMEOUT == 10.0
    monkeypatch.setattr(wikiserver._Handler, "timeout", 0.2)
    with WikiServer(site, port=0) as running:
        sock = socket.create_connection(("127.0.0.1", running.port), timeout=5)
        sock.sendall(b"GET / HT")  # and nothing more
        started = time.monotonic()
        assert sock.recv(1024) == b""
        assert time.monotonic() - started < 3
        sock.close()
        assert get(running, "/").status == 200


def test_connections_beyond_the_limit_are_closed(
    site: FakeSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert wikiserver.MAX_CONNECTIONS == 64
    monkeypatch.setattr(wikiserver, "MAX_CONNECTIONS", 2)
    with WikiServer(site, port=0) as running:
        idle = [socket.create_connection(("127.0.0.1", running.port), timeout=5) for _ in range(2)]
        # Accepted in order: these two hold the slots, the next one finds none.
        extra = socket.create_connection(("127.0.0.1", running.port), timeout=5)
        extra.sendall(b"GET / HTTP/1.0\r\n\r\n")
        with contextlib.suppress(ConnectionResetError):  # closed, maybe with a reset
            assert extra.recv(1024) == b""
        extra.close()
        for sock in idle:
            sock.close()
        # Their handlers see the end and give their slots back: then a request passes.
        deadline = time.monotonic() + 5
        while True:
            try:
                assert get(running, "/").status == 200
                break
            except (ConnectionError, http.client.HTTPException):
                assert time.monotonic() < deadline
                time.sleep(0.05)


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
