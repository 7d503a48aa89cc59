"""The simulator's admin API over the control channel: the handlers a peer can call.

Owns: the request handlers a control peer can call (what WireMock's admin API and
Toxiproxy's HTTP API are to those tools), and the simulator's side of login's
``authorize`` request. The process that offers them is
:mod:`simulator.runners.controlled`.

Subtypes (``{"type":"control_request","request_id":ID,"request":{"subtype":S,...}}``):

- ``snapshot``: command, state, vm, waiting_for, pending timers, clock, speed, paused.
- ``violations``: the client's mistakes so far as ``Session.violations`` keeps them
  (the first 10, the most recent 100), each as plain JSON with its line redacted
  (``JournalEntry.as_json``), and ``total``, how many there were.
- ``inject``: ``{"failure": {...}}`` (a ``[[failures]]`` entry), ``{"fault": {...}}``
  (a ``[[faults]]`` entry) or ``{"http": {...}}`` (a ``[[faults.http]]`` entry, for the
  wiki server), answered with its id. A fault with no point of its own fires at the
  next event.
- ``faults``: every failure and fault still to come (domain, transport, HTTP), the
  scenario's and the injected ones, as their plans list them (id, kind, source,
  where, left, fired).
- ``remove``: ``{"id": ID}`` removes one; ``reset`` removes them all, the scenario's
  included. Both walk the same list of fault sources (:func:`sources`).
- ``set_timing``: ``{"name": N, "timing": {...}}`` (as in a scenario's ``[timing]``)
  replaces one delay of the chart from now on; armed timers keep their deadline.
- ``set_speed``: ``{"speed": X}``; pending timers keep the share of their wait done.
- ``pause`` / ``resume``: freeze and release the timers.
- ``quit``: answered, then as the client's ``quit``.

On ``--control stdio`` nothing of the channel follows ``done:true``: as that event goes
out, the peer's requests still being handled are answered with :data:`SESSION_ENDED`
and ours withdrawn (:meth:`Peers.produced`). A socket peer's stream is its own: what it
sent is answered until the process closes the connection.

No API key is answered: every answer and every error text a handler gives goes
through the session's registry of keys (``Session.secrets``,
:mod:`simulator.core.secrets`), so a key is hidden by name in any spelling and, once
known, by value wherever it occurs (a violation's line, a vm, an error that quotes a
request). A peer's :class:`~simulator.control.Conn` made by :func:`connect` (stdio's,
and each socket peer's) writes every frame through it too, so what the Conn itself
echoes (a ``request_id``, an unknown subtype) is redacted as well.

``--control stdio`` shares stdin and stdout with the commands and events: control
frames are whole lines, never inside an event, and never change an event's bytes.
``--control unix:PATH`` listens on a Unix socket created with mode 0600.

When a peer is attached and the world says ``[world.login] approver = "control"``,
the peer plays the user in the browser: the simulator sends ``authorize`` with the
authorize_url and waits; ``{"approve": true}`` continues, anything else fails the
login; when auth_timeout runs out first the request is cancelled
(``control_cancel_request``) and login reports the timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from simulator.control import Conn, ControlError, Handler
from simulator.core.effects import AskApproval, CancelApproval
from simulator.core.keynames import UNDERSCORE_K
from simulator.core.outcome import Outcome
from simulator.core.secrets import Secrets
from simulator.core.session import Session
from simulator.runners.aio import Channel
from simulator.runners.hooks import Live, Observer
from simulator.scenario.failures import Failure
from simulator.scenario.faults import Fault
from simulator.scenario.timing import Delay


def connect(write: Callable[[bytes], object], channel: Channel) -> Conn:
    """A peer's :class:`~simulator.control.Conn` writing through ``write``, every frame
    redacted with the session's keys, with the admin handlers installed."""
    secrets = channel.session.secrets

    def send(frame: bytes) -> None:
        write(secrets.redact_line(frame))

    conn = Conn(send)
    install(conn, channel)
    return conn


ENTRIES = ("failure", "fault", "http")
"""What ``inject`` takes, one at a time."""


def _declared(failure: Failure, command: str | None) -> Failure:
    """``failure``, when its point is one ``command`` declares (None: any command's): a
    misspelt point, or another command's, would never fail; ValueError naming it
    otherwise."""
    from statecharts import failure_points

    owner = failure_points().get(failure.point)
    if owner is None:
        raise ValueError(f"inject: point: {failure.point!r} is not one of the allowed values")
    if command is not None and owner != command:
        raise ValueError(
            f"inject: point: {failure.point!r} is a failure point of {owner}, "
            f"not of {command}: it would never fail"
        )
    return failure


def _shown(fault: Fault, session: object) -> Fault:
    """``fault``, when its ``on_state`` is a state the session's command shows (a state
    it never shows would keep the fault waiting for ever); ValueError otherwise."""
    if fault.on_state and isinstance(session, Session):
        chart = session.runtime.chart
        shown = sorted({spec.vm_state for spec in chart.states.values()})
        if fault.on_state not in shown:
            raise ValueError(
                f"inject: on_state: {fault.on_state!r} is not a state {chart.name} shows "
                f"({', '.join(shown)}): the fault would never fire"
            )
    return fault


class FaultSource(Protocol):
    """A plan of things that go wrong, as the admin API lists, removes and clears them:
    each entry plain data with a unique ``id``."""

    def entries(self) -> list[dict[str, Any]]: ...

    def remove(self, entry_id: str) -> bool: ...

    def clear(self) -> None: ...


def sources(channel: Channel) -> list[FaultSource]:
    """The fault sources of ``channel``, in the order ``faults`` lists them: the
    session's domain failures (a replay has none), the transport faults, then the HTTP
    faults of the wiki server its host starts. A new kind of fault joins here."""
    found: list[FaultSource] = []
    if isinstance(channel.session, Session):
        found.append(channel.session.runtime.failures)
    found.append(channel.stage.faults)
    found.append(channel.host.http_faults)
    return found


def _inject(channel: Channel, request: dict[str, Any]) -> dict[str, Any]:
    """``inject``'s answer: the entry's kind and id; ValueError when it is no entry, or
    more than one (a second would be dropped without a word)."""
    given = [key for key in ENTRIES if key in request]
    if len(given) > 1:
        raise ValueError(f"inject takes one entry at a time, not {' and '.join(given)}")
    session = channel.session
    command = session.runtime.chart.name if isinstance(session, Session) else None
    try:
        if "failure" in request:
            failure = _declared(msgspec.convert(request["failure"], Failure), command)
            if not isinstance(session, Session):
                session.inject(failure)  # a replay's refusal, in its words
                raise ValueError("inject: this session takes no failure")
            return {"injected": "failure", "id": session.runtime.inject(failure)}
        if "fault" in request:
            fault = _shown(msgspec.convert(request["fault"], Fault), session)
            now = not (fault.after_event or fault.on_state or fault.probability < 1.0)
            return {"injected": "fault", "id": channel.stage.faults.add(fault, now=now)}
        if "http" in request:
            from simulator.scenario.httpfaults import HttpFault

            http = msgspec.convert(request["http"], HttpFault)
            return {"injected": "http", "id": channel.host.http_faults.add(http)}
    except msgspec.ValidationError as err:
        from simulator.formats.bounds import in_words

        raise ValueError(f"inject: {in_words(err)}") from None
    raise ValueError('inject takes {"failure": {...}}, {"fault": {...}} or {"http": {...}}')


def _set_timing(channel: Channel, request: dict[str, Any]) -> dict[str, Any]:
    """``set_timing``'s answer: the delay now in place; ValueError naming what is wrong."""
    name, timing = request.get("name"), request.get("timing")
    if not isinstance(name, str) or not isinstance(timing, dict):
        raise ValueError('set_timing takes {"name": "...", "timing": {...}}')
    session = channel.session
    if not isinstance(session, Session):
        raise ValueError("set_timing: a replay plays its recording at its recorded times")
    try:
        session.runtime.known_timing(name)
        delay = msgspec.convert(timing, Delay)
    except msgspec.ValidationError as err:
        from simulator.formats.bounds import in_words

        raise ValueError(f"set_timing: timing of {name!r}: {in_words(err)}") from None
    except ValueError as err:  # the name
        raise ValueError(f"set_timing: {err}") from None
    session.runtime.set_timing(name, delay)
    return {"name": name, "timing": _plain(msgspec.to_builtins(delay))}


def _remove(channel: Channel, request: dict[str, Any]) -> dict[str, Any]:
    """``remove``'s answer: the id removed; ValueError when no source has it."""
    entry_id = request.get("id")
    if not isinstance(entry_id, str):
        raise ValueError('remove takes {"id": "..."}, an id the faults request lists')
    if not any(source.remove(entry_id) for source in sources(channel)):
        shown = entry_id if len(entry_id) <= 40 else entry_id[:39] + "…"
        raise ValueError(f"remove: no failure or fault has the id {shown!r}")
    return {"removed": entry_id}


def _set_speed(channel: Channel, request: dict[str, Any]) -> dict[str, Any]:
    """``set_speed``'s answer: the speed now; ValueError for what is no number >= 0."""
    speed = request.get("speed")
    if isinstance(speed, bool) or not isinstance(speed, int | float) or speed < 0:
        shown = msgspec.json.encode(speed).decode()
        shown = shown if len(shown) <= 40 else shown[:39] + "…"
        raise ValueError(f"set_speed takes a number >= 0, got {shown}")
    channel.set_speed(float(speed))
    return {"speed": channel.session.speed}


def _plain(value: Any) -> Any:
    """A delay as plain JSON: the keys given (no null), a lognormal's max only when
    it has one (JSON has no infinity)."""
    if isinstance(value, dict):
        return {
            key: _plain(item)
            for key, item in value.items()
            if item is not None and item != float("inf")
        }
    return value


class _Refused(Exception):
    """A handler's error, its text redacted."""


def _unmarked(secrets: Secrets, result: Any) -> bool:
    """Whether ``result``, as JSON text, holds no backslash, no ``_k`` in any case and
    none of the values ``secrets`` looks for: then :meth:`Secrets.redact` leaves it as
    it is (a name that ends in ``api_key`` holds ``_k``, and a value a string holds
    shows in the text as it is or escaped), and its walk of every string is spared. A
    result msgspec does not write is not."""
    try:
        text = msgspec.json.encode(result)
    except Exception:  # a value of another kind, a lone surrogate: the walk judges
        return False
    if b"\\" in text or UNDERSCORE_K.search(text) is not None:
        return False
    return not any(value.encode() in text for value in secrets.values)


def _redacting(secrets: Secrets, handler: Handler) -> Handler:
    """``handler`` whose answer and error text go through ``secrets``."""

    async def answer(request: dict[str, Any]) -> Any:
        try:
            result = await handler(request)
        except Exception as err:  # answered as an error response, its text redacted
            raise _Refused(secrets.redact_text(str(err) or type(err).__name__)) from None
        return result if _unmarked(secrets, result) else secrets.redact(result)

    return answer


def install(conn: Conn, channel: Channel) -> None:
    """Register the admin handlers for ``channel`` on ``conn``, each answer redacted
    with the session's keys."""

    async def snapshot(_: dict[str, Any]) -> dict[str, Any]:
        channel.tick()  # the session as it stands now
        return {**channel.session.snapshot(), "paused": channel.paused}

    async def violations(_: dict[str, Any]) -> dict[str, Any]:
        kept = [entry.as_json() for entry in channel.session.violations]
        return {"violations": kept, "total": channel.session.transcript.total_violations}

    async def inject(request: dict[str, Any]) -> dict[str, Any]:
        return _inject(channel, request)

    async def faults(_: dict[str, Any]) -> dict[str, Any]:
        return {"faults": [entry for source in sources(channel) for entry in source.entries()]}

    async def remove(request: dict[str, Any]) -> dict[str, Any]:
        return _remove(channel, request)

    async def reset(_: dict[str, Any]) -> dict[str, Any]:
        removed: list[str] = []
        for source in sources(channel):
            removed += [entry["id"] for entry in source.entries()]
            source.clear()
        return {"removed": removed}

    async def set_timing(request: dict[str, Any]) -> dict[str, Any]:
        return _set_timing(channel, request)

    async def set_speed(request: dict[str, Any]) -> dict[str, Any]:
        return _set_speed(channel, request)

    async def pause(_: dict[str, Any]) -> dict[str, Any]:
        channel.pause()
        return {"paused": True, "clock": channel.session.now}

    async def resume(_: dict[str, Any]) -> dict[str, Any]:
        channel.resume()
        return {"paused": False, "clock": channel.session.now}

    async def quit_(_: dict[str, Any]) -> dict[str, Any]:
        # Answered first, quit just after: on stdout nothing may follow done:true.
        asyncio.get_running_loop().call_soon(channel.quit, "control-quit")
        return {"done": channel.session.done or not (channel.hung or channel.finished)}

    for subtype, handler in (
        ("snapshot", snapshot),
        ("violations", violations),
        ("inject", inject),
        ("faults", faults),
        ("remove", remove),
        ("reset", reset),
        ("set_timing", set_timing),
        ("set_speed", set_speed),
        ("pause", pause),
        ("resume", resume),
        ("quit", quit_),
    ):
        conn.set_handler(subtype, _redacting(channel.session.secrets, handler))


SESSION_ENDED = "control: the session ended before this request was answered"
"""The error response of a stdio peer's request still being handled when the session
ends (:meth:`Peers.produced`)."""


class Peers(Observer):
    """The control peers of one process, as its live session sees them
    (:class:`~simulator.runners.live.Peer`): the frames of ``--control stdio`` taken
    out of the client's stream, and login's ``authorize`` requests to them. As the
    session's observer it gives the stdio peer its last word before ``done:true``."""

    def __init__(self) -> None:
        self.conns: list[Conn] = []
        """The peers attached now (the newest last: it is asked to approve)."""
        self.stdio: Conn | None = None
        """The peer on the client's own stream (``--control stdio``), if there is one."""
        self._task: asyncio.Task[None] | None = None

    def frame(self, live: Live, line: bytes) -> bool:
        return self.stdio is not None and self.stdio.handle_frame(line)

    def effect(self, live: Live, effect: object) -> bool:
        if isinstance(effect, AskApproval) and self.conns:
            self._task = asyncio.get_running_loop().create_task(self._ask(live, effect))
            return True
        if isinstance(effect, CancelApproval):
            # The request is withdrawn at once: its control_cancel_request comes before
            # the event that ends login (nothing follows done), not when the task runs.
            for conn in self.conns:
                conn.withdraw()
            if self._task is not None:
                self._task.cancel()
            return True
        return False

    def produced(self, live: Live, outcome: Outcome) -> None:
        # The stdio peer shares stdout, where nothing follows done:true (FIDELITY 4):
        # what it waits for is settled now, before that event, and it writes no more.
        if outcome.done and self.stdio is not None:
            self.stdio.withdraw()
            self.stdio.abandon(SESSION_ENDED)
            self.stdio.close()

    def ended(self, live: Live, code: int | None, how: str) -> None:
        if self.stdio is not None:  # an exit, the reader gone: nothing more either
            self.stdio.close()

    async def settle(self) -> None:
        """Let a cancelled request's task end before the channel closes."""
        if self._task is not None:
            self._task.cancel()  # a no-op when it is done; the session is over either way
            await asyncio.gather(self._task, return_exceptions=True)

    async def _ask(self, live: Live, effect: AskApproval) -> None:
        request = {"authorize_url": effect.url, "auth_timeout": effect.timeout_ns}
        try:
            answer = await self.conns[-1].request("authorize", request)
        except ControlError as err:
            live.deliver("_answered", approve=False, reason=err.message)
            return
        approve = isinstance(answer, dict) and answer.get("approve") is True
        live.deliver("_answered", approve=approve, reason="")
