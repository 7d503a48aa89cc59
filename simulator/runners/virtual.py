"""A session in virtual time, for tests: a 15-second generate finishes in milliseconds.

Owns: :class:`SimSession`, the in-process runner behind the ``zread_sim`` fixture and
usable without pytest. It keeps the decoded events, a transcript of every line in both
directions with its virtual time (byte for byte; printed, API keys are redacted: see
:mod:`simulator.core.secrets`), and the client's mistakes (``violations``). Time
moves only when the test waits: :meth:`SimSession.wait_for` fires the session's timers
in order until an event satisfies its predicate.

Effects are carried out as the process would (the browse server is a real HTTP server
on 127.0.0.1), so a test can fetch ``vm.url`` while the session serves. Started with
``peer=True``, a session has a control peer as ``--control`` gives it: the test is
that peer, and answers login's approval request (:attr:`SimSession.approval`) with
:meth:`SimSession.answer_approval`.

Must not: sleep or read the wall clock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import msgspec

from simulator.core.effects import AskApproval, CancelApproval
from simulator.core.entries import JournalEntry
from simulator.core.interface import SessionLike
from simulator.core.outcome import Outcome
from simulator.core.secrets import redact_line
from simulator.core.session import Session
from simulator.errors import MisuseError
from simulator.hosts.effects import EffectHost
from simulator.scenario import Scenario

_decode_event: Callable[[bytes], Any] = msgspec.json.Decoder().decode
"""An event line as the dict a test reads (msgspec: ~3x the stdlib's ``json.loads``
on an event of 16 pages, and the same dicts, lists, strings and numbers)."""

__all__ = ["SimSession", "SimulationError", "TranscriptLine", "ZreadSim", "start"]

Event = dict[str, Any]

S = TypeVar("S", bound=SessionLike)
"""The session a :class:`SimSession` drives: any :class:`SessionLike` (``start`` makes a
chart's :class:`~simulator.core.session.Session`)."""

DEFAULT_HORIZON = 24 * 3600.0
"""How much virtual time a wait may spend before it calls the session stuck."""


class SimulationError(MisuseError, AssertionError):
    """A wait that cannot be satisfied: the session ended, stalled or ran too long.

    The test expected what the session cannot give, so it fails as an assertion."""


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    """One line on the wire: ``"in"`` from the client, ``"out"`` from the simulator."""

    direction: Literal["in", "out"]
    time: float
    data: bytes
    """The line byte for byte, without its newline."""

    def __repr__(self) -> str:
        """As the dataclass writes it, with any API key's value redacted."""
        return (
            f"TranscriptLine(direction={self.direction!r}, time={self.time!r}, "
            f"data={redact_line(self.data)!r})"
        )


class SimSession(Generic[S]):
    """One simulated zread session driven by a test, in virtual time."""

    def __init__(
        self, session: S, *, effects: EffectHost | None = None, peer: bool = False
    ) -> None:
        self._session = session
        self._effects = effects or EffectHost()
        session.peer_attached = peer
        self.approval: dict[str, Any] | None = None
        """The approval request a control peer has to answer now (login, with a world
        whose ``login.approver`` is ``"control"``): ``authorize_url`` and
        ``auth_timeout`` (nanoseconds), as the ``authorize`` control request carries
        them; None when none is pending."""
        self._lines: list[bytes] = []  # every event line so far
        self._decoded: list[Event | None] = []  # each decoded once asked for
        self._done: list[bool] = []
        """Whether each event is the done:true one, as the session's outcome says:
        :meth:`wait_done` reads it without decoding the events it passes."""
        self.transcript: list[TranscriptLine] = []
        """Every line both ways, in order: the test's record, kept whole for as long as
        the test keeps this object (the session itself keeps a bounded few)."""
        self._cursor = 0
        self._stdin_closed = False
        self._take(session.start())

    # -- what a test reads ---------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        """Every event so far, decoded: the dicts the process would print. (A wait
        decodes only what it reads: this decodes the rest.)"""
        decoded = self._decoded
        for n, event in enumerate(decoded):
            if event is None:
                decoded[n] = _decode_event(self._lines[n])
        return decoded  # type: ignore[return-value]  # (none is None now)

    @property
    def session(self) -> S:
        """The sans-I/O session underneath."""
        return self._session

    @property
    def now(self) -> float:
        """Virtual seconds since the session started."""
        return self._session.now

    @property
    def done(self) -> bool:
        return self._session.done

    @property
    def last(self) -> Event:
        """The latest event."""
        if not self._lines:
            raise IndexError("no event yet")
        return self._event(len(self._lines) - 1)

    @property
    def vm(self) -> dict[str, Any]:
        """The latest event's vm."""
        return dict(self.last["vm"])

    @property
    def waiting_for(self) -> list[str]:
        """The latest event's waiting_for."""
        return list(self.last["waiting_for"])

    @property
    def violations(self) -> list[JournalEntry]:
        """The client's mistakes: commands not in waiting_for, bad JSON or params, and
        anything sent after done. ``assert not session.violations`` in a client test.

        As the session keeps them (:mod:`simulator.core.transcript`): the first 10 and
        the most recent 100, oldest first; ``session.transcript.total_violations``
        counts them all. :attr:`transcript` and :attr:`events`, the test's own record,
        keep everything."""
        return self._session.violations

    # -- what a test does ----------------------------------------------------------

    def send(self, type: str, **params: Any) -> list[Event]:
        """Send ``{"type": type, "params": params}``; the events it answers at once."""
        line = json.dumps({"type": type, "params": params}, separators=(",", ":"))
        return self.send_line(line)

    def send_line(self, line: bytes | str) -> list[Event]:
        """Send one raw line (without its newline), as a client would write it."""
        data = line.encode("utf-8") if isinstance(line, str) else line
        if self._stdin_closed:
            raise SimulationError(self._why("stdin is closed (close_stdin)"))
        self.transcript.append(TranscriptLine("in", self.now, data))
        return self._take(self._session.feed(data))

    def close_stdin(self) -> list[Event]:
        """End of input: nothing more can be sent, and, as with zread, the session goes
        on (timers fire as the test waits); :meth:`quit` ends it."""
        self._stdin_closed = True
        return []

    def quit(self) -> list[Event]:
        """End the session as SIGTERM ends the process: the final ``done:true`` event."""
        return [] if self.done else self._take(self._session.quit())

    def answer_approval(self, approve: bool, reason: str = "") -> list[Event]:
        """Answer the pending approval request as the control peer; the events."""
        if self.approval is None:
            raise SimulationError(self._why("no approval request is pending"))
        self.approval = None
        return self._take(self._session.deliver("_answered", approve=approve, reason=reason))

    def advance(self, seconds: float) -> list[Event]:
        """Let ``seconds`` of virtual time pass; the events that fired meanwhile."""
        return self._take(self._session.advance(self.now + seconds))

    def wait_for(
        self, predicate: Callable[[Event], bool], *, horizon: float = DEFAULT_HORIZON
    ) -> Event:
        """The next event the test has not yet waited past that satisfies ``predicate``.

        Virtual time moves from timer to timer until one does. Raises
        :class:`SimulationError` if the session ends, stalls (nothing pending and the
        client's turn) or spends ``horizon`` virtual seconds first.
        """
        return self._wait(lambda n: predicate(self._event(n)), horizon)

    def wait_done(self, *, horizon: float = DEFAULT_HORIZON) -> Event:
        """Run until the ``done:true`` event; it."""
        return self._wait(self._is_done, horizon)

    def wait_state(self, state: str, *, horizon: float = DEFAULT_HORIZON) -> Event:
        """Run until an event whose vm.state is ``state``; it."""
        return self.wait_for(lambda event: event["vm"].get("state") == state, horizon=horizon)

    def _is_done(self, n: int) -> bool:
        return self._done[n]  # the last event of the call that ended the session

    def _wait(self, matches: Callable[[int], bool], horizon: float) -> Event:
        """The next event past the cursor whose index ``matches``, moving virtual time
        as :meth:`wait_for` says."""
        limit = self.now + horizon
        while True:
            while self._cursor < len(self._lines):
                n = self._cursor
                self._cursor += 1
                if matches(n):
                    return self._event(n)
            if self.done:
                raise SimulationError(self._why("the session ended (done:true)"))
            deadline = self._session.next_deadline()
            if deadline is None:
                raise SimulationError(self._why("the session is waiting for the client"))
            if deadline > limit:
                raise SimulationError(self._why(f"nothing matched within {horizon:g} s"))
            self._take(self._session.advance(deadline, limit=1), decoded=False)

    def close(self) -> None:
        """Quit if still running and release what the session holds (servers)."""
        if not self.done:
            self.quit()
        self._effects.close()

    def __enter__(self) -> SimSession[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inside --------------------------------------------------------------------

    def _take(self, outcome: Outcome, *, decoded: bool = True) -> list[Event]:
        """Perform ``outcome``'s effects and keep its events; them, decoded (none when
        not ``decoded``: a wait decodes what it reads)."""
        effects = outcome.effects
        if self._session.peer_attached and effects:
            effects = [effect for effect in effects if not self._as_peer(effect)]
        for effect, result in self._effects.perform_all(id(self), effects):
            self._take(self._session.resolve(effect, result), decoded=False)
        first, now = len(self._lines), self.now
        last = len(outcome) - 1 if outcome.done else -1
        for n, line in enumerate(outcome):
            self.transcript.append(TranscriptLine("out", now, line))
            self._lines.append(line)
            self._decoded.append(None)
            self._done.append(n == last)
        if not decoded:
            return []
        return [self._event(n) for n in range(first, len(self._lines))]

    def _event(self, n: int) -> Event:
        """Event ``n``, decoded (once)."""
        event = self._decoded[n]
        if event is None:
            event = self._decoded[n] = _decode_event(self._lines[n])
        return event

    def _as_peer(self, effect: object) -> bool:
        """Take the effects a control peer answers; True when ``effect`` was one."""
        if isinstance(effect, AskApproval):
            self.approval = {"authorize_url": effect.url, "auth_timeout": effect.timeout_ns}
            return True
        if isinstance(effect, CancelApproval):
            self.approval = None
            return True
        return False

    def _why(self, reason: str) -> str:
        last = self._event(len(self._lines) - 1) if self._lines else {}
        state = last.get("vm", {}).get("state", self._session.shown_state)
        return (
            f"{reason}: no new event matched; last state {state!r}, "
            f"waiting_for {last.get('waiting_for')}, at t={self.now:.3f}s"
        )


def start(
    command: str,
    *args: str,
    scenario: str | Scenario = "default",
    seed: int = 0,
    speed: float = 1.0,
    home: str | os.PathLike[str] | None = None,
    project: str | os.PathLike[str] | None = None,
    ignore_faults: bool = False,
    peer: bool = False,
) -> SimSession[Session]:
    """Start ``zread <command> *args --stdio`` in virtual time.

    ``args`` are zread's own flags (``"-y"``, ``"--draft", "resume"``, ...); ``scenario``
    a built-in name, a TOML path, or a loaded :class:`Scenario`. With ``home`` (the
    directory that plays HOME: ``home/.zread/config.yaml``...) and/or ``project`` (the
    directory whose ``.zread/wiki`` the wiki is written into), the session reads and
    writes zread's files there, as the process does; ``home`` alone is both. Without
    either, nothing is written anywhere.

    A scenario with transport faults (``[[faults]]``: an exit, a hang, noise on
    stdout...) is refused with a :class:`~simulator.scenario.ScenarioError` naming
    them: they happen to a process's streams, which a session in virtual time does not
    have (``zread_bin`` plays them). ``ignore_faults=True`` plays the scenario's events
    without them. ``peer=True``: the test is a control peer (see :class:`SimSession`).
    """
    from simulator.launch import build_session
    from simulator.scenario import ScenarioError, load_scenario

    if isinstance(scenario, str):
        scenario = load_scenario(scenario)
    if scenario.faults and not ignore_faults:
        kinds = ", ".join(sorted({fault.kind for fault in scenario.faults}))
        raise ScenarioError(
            f"scenario {scenario.name!r} has transport faults ({kinds}), which only a "
            "process plays: use zread_bin, or start(..., ignore_faults=True) for its "
            "events without them"
        )

    store = None
    where = project if project is not None else home
    if where is not None:
        from pathlib import Path

        from simulator.hosts.files import FileStore
        from simulator.hosts.places import check_places
        from statecharts import load_chart

        chart = load_chart(command)
        in_project = Path(where) if chart.uses_project else None
        home_path = Path(home) if home is not None else None
        check_places(home_path, in_project, chart.writes, home_named=home is not None)
        store = FileStore(home, in_project)
    session = build_session(command, args, scenario=scenario, seed=seed, speed=speed, home=store)
    effects = EffectHost.for_scenario(scenario, seed=seed, home=store)
    return SimSession(session, effects=effects, peer=peer)


class ZreadSim:
    """Starts in-process sessions for one test and closes them all at its end.

    The logic of the ``zread_sim`` fixture, usable without pytest::

        sim = ZreadSim(home=tmp / "home", project=tmp / "project")
        session = sim.start("generate", "-y", scenario="flaky-pages")
        session.wait_done()
        sim.close()

    With a ``home`` and a ``project``, what one session saves (config, login, a
    generated wiki, a draft) is in zread's files there, and is what the next one finds,
    as with zread on one machine; a test can read the files.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        project: str | os.PathLike[str] | None = None,
    ) -> None:
        self.home = home
        self.project = project
        self.sessions: list[SimSession[Session]] = []

    def start(
        self,
        command: str,
        *args: str,
        scenario: str | Scenario = "default",
        seed: int = 0,
        speed: float = 1.0,
        ignore_faults: bool = False,
        peer: bool = False,
    ) -> SimSession[Session]:
        """Start ``zread <command> *args --stdio`` in virtual time (see :func:`start`)."""
        session = start(
            command,
            *args,
            scenario=scenario,
            seed=seed,
            speed=speed,
            home=self.home,
            project=self.project,
            ignore_faults=ignore_faults,
            peer=peer,
        )
        self.sessions.append(session)
        return session

    def close(self) -> None:
        """Quit every session still running and stop their servers."""
        for session in self.sessions:
            session.close()
        self.sessions.clear()
