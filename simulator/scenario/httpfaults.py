"""HTTP faults: what goes wrong between the wiki server (``zread browse``) and its client.

Owns: :class:`HttpFault`, one ``[[faults.http]]`` entry of a scenario (or one fault a
control peer injects), and :class:`HttpFaultPlan`, which decides, request by request,
which fault a request meets, and keeps each fault's id and counts.

A fault applies to the requests whose ``method`` (``GET``, ``HEAD``, or ``*``: any) and
``path`` (an fnmatch glob of the path, percent-decoded, without the query: ``*``
matches any characters, ``/`` included) match. Of those, ``after = N`` lets the first N
pass and ``first = N`` takes the N after them (0: no cap); then ``probability`` draws
for each request it would take. Each fault has exactly one effect (WireMock's and
Toxiproxy's faults, in HTTP's terms):

- ``status``: that status (100-599) with ``body`` (text), instead of the answer;
- ``delay``: the answer, held for a delay drawn as a ``[timing]`` entry is;
- ``dribble``: the answer's headers, then its body in ``chunks`` pieces, one every
  ``over / chunks`` seconds;
- ``reset``: no answer; the connection is reset (an RST: SO_LINGER 0);
- ``close_after_headers``: the answer's status line and headers, then the connection
  closes, the body unsent.

Seconds are real seconds, whatever the session's speed: a client's HTTP timeouts run
on the wall clock. The faults are tried in the order they were added; the first that
takes a request decides it, and every fault whose method and path match counts the
request, whether it took it or not. Every draw (a probability, a delay) is made for
one (fault, matching request number) from the seed, so which requests a fault takes
does not depend on the other faults or on when requests come.

Must not: do I/O, sleep or read the clock; the server does what a fault says. The plan
is shared by the server's thread and the session's (a control peer adds faults): every
method takes its lock.
"""

# No `from __future__ import annotations` here: msgspec resolves these Structs'
# annotations when a scenario is first loaded, and each one left a string costs a
# compile and an eval at start-up.
import fnmatch
import math
import random
import threading
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from simulator.scenario.timing import Delay

KINDS: Final = ("status", "delay", "dribble", "reset", "close_after_headers")
"""The effects a fault can have; an entry names exactly one."""
METHODS: Final = ("*", "GET", "HEAD")
"""The methods a fault can name: the wiki answers GET and HEAD (``*``: either)."""
MAX_CHUNKS: Final = 10_000
"""The most pieces a ``dribble`` cuts a body into."""
_NO_BODY: Final = frozenset({204, 304})
"""Statuses whose answer has no body (and every 1xx)."""


class Dribble(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A body sent in ``chunks`` pieces spread over ``over`` seconds."""

    chunks: int
    over: float

    def __post_init__(self) -> None:
        if not 1 <= self.chunks <= MAX_CHUNKS:
            raise ValueError(f"chunks must be an integer 1-{MAX_CHUNKS}")
        if not 0 <= self.over < math.inf:
            raise ValueError("over must be a finite number of seconds >= 0")


class HttpFault(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """One HTTP fault: which requests (``method``, ``path``, ``after``, ``first``,
    ``probability``) and what they meet (exactly one of ``status``, ``delay``,
    ``dribble``, ``reset``, ``close_after_headers``)."""

    path: str = "*"
    method: str = "*"
    status: int | None = None
    body: str | None = None
    delay: Delay | None = None
    dribble: Dribble | None = None
    reset: bool = False
    close_after_headers: bool = False
    probability: float = 1.0
    first: int = 0
    after: int = 0

    def __post_init__(self) -> None:
        if not (self.path == "*" or self.path.startswith(("/", "*", "["))):
            raise ValueError("path must be a glob of request paths, starting with / (or *)")
        if self.method not in METHODS:
            raise ValueError("method must be GET or HEAD (the methods the wiki answers), or *")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.first < 0 or self.after < 0:
            raise ValueError("first and after must be >= 0")
        self._check_effect()

    def _check_effect(self) -> None:
        given = [kind for kind in KINDS if _given(self, kind)]
        if len(given) != 1:
            raise ValueError("an HTTP fault takes exactly one of " + ", ".join(KINDS))
        if self.status is not None and not 100 <= self.status <= 599:
            raise ValueError("status must be an integer 100-599")
        if self.body is not None and self.status is None:
            raise ValueError("body goes with status (the body of that answer)")
        if self.body and self.status is not None and not has_body(self.status):
            raise ValueError(f"a {self.status} answer has no body")

    @property
    def kind(self) -> str:
        """Its effect: one of :data:`KINDS`."""
        return next(kind for kind in KINDS if _given(self, kind))

    @property
    def where(self) -> str:
        """Which requests, as ``METHOD PATH`` (``* /api/*``)."""
        return f"{self.method} {self.path}"

    def covers(self, method: str, path: str) -> bool:
        """Whether a request of ``method`` for ``path`` is one of those it names."""
        if self.method != "*" and self.method != method:
            return False
        return fnmatch.fnmatchcase(path, self.path)


def _given(fault: HttpFault, kind: str) -> bool:
    value = getattr(fault, kind)
    return value is not None and value is not False


def has_body(status: int) -> bool:
    """Whether an answer with ``status`` carries a body (not 1xx, 204, 304)."""
    return status >= 200 and status not in _NO_BODY


class Firing(msgspec.Struct, frozen=True):
    """A fault a request meets: its id, the fault, and the delay drawn for it (seconds;
    0 but for ``delay``)."""

    id: str
    fault: HttpFault
    seconds: float = 0.0

    @property
    def kind(self) -> str:
        return self.fault.kind


class _Entry(msgspec.Struct):
    number: int
    fault: HttpFault
    seen: int = 0  # matching requests so far
    fired: int = 0  # requests it took

    @property
    def id(self) -> str:
        return f"http-{self.number}"


class HttpFaultPlan:
    """The HTTP faults of one session's server, and their counts; thread-safe.

    ``seed`` is the session's: every draw comes from it (see the module docstring).
    """

    def __init__(self, faults: Iterable[HttpFault] = (), *, seed: int | str = 0) -> None:
        self._lock = threading.Lock()
        self._entries: list[_Entry] = []
        self._added = 0
        self._scenario = 0
        self._seed = seed
        self._key: int | None = None
        for fault in faults:
            self.add(fault)
        self._scenario = self._added  # the ids up to it are the scenario's

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def add(self, fault: HttpFault) -> str:
        """Add ``fault`` after the others; its id (``http-N``, never given twice)."""
        if not isinstance(fault, HttpFault):
            raise TypeError(f"an HttpFault, not {type(fault).__name__}")
        with self._lock:
            self._added += 1
            entry = _Entry(self._added, fault)
            self._entries.append(entry)
            return entry.id

    def remove(self, fault_id: str) -> bool:
        """Remove the fault ``fault_id``; whether there was one."""
        with self._lock:
            kept = [entry for entry in self._entries if entry.id != fault_id]
            found = len(kept) != len(self._entries)
            self._entries = kept
            return found

    def clear(self) -> None:
        """Remove every fault (ids go on from where they were)."""
        with self._lock:
            self._entries = []

    def entries(self) -> list[dict[str, Any]]:
        """Each fault as plain JSON, in the order of their ids: ``id``, ``kind``,
        ``source`` (``scenario``: given when the plan was made; ``injected``: added
        since), ``where`` (``method`` and ``path``, and ``after``, ``first`` and
        ``probability`` when set), ``left`` (``after``: matching requests still to
        pass before it applies; ``first``: requests it may still take; each when set)
        and ``fired`` (requests it took)."""
        with self._lock:
            return [_described(entry, self._scenario) for entry in self._entries]

    def match(self, method: str, path: str) -> Firing | None:
        """The fault a request of ``method`` for ``path`` meets, or None; counts it."""
        chosen: Firing | None = None
        with self._lock:
            for entry in self._entries:
                fault = entry.fault
                if not fault.covers(method, path):
                    continue
                entry.seen += 1
                number = entry.seen
                if chosen is not None or number <= fault.after:
                    continue
                if fault.first and number > fault.after + fault.first:
                    continue
                chosen = self._fires(entry, number)
        return chosen

    def _fires(self, entry: _Entry, number: int) -> Firing | None:
        """The firing of ``entry`` at its ``number``-th matching request, after its
        probability's draw; None when the draw spares it."""
        fault = entry.fault
        rng: random.Random | None = None
        if fault.probability < 1.0 or fault.delay is not None:
            rng = random.Random(f"{self._keyed()}:{entry.id}:{number}")
        if rng is not None and fault.probability < 1.0 and rng.random() >= fault.probability:
            return None
        seconds = 0.0
        if fault.delay is not None and rng is not None:
            seconds = fault.delay.draw(rng)
        entry.fired += 1
        return Firing(entry.id, fault, seconds)

    def _keyed(self) -> int:
        if self._key is None:
            self._key = random.Random(f"zread-sim:{self._seed}:http").getrandbits(64)
        return self._key


def _described(entry: _Entry, scenario: int) -> dict[str, Any]:
    fault = entry.fault
    where: dict[str, Any] = {"method": fault.method, "path": fault.path}
    left: dict[str, int] = {}
    if fault.after:
        where["after"] = fault.after
        left["after"] = max(0, fault.after - entry.seen)
    if fault.first:
        where["first"] = fault.first
        left["first"] = min(fault.first, max(0, fault.after + fault.first - entry.seen))
    if fault.probability < 1.0:
        where["probability"] = fault.probability
    return {
        "id": entry.id,
        "kind": fault.kind,
        "source": "scenario" if entry.number <= scenario else "injected",
        "where": where,
        "left": left,
        "fired": entry.fired,
    }
