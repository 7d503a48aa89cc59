"""One HTTP request to the wiki server and its answer, without I/O: read by h11.

Owns: :class:`Exchange`, which takes a connection's bytes as they come, reads one
request from them with h11 and decides its answer (:class:`Outcome`, the bytes to
send); :class:`Hosts`, the ``Host`` rule; the bounds on a request; the answers given
here rather than by the site (400, 405, 413, 414, 421, 431, 500, 501); and how every
answer is written. When and how bytes move is :mod:`simulator.hosts.httpserver`'s.

Requests are read by h11 (python-hyper's pure-Python, sans-I/O HTTP/1.1 parser, the one
under httpcore and httpx: small, typed, with no dependencies of its own, kept for a
decade): it frames the request line, headers and body (by ``Content-Length`` or
chunked), validates them as RFC 9112 says and bounds the head's size, so none of that
parsing is written here. An answer has one shape (status line, headers, body, close)
and is written as bytes by :func:`response`, so a request h11 refused is answered
like any other (h11's own writer needs the request's method to frame a HEAD answer,
which it does not have then), and the status line carries the request's version, as
Go's net/http does. The rules:

- The head: the request line and headers together at most :data:`MAX_HEAD` bytes
  (past it ``431``, or ``414`` when the request line alone is past it), and at most
  :data:`MAX_HEADERS` fields (``431``). A request h11 cannot read is ``400``: an
  HTTP/1.1 request with no ``Host`` or with two (RFC 9112 and Go's net/http say so),
  a ``Content-Length`` that is not one decimal number of at most 20 digits (or two
  that differ), a target with a byte outside printable ASCII. A transfer coding other
  than chunked is ``501``.
- ``Host``: only the names of the loopback address the server listens on are
  answered (``localhost``, the address, ``[::1]`` for ``::1``, each with or without the
  port); any other is ``421`` and, for the first :data:`REFUSALS_SHOWN` names, one
  stderr line each (a web page reaching the server through DNS rebinding reads
  nothing). A request with no ``Host`` (HTTP/1.0) is answered. A target in absolute
  form (``http://name/path``) names its server too, and that name wins over ``Host``
  (RFC 9112 §3.2.2): it must be one of these names as well, else ``421``.
- The body is never used: one over :data:`MAX_BODY` is ``413`` at once, unread; a
  smaller one is read and dropped; a chunked one, or one behind
  ``Expect: 100-continue``, is not waited for.
- Methods: GET and HEAD are the site's to answer: :meth:`Exchange.receive` gives an
  :class:`Ask` (the path percent-decoded, without the query), and its caller gets the
  reply from :func:`asked` (``answer(path)``, off its event loop: a page may take
  seconds to render) and the answer from :meth:`Ask.outcome`; any other method is
  ``405`` with ``Allow: GET, HEAD``. An ``answer`` that raises is ``500``.
- Every answer has ``Content-Length`` and ``Connection: close``; HEAD's has no body.

Must not: do I/O (but the stderr line of a refused ``Host``), call the site's
``answer`` (:func:`asked` does, on the caller's worker), keep more of a request than
h11 buffers (:data:`MAX_HEAD`) and a few bytes, or let an exception out of
:meth:`Exchange.receive` or :func:`asked`.
"""

from __future__ import annotations

import contextlib
import email.utils
import sys
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final, Protocol, TypeAlias
from urllib.parse import unquote, urlsplit

import h11

from simulator.scenario.httpfaults import has_body

MAX_HEAD: Final = 32 << 10
"""The largest request line and headers, together, in bytes."""
MAX_HEADERS: Final = 100
"""The most header fields a request may have."""
MAX_BODY: Final = 8 << 10
"""The largest request body read (and dropped); a larger one is ``413``."""
REFUSALS_SHOWN: Final = 16
"""How many refused ``Host`` values get their stderr line."""
ALLOWED_METHODS: Final = ("GET", "HEAD")
_HTML: Final = "text/html; charset=utf-8"


class Reply(Protocol):
    """One answer: its status, its content type and its body."""

    @property
    def status(self) -> int:
        """An HTTPStatus, or any status 100-599 (a fault's)."""
        ...

    @property
    def content_type(self) -> str: ...

    @property
    def body(self) -> bytes: ...


Answer: TypeAlias = Callable[[str], Reply]
"""What a GET of a path (percent-decoded, without its query) answers."""


@dataclass(frozen=True, slots=True)
class _Own:
    """An answer given here rather than by the site."""

    status: HTTPStatus
    content_type: str
    body: bytes


def _own(status: HTTPStatus, heading: str, text: str) -> _Own:
    page = (
        "<!DOCTYPE html>\n"
        '<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{status.value} {status.phrase}</title>\n</head>\n<body>\n"
        f"<main>\n<h1>{heading}</h1>\n<p>{text}</p>\n</main>\n</body>\n</html>\n"
    )
    return _Own(status, _HTML, page.encode())


_BAD_LENGTH: Final = _own(HTTPStatus.BAD_REQUEST, "Bad request", "Content-Length is not a length.")
_BAD_HOST: Final = _own(
    HTTPStatus.BAD_REQUEST, "Bad request", "An HTTP/1.1 request names its server in one Host."
)
_BAD_REQUEST: Final = _own(
    HTTPStatus.BAD_REQUEST, "Bad request", "This is not an HTTP/1.1 request this server reads."
)
_NOT_ALLOWED: Final = _own(
    HTTPStatus.METHOD_NOT_ALLOWED, "Method not allowed", "This wiki answers GET and HEAD."
)
_TOO_LARGE: Final = _own(
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "Content too large", "This wiki takes no request body."
)
_LINE_TOO_LONG: Final = _own(
    HTTPStatus.REQUEST_URI_TOO_LONG, "URI too long", f"A request is at most {MAX_HEAD >> 10} KiB."
)
_MISDIRECTED: Final = _own(
    HTTPStatus.MISDIRECTED_REQUEST,
    "Misdirected request",
    "This server answers only its own loopback address.",
)
_HEAD_TOO_LARGE: Final = _own(
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
    "Request header fields too large",
    f"A request's line and headers are at most {MAX_HEAD >> 10} KiB, {MAX_HEADERS} fields.",
)
_FAILED: Final = _own(
    HTTPStatus.INTERNAL_SERVER_ERROR, "Internal server error", "This page could not be made."
)
_NOT_IMPLEMENTED: Final = _own(
    HTTPStatus.NOT_IMPLEMENTED, "Not implemented", "A body is sent as it is or chunked."
)


def response(version: str, reply: Reply, *, head: bool = False) -> bytes:
    """The bytes of an answer: the status line in HTTP/``version``, the headers, the
    body (none for HEAD, whose headers are GET's). A status without a known reason
    phrase has an empty one; one whose answer has no body (1xx, 204, 304) gets no
    content headers and no body."""
    status = int(reply.status)
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""  # the reason phrase may be empty; the space before it stays
    lines = [
        f"HTTP/{version} {status} {phrase}",
        "Server: zread-sim",
        f"Date: {email.utils.formatdate(usegmt=True)}",
    ]
    body = has_body(status)
    if body:
        lines += [f"Content-Type: {reply.content_type}", f"Content-Length: {len(reply.body)}"]
    lines.append("X-Content-Type-Options: nosniff")
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        lines.append(f"Allow: {', '.join(ALLOWED_METHODS)}")
    lines.append("Connection: close")
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return data + reply.body if body and not head else data


@dataclass(frozen=True, slots=True)
class Ask:
    """A request the site answers: the path it is asked for (percent-decoded, without
    the query), and how the answer goes out (its HTTP version, HEAD or not)."""

    path: str
    version: str = "1.1"
    head: bool = False

    def outcome(self, reply: Reply) -> Outcome:
        """The answer, once the site's ``reply`` (:func:`asked`) is made."""
        return Outcome(reply, self.version, self.head)


def asked(answer: Answer, path: str) -> Reply:
    """What ``answer`` replies for ``path``: a ``500`` when it raises (a page that
    cannot be made is an answer, not a crash)."""
    try:
        return answer(path)
    except Exception:
        return _FAILED


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a request is answered: the reply, in which HTTP version, with its body or
    not (HEAD)."""

    reply: Reply
    version: str = "1.1"
    head: bool = False

    def data(self) -> bytes:
        """The answer's bytes."""
        return response(self.version, self.reply, head=self.head)


class Hosts:
    """The ``Host`` rule of a server listening on ``host`` (an address) and ``port``:
    its names, and the stderr line for each of the first refused ones."""

    def __init__(self, host: str, port: int) -> None:
        names = {"localhost", host.lower()}
        if ":" in host:
            names.add(f"[{host.lower()}]")
        self.names = frozenset({*names, *(f"{name}:{port}" for name in names)})
        self._refused: set[str] = set()

    def allows(self, host: str | None) -> bool:
        """Whether a request's ``Host`` names this server (or there is none)."""
        return host is None or host.strip().lower() in self.names

    def refused(self, host: str, named_by: str = "Host") -> None:
        """One stderr line per refused name, for the first :data:`REFUSALS_SHOWN` of
        them (a page could send thousands); ``named_by``: ``Host``, or ``target`` for
        an absolute-form request target."""
        if host in self._refused or len(self._refused) >= REFUSALS_SHOWN:
            return
        self._refused.add(host)
        shown = ascii(host[:100])  # quoted, every control or non-ASCII character escaped
        line = f"zread-sim: browse: refused a request for {named_by} {shown}: not this server\n"
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(line)
            sys.stderr.flush()


def _header(request: h11.Request, name: bytes) -> str | None:
    """A header's first value (h11 lower-cases the names), or None."""
    for key, value in request.headers:
        if key == name:
            return value.decode("latin-1")
    return None


class Exchange:
    """One connection's request, read from the bytes :meth:`receive` is given, and
    its answer, or the site's :class:`Ask`. :attr:`abandoned` is true once the peer
    ended its side before its request was whole (nothing is answered then)."""

    def __init__(self, hosts: Hosts) -> None:
        self._hosts = hosts
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._request: h11.Request | None = None
        self._start = b""  # the first bytes: a HEAD that h11 refused has no body
        self._line_ended = False
        self._received = 0
        self.abandoned = False

    def receive(self, data: bytes) -> Outcome | Ask | None:
        """Take ``data`` (``b""``: the peer ended its side); the answer once it is
        decided, or the :class:`Ask` when the site decides it, else None (more bytes
        needed, or :attr:`abandoned`)."""
        if len(self._start) < 8:
            self._start = (self._start + data)[:8]
        self._line_ended = self._line_ended or b"\n" in data
        self._received += len(data)
        self._h11.receive_data(data)
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as err:
                self.abandoned = not data
                return None if self.abandoned else self._refusal(err)
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                self.abandoned = not data
                return None
            if isinstance(event, h11.Request):
                self._request = event
                refused = self._refuse(event)
                if refused is not None or not self._body_coming(event):
                    return self._outcome(event, refused)
            elif isinstance(event, h11.EndOfMessage) and self._request is not None:
                return self._outcome(self._request, None)
            # h11.Data: a body, dropped

    def _refusal(self, err: h11.RemoteProtocolError) -> Outcome:
        """The answer to a request h11 could not read."""
        reply: _Own
        if err.error_status_hint == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE:
            reply = _HEAD_TOO_LARGE if self._line_ended else _LINE_TOO_LONG
        elif err.error_status_hint == HTTPStatus.NOT_IMPLEMENTED:
            reply = _NOT_IMPLEMENTED
        elif "Content-Length" in str(err):
            reply = _BAD_LENGTH
        elif "Host" in str(err):
            reply = _BAD_HOST
        else:
            reply = _BAD_REQUEST
        return Outcome(reply, head=self._start.startswith(b"HEAD "))

    def _refuse(self, request: h11.Request) -> _Own | None:
        """What a request's head alone is answered, if it is not served: too large (h11
        bounds only a head still incomplete), another server's ``Host``, a body too
        large."""
        if len(request.method) + len(request.target) + 10 > MAX_HEAD:
            return _LINE_TOO_LONG
        head = self._received - len(self._h11.trailing_data[0])
        if head > MAX_HEAD or len(request.headers) > MAX_HEADERS:
            return _HEAD_TOO_LARGE
        try:
            target = urlsplit(request.target.decode("latin-1"))
        except ValueError:  # "//[x/": a bracket urlsplit cannot read as a host
            return _BAD_REQUEST
        # An absolute target's authority, not Host, names the server (RFC 9112 §3.2.2):
        # both must be this one.
        named = (("Host", _header(request, b"host")), ("target", target.netloc or None))
        for named_by, host in named if target.scheme else named[:1]:
            if not self._hosts.allows(host):
                self._hosts.refused(host or "", named_by)
                return _MISDIRECTED
        length = _header(request, b"content-length")
        if length is not None and int(length) > MAX_BODY:  # h11 checked its digits
            return _TOO_LARGE
        return None

    def _body_coming(self, request: h11.Request) -> bool:
        """Whether the body follows the head unasked, ``Content-Length`` bytes: not
        when it is chunked (never read) or waits for a ``100 Continue`` (never sent)."""
        if _header(request, b"transfer-encoding") is not None:
            return False
        return not self._h11.they_are_waiting_for_100_continue

    def _outcome(self, request: h11.Request, refused: _Own | None) -> Outcome | Ask:
        method = request.method.decode("ascii")
        version = "1.0" if request.http_version == b"1.0" else "1.1"
        head = method == "HEAD"
        if refused is not None:
            return Outcome(refused, version, head)
        if method not in ALLOWED_METHODS:
            return Outcome(_NOT_ALLOWED, version, head)
        path = unquote(urlsplit(request.target.decode("latin-1")).path)  # read in _refuse
        return Ask(path, version, head)
