"""The wiki server's connections: one asyncio event loop, on a daemon thread.

Owns: :class:`HttpServer`, which serves a listening socket (bound by its caller) from
an event loop on a thread of its own: how many connections are open at once, each
connection's deadlines, moving its bytes, asking the site off the loop, and closing it
all. What a request is answered is :mod:`simulator.hosts.httprequest`'s (h11 reads it
there).

Why asyncio and h11. One thread per connection, a bounded number of them (http.server's
way, as this server had), ties a thread and a slot to each peer for as long as the peer
takes to send its request: 200 peers trickling a byte at a time held every slot, and
any other request waited for their deadlines (28 s, or for ever while they kept
coming back). On one event loop a waiting peer costs a few kilobytes and a timer, not a
thread, so a thousand can wait while others are answered at once. asyncio is the
standard library's; h11 is a small, typed, pure-Python HTTP/1.1 parser that does no
I/O, so it runs on this loop as it is, and the parsing is a well-kept library's rather
than written here. A server library on asyncio (aiohttp, uvicorn) would bring a
framework and dependencies of its own for a handful of GETs, and still need the
deadline and the ``Host`` rule written for it. This module and h11 are imported only
when a server starts: nothing else in the simulator imports asyncio or h11 for a
command that serves no wiki. The rules:

- Connections: at most :data:`MAX_CONNECTIONS` open at once, and never more than half
  the process's soft limit on open files (:func:`connection_cap`); past it the server
  accepts nothing until one ends: new connections wait in the listen backlog
  (:data:`LISTEN_BACKLOG`), past which the kernel drops their SYNs and the client
  retries.
- Deadlines: a connection has ``request_timeout`` seconds from being accepted to send
  its whole request, line, headers and body (a deadline, not an idle time: a peer
  trickling a byte at a time is dropped at it, unanswered, as a silent one is); the
  answer has as long again to be handed to the kernel (a peer that never reads is
  dropped too). Then the server ends its side and drops what the peer still sends, for
  :data:`LINGER` seconds and :data:`LINGER_BYTES` at most, so a peer still sending a
  body is not reset before it reads the answer.
- The site is asked off the loop: ``answer`` runs on one of at most :data:`WORKERS`
  daemon threads (started as they are needed), because a page can take seconds to
  render (markdown-it is pure Python, and slow on some inputs), while the loop goes on
  reading and answering the other connections; past :data:`WORKERS` requests being
  answered, the next waits for a thread. Requests for a path already being answered
  wait for that answer rather than asking again (a browser reloading a slow page does
  not fill the threads). The threads are daemons: a render under way holds neither
  :meth:`HttpServer.close` nor the process's exit; its answer, come too late, is
  dropped.
- An answer has ``request_timeout`` to be made too (a site that blocks): past it the
  connection is closed unanswered, and its thread is free once the site returns.
- Started, it is proven: the constructor connects to it and has one request answered
  (an ``OPTIONS``, which the server answers itself: no site asked, no fault met) and
  starts one worker, so a server that cannot accept (out of descriptors), answer or
  ask the site (out of threads) raises rather than being taken for one that serves
  (``OSError``, ``RuntimeError``; its listener closed, nothing of it left). Its event
  loop made half-way (out of descriptors for asyncio's self-pipe) leaves nothing to
  print at exit. Later, a worker that cannot be started leaves the job to those that
  run.
- :meth:`HttpServer.close` stops accepting, releases the port and ends every open
  connection at once, whatever it is waiting for (a render included), and returns
  within :data:`STOP_WAIT` seconds.
- Faults (:mod:`simulator.scenario.httpfaults`): with a plan, each GET or HEAD the
  site answers is matched against it (its method and path) once its answer is
  decided, and a fault it meets changes how the answer goes out: another status and
  body, the answer held, its body dribbled, the connection reset (SO_LINGER 0) or
  closed after the headers. ``on_fault`` is told of each (``method``, ``path``,
  ``fault``, ``kind``); what it raises is dropped.

Must not: write to stdout (the protocol's), log requests, let a traceback reach stderr
(a connection that fails is closed, quietly), hold a connection, a descriptor, a thread
or memory without bound, wait on a peer but by the loop, or call ``answer`` on the
loop (the GIL is shared with a thread rendering, but it is handed over every few
milliseconds, so the loop stays prompt).

Over 400 lines, for its docstring's rules: a connection's life, its faults and the
threads that answer it are one lifetime, which :meth:`HttpServer.close` ends at once,
and which the start's own request proves before anyone is told it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import itertools
import queue
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from simulator.hosts.httprequest import Ask, Exchange, Hosts, Outcome, Reply, asked, response
from simulator.scenario.httpfaults import Firing, HttpFaultPlan

if TYPE_CHECKING:
    from simulator.hosts.httprequest import Answer

FaultSeen = Callable[[dict[str, str]], None]
"""Told of each request that meets a fault: ``method``, ``path``, ``fault`` (its id),
``kind``."""


MAX_CONNECTIONS: Final = 1024
"""Connections open at once (at most half the soft ``RLIMIT_NOFILE``); the next wait."""
LISTEN_BACKLOG: Final = 512
"""The listen queue: connections the kernel holds, not yet accepted. 128 overflowed
when 200 clients connected at once, faster than the loop accepts: a few waited for
their SYN's retry (p99 ~1.1 s); 512 absorbs such a burst."""
LINGER: Final = 1.0
"""Seconds, after the answer, during which what the peer still sends is dropped."""
LINGER_BYTES: Final = 64 << 10
"""The most bytes dropped so after the answer."""
STOP_WAIT: Final = 2.0
"""How long close() waits for the loop to end every connection and stop."""
_READ: Final = 64 << 10
"""The most bytes taken from a connection at once."""
WORKERS: Final = 4
"""The most threads asking the site at once (each server's own)."""
_PROBE_STEP: Final = 0.01
"""How often the start's own request looks whether the server is starved."""


def connection_cap() -> int:
    """How many connections may be open at once: :data:`MAX_CONNECTIONS`, or half the
    process's soft limit on open files when that is lower (the rest is the session's)."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to respect
        return MAX_CONNECTIONS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, soft // 2))


_Job: TypeAlias = tuple[Callable[[], Reply], asyncio.AbstractEventLoop, asyncio.Future[Reply]]


class _Workers:
    """At most ``size`` daemon threads, started as they are needed, making replies off
    the loop (concurrent.futures' threads are not daemons: the interpreter's exit
    joins them, and so would wait for a render)."""

    def __init__(self, size: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._size = size
        self._name = name
        self._started = 0
        self._lock = threading.Lock()

    def run(self, make: Callable[[], Reply]) -> asyncio.Future[Reply]:
        """``make()`` on a thread; its reply, on the running loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        self._jobs.put((make, loop, future))
        if not self._idle.acquire(blocking=False):  # no thread is free: one more, if allowed
            with contextlib.suppress(RuntimeError):  # out of threads: those running take it
                self.start_one()
        return future

    def start_one(self) -> None:
        """One more thread, unless there are ``size``; RuntimeError when no thread can
        be started (the first is started with the server: one always runs)."""
        with self._lock:
            if self._started < self._size:
                name = f"{self._name}:worker{self._started + 1}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
                self._started += 1

    def stop(self) -> None:
        """End each thread once its job is done (one under way is not waited for)."""
        with self._lock:
            for _ in range(self._started):
                self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            make, loop, future = job
            made: Reply | Exception
            try:
                made = make()
            except Exception as err:  # not expected: asked() makes a 500 of it
                made = err
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(_settle, future, made)
            self._idle.release()


def _settle(future: asyncio.Future[Reply], made: Reply | Exception) -> None:
    """On the loop: ``future`` gets what a worker made (unless it is done already)."""
    if future.done():
        return
    if isinstance(made, Exception):
        future.set_exception(made)
    else:
        future.set_result(made)


class HttpServer:
    """Serves ``listener`` (bound, not yet listening) from a daemon thread until
    :meth:`close`. ``answer`` is asked for every GET and HEAD; ``request_timeout`` is
    each connection's deadline for its request (and again for its answer). Raises
    (``listener`` closed) when it cannot be proven to accept and answer: see the
    module docstring."""

    def __init__(
        self,
        listener: socket.socket,
        answer: Answer,
        *,
        request_timeout: float,
        name: str = "httpserver",
        faults: HttpFaultPlan | None = None,
        on_fault: FaultSeen | None = None,
    ) -> None:
        self._listener = listener
        self._answer = answer
        self.faults = faults
        """The faults requests meet (None: none); read at each request."""
        self._on_fault = on_fault
        self.request_timeout = request_timeout
        host, port = listener.getsockname()[:2]
        self._hosts = Hosts(str(host), int(port))
        self._tasks: set[asyncio.Task[None]] = set()
        self._asking: dict[str, asyncio.Future[Reply]] = {}  # the paths being answered
        self._workers = _Workers(WORKERS, name)
        self._cap = connection_cap()
        self._closing = False
        self._lock = threading.Lock()
        self._starved: OSError | None = None
        """The last accept that failed for want of descriptors or memory."""
        listener.setblocking(False)
        listener.listen(LISTEN_BACKLOG)
        try:
            self._loop = _new_loop()
        except BaseException:  # out of descriptors: nothing is left of it
            listener.close()
            raise
        try:
            self._loop.set_exception_handler(_quiet)
            self._stopped: asyncio.Future[None] = self._loop.create_future()
            self._workers.start_one()
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()
        except BaseException:  # out of threads: nothing is left of it
            self._workers.stop()
            self._loop.close()
            listener.close()
            raise
        try:
            self._prove()
        except BaseException:  # cannot accept, or answer: nothing is left of it either
            self.close()
            raise

    def _prove(self) -> None:
        """Connect to the server and have one request answered (an ``OPTIONS``, which
        the server answers itself: no site is asked, no fault met), then wait for that
        connection to end: a server that cannot accept or answer is never taken for
        one that serves. OSError (``EMFILE``: the probe's own socket, or the server's
        accept) or TimeoutError when it cannot."""
        deadline = time.monotonic() + self.request_timeout
        with socket.socket(self._listener.family, socket.SOCK_STREAM) as probe:
            probe.settimeout(self.request_timeout)  # a loaded machine: the whole deadline
            probe.connect(self._listener.getsockname())
            probe.sendall(b"OPTIONS * HTTP/1.0\r\n\r\n")
            probe.settimeout(_PROBE_STEP)  # then short steps, to see a starved server
            while True:
                if self._starved is not None:
                    raise self._starved
                try:
                    if not probe.recv(_READ):
                        break  # answered, and the server ended its side
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the wiki server answered no request") from None
        while self._tasks and time.monotonic() < deadline:  # the probe's connection ends
            time.sleep(0.001)

    @property
    def open_connections(self) -> int:
        """How many connections are open now (accepted, not yet ended)."""
        return len(self._tasks)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closing

    @property
    def cap(self) -> int:
        """How many connections may be open at once (:func:`connection_cap`)."""
        return self._cap

    def close(self) -> None:
        """Stop accepting, end every open connection and release the port; waits for
        that (:data:`STOP_WAIT` at most); later calls do nothing."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        with contextlib.suppress(RuntimeError):  # the loop has ended already
            self._loop.call_soon_threadsafe(self._stop)
        self._thread.join(STOP_WAIT)

    def _stop(self) -> None:
        if not self._stopped.done():
            self._stopped.set_result(None)

    # -- the loop's thread ------------------------------------------------------------

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            self._listener.close()
            loop.close()
            self._workers.stop()

    async def _main(self) -> None:
        accepting = asyncio.create_task(self._accept())
        await self._stopped
        accepting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await accepting
        self._listener.close()  # the port is free, and new connections are refused
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=STOP_WAIT)

    async def _accept(self) -> None:
        """Accept while fewer than the cap are open; past it, leave the next ones in
        the backlog until one ends."""
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(self._cap)
        while True:
            await slots.acquire()
            try:
                conn, _ = await loop.sock_accept(self._listener)
            except OSError as err:
                slots.release()
                if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._starved = err
                    await asyncio.sleep(0.1)  # out of descriptors: the backlog holds them
                continue
            task = loop.create_task(self._connection(conn))
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._ended, slots))

    def _ended(self, slots: asyncio.Semaphore, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        slots.release()

    async def _connection(self, conn: socket.socket) -> None:
        """One connection: its request within the deadline, one answer, the end."""
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=_READ)
            try:
                async with asyncio.timeout(self.request_timeout):
                    got = await self._read(reader)
            except TimeoutError:
                return  # the deadline: closed unanswered
            if got is None:
                return  # the peer ended its side before its request
            path = None  # the path the site is asked for, if it is
            if isinstance(got, Ask):
                path = got.path
                try:
                    async with asyncio.timeout(self.request_timeout):
                        got = got.outcome(await self._reply(path))
                except TimeoutError:
                    return  # a site that blocks: closed unanswered, as a peer too slow
            outcome = got
            writer.transport.set_write_buffer_limits(high=0)  # drain: all handed over
            firing = self._fault(outcome, path)
            if firing is None:
                await self._send(writer, outcome.data())
            elif not await self._faulted(firing, outcome, writer):
                return  # reset: the connection ends unanswered
            await self._linger(reader, writer)
        except Exception:  # the peer went away or never read its answer, or a fault
            pass  # of this layer: either way the connection ends, quietly
        finally:
            if writer is None:
                conn.close()
            else:
                writer.transport.abort()

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        """Hand ``data`` to the kernel within the deadline."""
        async with asyncio.timeout(self.request_timeout):
            writer.write(data)
            await writer.drain()

    async def _reply(self, path: str) -> Reply:
        """The site's reply for ``path``, made on a worker thread; a request for a path
        already being answered shares that answer."""
        shared = self._asking.get(path)
        if shared is None:
            shared = self._workers.run(functools.partial(asked, self._answer, path))
            self._asking[path] = shared
            shared.add_done_callback(lambda _: self._asking.pop(path, None))
        # shielded: a peer that goes away cancels its wait, not the others'
        return await asyncio.shield(shared)

    def _fault(self, outcome: Outcome, path: str | None) -> Firing | None:
        """The fault this request meets, if the site answered it and the plan says so;
        ``on_fault`` is told."""
        plan = self.faults
        if plan is None or path is None:
            return None
        method = "HEAD" if outcome.head else "GET"
        firing = plan.match(method, path)
        if firing is not None and self._on_fault is not None:
            seen = {"method": method, "path": path, "fault": firing.id, "kind": firing.kind}
            with contextlib.suppress(Exception):  # a journal's failure is not the peer's
                self._on_fault(seen)
        return firing

    async def _faulted(
        self, firing: Firing, outcome: Outcome, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer as ``firing`` says; False when the connection is to end at once
        (reset), True when it ends as an answered one does."""
        fault = firing.fault
        if fault.reset:
            sock = writer.get_extra_info("socket")
            if sock is not None:  # closed with SO_LINGER 0: an RST, not a FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        head = response(outcome.version, outcome.reply, head=True)
        if fault.status is not None:
            body = (fault.body or "").encode()
            await self._send(writer, status_answer(outcome, fault.status, body))
        elif fault.close_after_headers:
            await self._send(writer, head)
        elif fault.dribble is not None:
            body = b"" if outcome.head else outcome.reply.body
            await self._send(writer, head)
            parts = pieces(body, fault.dribble.chunks)  # fewer than asked for a short body
            pause = fault.dribble.over / max(1, len(parts))
            for piece in parts:
                await asyncio.sleep(pause)
                await self._send(writer, piece)
        else:  # delay
            await asyncio.sleep(firing.seconds)
            await self._send(writer, outcome.data())
        return True

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """End this side, then drop what the peer still sends for a while, so that a
        peer still sending is not reset before it reads the answer."""
        if writer.can_write_eof():
            writer.write_eof()
        left = LINGER_BYTES
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(min(LINGER, self.request_timeout)):
                while left > 0 and (chunk := await reader.read(_READ)):
                    left -= len(chunk)

    async def _read(self, reader: asyncio.StreamReader) -> Outcome | Ask | None:
        """Read one request: its answer, or what the site is to be asked; None when the
        peer hung up first."""
        exchange = Exchange(self._hosts)
        while not exchange.abandoned:
            outcome = exchange.receive(await reader.read(_READ))
            if outcome is not None:
                return outcome
        return None


def pieces(body: bytes, count: int) -> list[bytes]:
    """``body`` cut into ``count`` pieces as even as can be (fewer when it has fewer
    bytes; none when it is empty)."""
    count = min(count, len(body))
    bounds = [len(body) * i // count for i in range(count + 1)] if count else [0]
    return [body[start:end] for start, end in itertools.pairwise(bounds)]


@dataclass(frozen=True, slots=True)
class _FaultReply:
    """A fault's answer: its status, with its body as plain text."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def status_answer(outcome: Outcome, status: int, body: bytes) -> bytes:
    """A fault's answer: ``status`` (any 100-599) with ``body`` as plain text, in the
    request's version, as :func:`~simulator.hosts.httprequest.response` writes any."""
    return response(outcome.version, _FaultReply(status, body), head=outcome.head)


class _Loop(asyncio.SelectorEventLoop):
    """asyncio's selector loop, which counts as closed until it is whole: one whose
    making failed half-way (out of descriptors for its self-pipe) leaves its finalizer
    nothing to close, where asyncio's would print a traceback at exit."""

    _whole = False

    def __init__(self, selector: selectors.BaseSelector) -> None:
        super().__init__(selector)
        self._whole = True

    def is_closed(self) -> bool:
        return not self._whole or super().is_closed()


def _new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop; OSError (``EMFILE``) when it cannot be made, with nothing of
    it left open."""
    selector = selectors.DefaultSelector()
    try:
        return _Loop(selector)
    except BaseException:
        selector.close()
        raise


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """The loop's exception handler: silent (no traceback reaches stderr; every
    connection already ends quietly on its own errors)."""
