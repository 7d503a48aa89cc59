"""zread sessions as Locust users: :class:`ZreadUser`, each running its sessions one after another.

Owns: :class:`ZreadUser`, a Locust ``User`` (abstract: a locustfile subclasses it) that
runs zread sessions until it stops, answering their gates with :meth:`ZreadUser.answer`
(the :class:`~simulator.tools.client.ReferenceClient`'s unless overridden), in one of two
modes:

- ``inprocess`` (default): :attr:`ZreadUser.side_by_side` sessions at once, each a
  :class:`~simulator.core.session.Session` on the process's one timer heap
  (:mod:`simulator.locust_user.inprocess`), the next begun when one ends; the lines a
  session writes are read back as a client reads them, most of them by their envelope
  (:attr:`ZreadUser.check_every`).
- ``process``: the real ``zread`` console script of this environment (else
  ``python -m simulator``), ``COMMAND --stdio ARGS --scenario S --seed N --speed X``, over
  its pipes (``gevent.subprocess``, :func:`simulator.locust_user.drive.run_process`),
  one at a time.

What it tells Locust (``environment.events.request``): ``lateness`` named after the
timer's trigger (how late it fired against its schedule, in ms; a process reports its
timers together, as ``process timers``), ``command`` named after the command's type (from
sending it to the next event), ``session`` named after the zread command (from start to
``done:true``). A session fails (the ``session`` request's exception) on a client
mistake the session reports, a session that did not reach ``done:true``, a non-zero exit
code, or a transcript that fails the conformance check
(:class:`~simulator.tools.conformance.Checker`).

Memory, the one figure Locust does not keep: every process that runs users samples its
RSS with the number of live sessions (a greenlet, every :data:`SAMPLE_EVERY` s; in
process mode the children's RSS counts too); its figure is (RSS at the highest sample -
RSS before the first session) / sessions live at that sample. Workers send theirs to
the master (``runner.send_message``); :func:`memory_figure` gives the run's,
:func:`memory_line` says it (both of :mod:`simulator.locust_user.memory`, re-exported),
:func:`print_memory_at_exit` prints it after Locust's summary.

With :attr:`ZreadUser.sessions_per_user` set, each user stops after that many sessions,
and the run quits once every user has (workers tell the master). Locust's option
``--zread-sessions-per-user N`` (:data:`SESSIONS_OPTION`), given to the master (or the
one process), overrides it: Locust hands a master's own options to its workers with
every spawn, so the master's choice is every worker's, whatever a worker was started
with; so does ``--zread-side-by-side K`` (:data:`SIDE_BY_SIDE_OPTION`) for
:attr:`ZreadUser.side_by_side`.

Two things of Locust's are set once a process, each for its figures' sake: a worker reads
Locust's default options once (:func:`_read_defaults_once`), and what the garbage
collector tracks is frozen out of its walks at every memory sample (:func:`_sampler`).

Must not: be imported by any other module of the simulator: importing it imports
Locust, which monkey-patches the process (gevent). Nor change a session's behaviour
(timers, bytes and faults are the session's).
"""

from __future__ import annotations

import functools
import gc
import itertools
import random
import sys
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import gevent
import gevent.lock
from locust import User, constant, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, Runner, WorkerRunner
from locust.stats import CSV_STATS_INTERVAL_SEC
from locust.user.task import LOCUST_STATE_STOPPING

from simulator.locust_user.drive import Plan, Prepared, Report, run_process
from simulator.locust_user.inprocess import Fleet, warm_up
from simulator.locust_user.memory import (
    CHILDREN,
    Memory,
    memory_figure,
    memory_line,
    memory_of,
    rss_with_children,
)
from simulator.tools.client import ReferenceClient

if TYPE_CHECKING:
    from locust.env import Environment
    from locust.rpc.protocol import Message

__all__ = [
    "SAMPLE_EVERY",
    "SEEDS_PER_WORKER",
    "SESSIONS_OPTION",
    "SIDE_BY_SIDE_OPTION",
    "SessionFailed",
    "ZreadUser",
    "memory_figure",
    "memory_line",
    "print_memory_at_exit",
]

_SHARING = gevent.lock.Semaphore()
"""Held while the first user of a class builds what its users share."""
SAMPLE_EVERY = 0.1
"""Seconds between two samples of RSS and live sessions."""
SESSIONS_OPTION = "--zread-sessions-per-user"
"""Locust's option that overrides :attr:`ZreadUser.sessions_per_user` (the master's
reaches its workers)."""
SIDE_BY_SIDE_OPTION = "--zread-side-by-side"
"""Locust's option that overrides :attr:`ZreadUser.side_by_side` (the master's reaches
its workers)."""
SEEDS_PER_WORKER = 1_000_000
"""Worker i counts its seeds from ``first_seed + i * SEEDS_PER_WORKER``."""


class SessionFailed(Exception):
    """Why a session failed: the ``session`` request's exception."""


# -- the memory figure --------------------------------------------------------------------

_DONE: weakref.WeakKeyDictionary[Environment, list[int]] = weakref.WeakKeyDictionary()


def print_memory_at_exit() -> None:
    """Print :func:`memory_line` on stdout when the run is over, after Locust's own
    summary (on the master or a single process; a worker has no summary)."""
    seen: list[Environment] = []

    def keep(environment: Environment, **_: Any) -> None:
        seen.append(environment)

    def show(**_: Any) -> None:
        if seen and not isinstance(seen[-1].runner, WorkerRunner):
            sys.stdout.write(memory_line(seen[-1]) + "\n")
            sys.stdout.flush()

    events.init.add_listener(keep)  # type: ignore[no-untyped-call]
    events.quit.add_listener(show)  # type: ignore[no-untyped-call]


def _on_init(environment: Environment, runner: Runner | None = None, **_: Any) -> None:
    if runner is None:
        return
    memory = memory_of(environment)
    if not isinstance(runner, WorkerRunner):

        def on_memory(environment: Environment, msg: Message, **_: Any) -> None:
            memory.parts[str(msg.node_id)] = (int(msg.data["added"]), int(msg.data["live"]))

        def on_done(environment: Environment, msg: Message, **_: Any) -> None:
            done = _DONE.setdefault(environment, [0])
            done[0] += int(msg.data)
            if done[0] >= runner.target_user_count > 0:
                # After the CSV writer's next round, so the files hold every session.
                gevent.spawn_later(CSV_STATS_INTERVAL_SEC + 0.25, runner.quit)

        runner.register_message("zread_memory", on_memory)
        runner.register_message("zread_done", on_done)
    if not isinstance(runner, MasterRunner):
        gevent.spawn(_sampler, runner, memory)


events.init.add_listener(_on_init)  # type: ignore[no-untyped-call]


def _read_defaults_once() -> None:
    """A Locust worker, at each spawn message of its master (every step of a ramp),
    builds and runs a parser of Locust's own options to read their defaults once for
    each of the master's options (``locust.runners.WorkerRunner.handle_message``): about
    a hundred times, 0.3 s in which no timer of the process fires. The defaults are the
    same every time in a process (no config file is read for them) and only looked
    into: they are read once."""
    from locust import argument_parser

    read = argument_parser.default_args_dict
    if not hasattr(read, "cache_info"):
        argument_parser.default_args_dict = functools.cache(read)


_read_defaults_once()


def _add_options(parser: Any, **_: Any) -> None:
    parser.add_argument(
        SESSIONS_OPTION,
        type=int,
        default=None,
        metavar="N",
        help="sessions each zread user runs before it stops (overrides sessions_per_user)",
        include_in_web_ui=False,
    )
    parser.add_argument(
        SIDE_BY_SIDE_OPTION,
        type=int,
        default=None,
        metavar="K",
        help="in-process sessions each zread user runs at once (overrides side_by_side)",
        include_in_web_ui=False,
    )


events.init_command_line_parser.add_listener(_add_options)  # type: ignore[no-untyped-call]


def _sampler(runner: Runner, memory: Memory) -> None:
    """Sample RSS and the live sessions for as long as the process runs; and each time
    move what the collector tracks out of its walks (``gc.freeze``). A session leaves no
    cycle behind (its objects are freed as their counts fall), but thousands of live
    ones are millions of objects, and a full collection walking them all (every few
    seconds, as sessions come and go) would hold every timer of the process 100 ms and
    more; frozen, each collection walks what is younger than a sample. What else leaves
    a cycle (a locustfile's own code) is not collected once frozen: a run lasts minutes."""
    while True:
        gevent.sleep(SAMPLE_EVERY)
        gc.freeze()
        _sample(runner, memory)


def _sample(runner: Runner | None, memory: Memory) -> None:
    """One sample; the master (or this runner) is told when the figure moved."""
    memory.sample(rss_with_children())
    figure = memory.own()
    if runner is not None and figure is not None and figure != memory.told:
        memory.told = figure
        runner.send_message("zread_memory", {"added": figure[0], "live": figure[1]})


# -- the user -------------------------------------------------------------------------------


class ZreadUser(User):
    """A Locust user that runs zread sessions: in process mode one a task iteration; in
    process, :attr:`side_by_side` at once in one task that lasts until the user stops
    (its sessions all reported, or a graceful stop's sessions run out). See the module
    docstring. Subclass it in a locustfile and set the class attributes."""

    abstract = True
    command: ClassVar[str] = "generate"
    args: ClassVar[tuple[str, ...]] = ("-y",)
    scenario: ClassVar[str] = "default"
    seed: ClassVar[int | None] = None
    """The seed of every session; None: the next of a counter the class shares, from
    :attr:`first_seed` (worker i from ``first_seed + i * SEEDS_PER_WORKER``)."""
    first_seed: ClassVar[int] = 0
    speed: ClassVar[float] = 1.0
    mode: ClassVar[str] = "inprocess"
    """``inprocess`` or ``process``."""
    wait_time = constant(0)
    sessions_per_user: ClassVar[int | None] = None
    """Sessions each user runs before it stops; None: until the run ends."""
    timeout: ClassVar[float] = 600.0
    """Seconds a session may take to reach done:true before it counts as failed."""
    side_by_side: ClassVar[int] = 1
    """In-process: the sessions this user runs at once (each ended one is followed by the
    next); Locust's cost of a user, a greenlet and its state (~10 KB), is paid once for
    them. A process-mode user runs one at a time."""
    check_every: ClassVar[int] = 50
    """In-process: one session in this many (those whose seed it divides) has every event
    decoded and judged against the chart in full; the others each event by its envelope,
    its vm decoded only if the answer looks at it (a 50-page event's vm costs more to
    decode than the session's step that wrote it). 1: every session in full. A process's
    events are always judged in full."""
    start_spread: ClassVar[float] = 1.0
    """Seconds over which a user's first session starts, at a random moment: Locust's
    dispatcher starts a second's worth of users at once (its spawn rate is per second),
    and sessions that all start in one turn of the loop would make the timers already
    due wait behind them. Spread, they start at the spawn rate. 0: at once."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.client = ReferenceClient(self.command)
        """The reference client of the session that began last (a fresh one each)."""
        self._started = 0

    def on_start(self) -> None:
        """Wait a random moment within :attr:`start_spread` before the first session."""
        if self.start_spread > 0:
            gevent.sleep(random.random() * self.start_spread)

    def answer(self, event: Mapping[str, Any]) -> bytes | None:
        """The command line (newline included) to send for ``event``, or None to send
        nothing: the reference client's answer unless overridden. ``event`` is a
        read-only mapping of the event (its vm decoded when first looked at). An answer
        that keeps a run's state on the user wants :attr:`side_by_side` 1: the sessions
        of a user side by side share it."""
        return self.client.answer(event)

    @classmethod
    def _shared(cls, environment: Environment) -> _Shared:
        """What the users of this class share in this process (made by the first, with
        a warm-up session, before any measured session: the RSS before is read then)."""
        shared = cls.__dict__.get("_zread_shared")
        if isinstance(shared, _Shared):
            return shared
        with _SHARING:  # the warm-up yields: the other users wait for it, not start theirs
            shared = cls.__dict__.get("_zread_shared")
            if isinstance(shared, _Shared):
                return shared
            runner = environment.runner
            index = getattr(runner, "worker_index", 0) or 0
            seeds = itertools.count(cls.first_seed + index * SEEDS_PER_WORKER)
            prepared = None
            if cls.mode != "process":
                prepared = Prepared.of(cls.command, cls.args, cls.scenario)
                warm_up(prepared, cls.command, cls.args, cls.scenario)
            gc.collect()  # what exists now lives as long as the process: out of the
            gc.freeze()  # collector's walks, as a long-running host keeps it
            memory = memory_of(environment)
            if memory.before is None:
                memory.before = rss_with_children()
            shared = _Shared(prepared, seeds)
            setattr(cls, "_zread_shared", shared)  # noqa: B010 (each subclass its own)
            return shared

    def _per_user(self) -> int | None:
        """The sessions this user runs: :data:`SESSIONS_OPTION` (on a worker, as the
        master was given it), else :attr:`sessions_per_user`."""
        given = getattr(self.environment.parsed_options, "zread_sessions_per_user", None)
        return self.sessions_per_user if given is None else int(given)

    @task
    def session(self) -> None:
        """The user's sessions, reported to Locust: one process at a time, or
        :attr:`side_by_side` in-process sessions at once until the user stops."""
        shared = self._shared(self.environment)
        if shared.prepared is None:
            self._one_process(shared)
        else:
            self._in_process(shared, shared.prepared)

    def _side_by_side(self) -> int:
        """The sessions this user runs at once: :data:`SIDE_BY_SIDE_OPTION` (on a
        worker, as the master was given it), else :attr:`side_by_side`."""
        given = getattr(self.environment.parsed_options, "zread_side_by_side", None)
        return max(1, self.side_by_side if given is None else int(given))

    def _may_start(self) -> bool:
        """Another session may begin: within :attr:`sessions_per_user`, and not while
        Locust stops the user gracefully (``--stop-timeout``, a shape ramping down: it
        ends the sessions running, then the user)."""
        if self._state == LOCUST_STATE_STOPPING:
            return False
        per_user = self._per_user()
        return per_user is None or self._started < per_user

    def _one_process(self, shared: _Shared) -> None:
        if self._state == LOCUST_STATE_STOPPING:
            return  # a graceful stop: no new process
        if not self._may_start():
            self._stopped()  # it ran its sessions_per_user (0: it ran none)
        seed = self._next_seed(shared)
        report = Report(self.command, self._fire)
        memory = memory_of(self.environment)
        memory.live += 1
        try:
            run_process(self._plan(), seed, report)
        finally:
            self._left(memory)
        report.session(self.command)

    def _in_process(self, shared: _Shared, prepared: Prepared) -> None:
        memory = memory_of(self.environment)
        fleet = Fleet(prepared)
        try:
            while True:
                while len(fleet.running) < self._side_by_side() and self._may_start():
                    seed = self._next_seed(shared)
                    every = max(1, self.check_every)
                    report = Report(self.command, self._fire, in_full=seed % every == 0)
                    fleet.start(self._plan(), seed, report)
                    memory.live += 1
                if not fleet.running:
                    if self._state == LOCUST_STATE_STOPPING:
                        return  # a graceful stop: Locust ends the user after its task
                    self._stopped()
                report = fleet.next_ended()
                self._left(memory)
                report.session(self.command)
        finally:
            memory.live -= len(fleet.running)
            fleet.close()

    def _plan(self) -> Plan:
        """A session's plan, with a reference client of its own: the answer's, or, for an
        answer that overrides it, the one ``super().answer`` (``self.client``) finds while
        it answers this session's events (a user's sessions side by side each keep their
        own retries)."""
        client = self.client = ReferenceClient(self.command)
        answer = client.answer
        if type(self).answer is not ZreadUser.answer:
            overridden = self.answer

            def answer(event: Mapping[str, Any]) -> bytes | None:
                self.client = client
                return overridden(event)

        plan = Plan(self.command, self.args, self.scenario, self.speed, self.timeout, answer)
        plan.children = CHILDREN
        return plan

    def _next_seed(self, shared: _Shared) -> int:
        """The seed of the session about to begin (it counts as begun)."""
        self._started += 1
        return self.seed if self.seed is not None else next(shared.seeds)

    def _left(self, memory: Memory) -> None:
        """A session is over: the memory is sampled with it still live, then it is not."""
        try:
            _sample(self.environment.runner, memory)
        finally:
            memory.live -= 1

    def _stopped(self) -> NoReturn:
        """This user ran its ``sessions_per_user``: the run is told (it quits once every
        user has), and the user stops."""
        runner = self.environment.runner
        if isinstance(runner, WorkerRunner):
            runner._send_stats()  # the master counts this user's figures before it quits
        if runner is not None:
            runner.send_message("zread_done", 1)
        raise StopUser

    def _fire(self, kind: str, name: str, ms: float, error: str) -> None:
        self.environment.events.request.fire(
            request_type=kind,
            name=name,
            response_time=ms,
            response_length=0,
            exception=SessionFailed(error) if error else None,
            context={},
        )


@dataclass
class _Shared:
    """What the users of one class share in this process."""

    prepared: Prepared | None
    """None in process mode."""
    seeds: Iterator[int]
