"""Tests for simulator.hosts.httprequest: one request read from its bytes (by h11) and
its answer decided, without a socket: every rule fed the bytes a client would send,
whole or a byte at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus

import pytest

from simulator.hosts.httprequest import (
    MAX_BODY,
    MAX_HEAD,
    MAX_HEADERS,
    REFUSALS_SHOWN,
    Answer,
    Ask,
    Exchange,
    Hosts,
    Outcome,
    asked,
    response,
)


@dataclass(frozen=True)
class Page:
    status: HTTPStatus
    content_type: str
    body: bytes


@dataclass
class Site:
    """An ``answer`` that records the paths it was asked for."""

    asked: list[str] = field(default_factory=list)

    def __call__(self, path: str) -> Page:
        self.asked.append(path)
        return Page(HTTPStatus.OK, "text/plain", f"page {path}".encode())


def exchange(host: str = "127.0.0.1", port: int = 9681) -> Exchange:
    return Exchange(Hosts(host, port))


def answered(got: Outcome | Ask | None, site: Answer) -> Outcome | None:
    """``got``, or when the site is to answer it, its answer from ``site``."""
    return got.outcome(asked(site, got.path)) if isinstance(got, Ask) else got


def outcome(data: bytes, site: Site | None = None) -> Outcome:
    """The outcome of ``data`` fed whole, checked against ``data`` fed a byte at a time."""
    got = exchange().receive(data)
    assert got is not None, data[:80]
    bytewise = exchange()
    decided = [bytewise.receive(data[i : i + 1]) for i in range(len(data))]
    assert [one for one in decided if one is not None][:1] == [got]
    whole = answered(got, site or Site())
    assert whole is not None
    return whole


def status(data: bytes) -> int:
    return outcome(data).reply.status.value


def get(path: str = "/", headers: str = "Host: localhost\r\n", version: str = "1.1") -> bytes:
    return f"GET {path} HTTP/{version}\r\n{headers}\r\n".encode("latin-1")


# -- answered -----------------------------------------------------------------------------


def test_a_get_asks_the_site_for_the_decoded_path_without_its_query() -> None:
    site = Site()
    done = outcome(get("/%31-a%20b?x=1#f"), site)
    assert done.reply == Page(HTTPStatus.OK, "text/plain", b"page /1-a b")
    assert site.asked == ["/1-a b"]
    assert (done.version, done.head) == ("1.1", False)


def test_an_absolute_target_naming_this_server_is_its_path() -> None:
    site = Site()
    outcome(get("http://127.0.0.1:9681/1-a?q"), site)
    outcome(get("http://localhost/1-b", headers="Host: 127.0.0.1:9681\r\n"), site)
    assert site.asked == ["/1-a", "/1-b"]


@pytest.mark.parametrize(
    "target", ["http://evil.example/api/wiki", "http://127.0.0.1:9682/", "http://u@localhost/"]
)
def test_an_absolute_target_naming_another_server_is_421(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The target's authority wins over Host (RFC 9112 §3.2.2): a good Host does not
    # let a foreign target through.
    site = Site()
    done = outcome(get(target, headers="Host: 127.0.0.1:9681\r\n"), site)
    assert done.reply.status is HTTPStatus.MISDIRECTED_REQUEST
    assert site.asked == []
    assert "refused a request for target " in capsys.readouterr().err


def test_nothing_is_decided_before_the_head_ends() -> None:
    one = exchange()
    assert one.receive(b"GET / HTTP/1.1\r\nHost: localhost\r\n") is None
    assert not one.abandoned
    assert one.receive(b"\r\n") is not None


@pytest.mark.parametrize("data", [b"", b"GET / HT"])
def test_a_peer_that_ends_its_side_first_is_abandoned_unanswered(data: bytes) -> None:
    one = exchange()
    if data:
        assert one.receive(data) is None
    assert one.receive(b"") is None
    assert one.abandoned


def test_the_answer_speaks_the_requests_version_and_head_has_no_body() -> None:
    assert outcome(get(version="1.0", headers="")).version == "1.0"
    head = outcome(b"HEAD /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert head.head is True
    data = head.data()
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert data.endswith(b"\r\n\r\n")
    assert b"Content-Length: 7\r\n" in data  # GET's length, no body


def test_an_answer_that_raises_is_500() -> None:
    def broken(path: str) -> Page:
        raise OSError("disk on fire")

    done = answered(exchange(port=1).receive(get()), broken)
    assert done is not None
    assert done.reply.status is HTTPStatus.INTERNAL_SERVER_ERROR
    assert b"disk on fire" not in done.data()


def test_every_answer_has_its_length_and_closes() -> None:
    data = response("1.1", Page(HTTPStatus.NOT_FOUND, "text/html", "ü".encode()))
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 404 Not Found"
    assert "Content-Length: 2" in lines and "Connection: close" in lines
    assert "Content-Type: text/html" in lines and "X-Content-Type-Options: nosniff" in lines
    assert not any(line.startswith("Allow:") for line in lines)
    assert body == "ü".encode()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "BREW", "CONNECT"])
def test_other_methods_are_405_with_allow(method: str) -> None:
    site = Site()
    done = outcome(f"{method} / HTTP/1.1\r\nHost: localhost\r\n\r\n".encode(), site)
    assert done.reply.status is HTTPStatus.METHOD_NOT_ALLOWED
    assert b"\r\nAllow: GET, HEAD\r\n" in done.data()
    assert site.asked == []


# -- the head ----------------------------------------------------------------------------


def test_a_request_line_past_the_bound_is_414() -> None:
    assert status(get("/" + "a" * MAX_HEAD)) == 414
    # Still arriving: refused as soon as h11 holds more than the bound.
    one = exchange()
    assert one.receive(b"GET /" + b"a" * (MAX_HEAD // 2)) is None
    done = one.receive(b"a" * MAX_HEAD)
    assert isinstance(done, Outcome) and done.reply.status.value == 414


def test_a_head_past_the_bound_is_431() -> None:
    assert status(get(headers="Host: localhost\r\nX-Big: " + "a" * MAX_HEAD + "\r\n")) == 431
    one = exchange()
    assert one.receive(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: ") is None
    done = one.receive(b"a" * MAX_HEAD)
    assert isinstance(done, Outcome) and done.reply.status.value == 431


def test_the_number_of_header_fields_is_bounded() -> None:
    fields = "".join(f"X-{n}: v\r\n" for n in range(MAX_HEADERS - 1))
    assert status(get(headers="Host: localhost\r\n" + fields)) == 200
    assert status(get(headers="Host: localhost\r\nX-One: more\r\n" + fields)) == 431


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", b"names its server in one Host"),
        (b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", b"one Host"),
        (b"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n", b"not a length"),
        (b"GET /\xe9 HTTP/1.1\r\nHost: localhost\r\n\r\n", b"not an HTTP/1.1 request"),
        (b"GET /\r\n\r\n", b"not an HTTP/1.1 request"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"not an HTTP/1.1 request"),
        (b"GET //[x/ HTTP/1.1\r\nHost: localhost\r\n\r\n", b"not an HTTP/1.1 request"),
        (b"GET http://[::1/ HTTP/1.1\r\nHost: localhost\r\n\r\n", b"not an HTTP/1.1 request"),
    ],
)
def test_a_request_h11_cannot_read_is_400(data: bytes, says: bytes) -> None:
    done = outcome(data)
    assert done.reply.status is HTTPStatus.BAD_REQUEST
    assert says in done.reply.body


def test_a_refused_head_answers_a_head_without_a_body() -> None:
    done = outcome(b"HEAD / HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    assert done.reply.status is HTTPStatus.BAD_REQUEST
    assert done.head and done.data().endswith(b"\r\n\r\n")


def test_a_transfer_coding_other_than_chunked_is_501() -> None:
    assert status(get(headers="Host: localhost\r\nTransfer-Encoding: gzip\r\n")) == 501


# -- Host ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listening", "port", "allowed", "refused"),
    [
        (
            "127.0.0.1",
            9681,
            ["127.0.0.1", "127.0.0.1:9681", "localhost", "LOCALHOST:9681", " localhost "],
            ["127.0.0.1:9682", "127.0.0.2", "evil.example", "localhost.evil.example", ""],
        ),
        ("::1", 80, ["[::1]", "[::1]:80", "localhost:80"], ["[::1]:81", "[::2]", "127.0.0.1"]),
    ],
)
def test_only_the_servers_own_names_are_answered(
    listening: str, port: int, allowed: list[str], refused: list[str]
) -> None:
    hosts = Hosts(listening, port)
    assert hosts.allows(None)  # HTTP/1.0 sends none
    assert [name for name in allowed if hosts.allows(name)] == allowed
    assert [name for name in refused if hosts.allows(name)] == []


def test_a_misdirected_request_is_421_and_its_body_never_waited_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    site = Site()
    one = exchange()
    done = answered(
        one.receive(b"POST / HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 10\r\n\r\n"),
        site,
    )
    assert done is not None and done.reply.status is HTTPStatus.MISDIRECTED_REQUEST
    assert site.asked == []
    err = capsys.readouterr().err
    assert err == (
        "zread-sim: browse: refused a request for Host 'evil.example': not this server\n"
    )


def test_refused_names_are_shown_once_each_and_at_most_sixteen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hosts = Hosts("127.0.0.1", 9681)
    for n in range(40):
        for _ in range(2):
            hosts.refused(f"rebind{n}.example")
    hosts.refused("\x1b[31mred\u202e")
    lines = capsys.readouterr().err.splitlines()
    assert REFUSALS_SHOWN == 16
    assert len(lines) == 16 == len(set(lines))
    assert all("\x1b" not in line for line in lines)


def test_a_refused_name_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    Hosts("127.0.0.1", 1).refused("\x1b[31mred\u202e")
    assert "'\\x1b[31mred\\u202e'" in capsys.readouterr().err


# -- the body ------------------------------------------------------------------------------


def test_a_small_body_is_read_before_the_answer_and_dropped() -> None:
    site = Site()
    one = exchange(port=1)
    head = f"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {MAX_BODY}\r\n\r\n"
    assert one.receive(head.encode()) is None
    assert one.receive(b"x" * (MAX_BODY - 1)) is None
    done = answered(one.receive(b"x"), site)
    assert done is not None and done.reply.status is HTTPStatus.OK
    assert site.asked == ["/"]


@pytest.mark.parametrize("length", [MAX_BODY + 1, 10**19])
def test_a_body_over_the_bound_is_413_before_it_comes(length: int) -> None:
    done = exchange().receive(
        f"PUT / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\n".encode()
    )
    assert isinstance(done, Outcome)
    assert done.reply.status is HTTPStatus.REQUEST_ENTITY_TOO_LARGE


@pytest.mark.parametrize(
    "headers", ["Transfer-Encoding: chunked", "Expect: 100-continue\r\nContent-Length: 100"]
)
def test_a_body_not_sent_unasked_is_not_waited_for(headers: str) -> None:
    data = f"GET / HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n\r\n".encode()
    done = answered(exchange().receive(data), Site())
    assert done is not None and done.reply.status is HTTPStatus.OK
