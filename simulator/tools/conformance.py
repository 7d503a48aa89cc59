"""The conformance check of both sides of a ``zread --stdio`` run against the charts
(``statecharts.load_chart``), live while recording and later on a cassette.

Owns: :class:`Checker`, fed one line at a time, which judges zread's events (envelope,
key order, vm.state, waiting_for, rejected lines repeating the vm, the fields of the
chart's vm Structs) and the client's commands (a type the last event offered, or
``quit``; params that fit; nothing after done), each finding a :class:`Deviation`;
:func:`command_of` (the chart an argv runs), :func:`check_cassette` and :func:`report`.

Hand-written, not generated: the checks are the charts' data read the way
``simulator.core.session`` runs it (several chart states may share one vm state; a
chart's ``_start`` state is never shown), so they are derived from the compiled charts
and their vm Structs here rather than from a schema, which the charts do not have.

Over 400 lines, for a reason: one check, fed an event in full or by its envelope
(:meth:`Checker.feed_envelope`, a load test's), judges both from the same rules; split,
a rule would be read in two modules.

Must not: read or write a file, run a program, or print (the caller says where a
report goes); show a secret in a report. Must not be imported by the core, scenarios,
runners or hosts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from simulator.core.envelope import Command, RejectedLine, decode_command, decode_params
from simulator.core.secrets import Secrets
from simulator.formats.bounds import in_words
from simulator.tools.cassette import DIRECTIONS, RecordError, compact, decode_json, decode_line
from simulator.tools.vmshape import VmShape, field_deviations, shape_of
from statecharts import COMMANDS, load_chart

ENVELOPE_KEYS: Final = ("vm", "waiting_for", "done", "error")
_SHOWN: Final = 1000
"""A reported line longer than this is cut (the cassette has it whole)."""

Gate = tuple[tuple[str, ...], bool]
"""A chart state as an event shows it: its waiting_for, and whether it is terminal."""


@dataclass(frozen=True, slots=True)
class Deviation:
    """One line that is not what the charts allow; ``n`` counts the lines of its stream
    from 1 (0: the run as a whole, at its end)."""

    direction: str
    n: int
    t: float
    message: str
    line: str

    def __str__(self) -> str:
        where = f"{DIRECTIONS[self.direction]} line {self.n}" if self.n else "at exit"
        shown = self.line if len(self.line) <= _SHOWN else self.line[:_SHOWN] + "..."
        return f"{where} (t={self.t:.3f}s): {self.message}" + (f": {shown}" if shown else "")


# -- the envelope -------------------------------------------------------------------------


def _type_deviations(doc: dict[str, Any]) -> list[str]:
    """What of an event's four values is not of the envelope's type."""
    vm, waiting_for = doc.get("vm"), doc.get("waiting_for")
    done, error = doc.get("done"), doc.get("error")
    return [
        f"zread did write {compact(key)}:{compact(value)} where the chart expects {want}"
        for key, value, ok, want in (
            ("vm", vm, isinstance(vm, dict), "an object"),
            (
                "waiting_for",
                waiting_for,
                isinstance(waiting_for, list) and all(isinstance(w, str) for w in waiting_for),
                "a list of strings",
            ),
            ("done", done, isinstance(done, bool), "true or false"),
            ("error", error, isinstance(error, str), "a string"),
        )
        if not ok
    ]


def _offered(candidates: list[Gate]) -> list[list[str]]:
    """The waiting_for lists the non-terminal ``candidates`` offer, each once, in order."""
    offered: list[list[str]] = []
    for gate, terminal in candidates:
        if not terminal and list(gate) not in offered:
            offered.append(list(gate))
    return offered


def command_of(argv: Sequence[str]) -> str | None:
    """The zread command an argv runs: its first word after the program that names one."""
    for word in argv[1:]:
        if word in COMMANDS:
            return word
    return None


class _Rules(NamedTuple):
    """What the check needs of a command's chart, read once per command."""

    states: dict[str, list[Gate]]
    """Each vm.state's gates (several chart states may share one)."""
    shape: VmShape | None
    shows_state: bool
    params: dict[str, type[Any] | None]
    every: list[Gate]
    """The gates of every state: what an event may show when its state is not known."""
    offered: frozenset[tuple[str, ...]]
    """The waiting_for lists the non-terminal ones offer."""


_RULES: dict[str | None, _Rules] = {}


def _rules_of(command: str | None) -> _Rules:
    """What the check needs of ``command``'s chart (its states' gates, its vm's shape,
    whether it shows a state, its commands' params), read once per command: a load test
    checks thousands of sessions."""
    rules = _RULES.get(command)
    if rules is not None:
        return rules
    states: dict[str, list[Gate]] = {}
    shape: VmShape | None = None
    shows_state = False
    params: dict[str, type[Any] | None] = {}
    if command is not None:
        chart = load_chart(command)
        shows_state = chart.shows_state
        for spec in chart.states.values():
            if chart.has_start and spec.name == chart.initial:
                continue  # left by _start before the first event
            states.setdefault(spec.vm_state, []).append((spec.waiting_for, spec.terminal))
        shape = shape_of(chart.model.vm_type)
        params = {name: spec.params for name, spec in chart.commands.items()}
    every = [gate for gates in states.values() for gate in gates]
    offered = frozenset(tuple(gate) for gate in _offered(every))
    rules = _RULES[command] = _Rules(states, shape, shows_state, params, every, offered)
    return rules


def _done_offering(waiting_for: list[str]) -> str:
    return (
        f"zread did offer waiting_for {compact(waiting_for)} with done:true where the "
        "chart expects []"
    )


class Checker:
    """The conformance check, fed one line at a time in the order the lines passed.

    A command is judged against the last event written before it arrived (what the
    client could have read); an event against the chart of ``command`` (None: the
    envelope only).
    """

    __slots__ = ("_done", "_events", "_last", "_rules", "command", "deviations")

    def __init__(self, command: str | None) -> None:
        self.command = command
        self.deviations: list[Deviation] = []
        self._last: tuple[bytes, list[str]] | None = None
        """The last event's line (its vm is decoded again only for an error event, which
        must repeat it; b"" after an event judged by its envelope) and its waiting_for."""
        self._done = False
        self._events = 0
        self._rules = _rules_of(command)

    @property
    def clean(self) -> bool:
        return not self.deviations

    def feed(self, direction: str, n: int, t: float, raw: bytes, decoded: Any = None) -> None:
        """Judge one line; ``decoded``: an event line already decoded (None: decode it)."""
        if direction == "out":
            messages = list(self._event(raw, decoded))
        elif direction == "in":
            messages = list(self._command(raw))
        else:
            return
        shown = raw.decode("utf-8", "replace")
        self.deviations.extend(Deviation(direction, n, t, m, shown) for m in messages)

    def feed_envelope(self, n: int, t: float, raw: bytes, head: dict[str, Any]) -> None:
        """Judge one event line by its envelope alone: ``head`` holds its waiting_for,
        done and error, in that order, after an object vm (the caller read them off the
        line's end; ``raw`` may end in its newline). What the vm shows is not judged: its
        fields, its state (waiting_for is held against every gate of the chart, whatever
        the state), and whether an error event repeats it. A load test judges most of its
        sessions so: decoding a 50-page event's vm costs more than the session's step
        that wrote it."""
        waiting_for, done, error = head.get("waiting_for"), head.get("done"), head.get("error")
        if not self._done and error == "" and type(waiting_for) is list:
            # The common event, judged at once: a gate of the chart, or the end.
            try:
                fits = (
                    not waiting_for
                    if done is True
                    else done is False and (tuple(waiting_for) in self._rules.offered)
                )
            except TypeError:  # an element that cannot be hashed: not a gate's
                fits = False
            if fits:
                self._events += 1
                self._last = (b"", waiting_for)
                self._done = done is True
                return
        if self._done:
            messages = [
                "zread did write a line after its done:true event where the chart expects nothing"
            ]
        else:
            messages = list(self._envelope(head))
        shown = raw.removesuffix(b"\n").decode("utf-8", "replace") if messages else ""
        self.deviations.extend(Deviation("out", n, t, m, shown) for m in messages)

    def _envelope(self, head: dict[str, Any]) -> Iterator[str]:
        waiting_for, done = head.get("waiting_for"), head.get("done")
        bad = _type_deviations({"vm": {}, **head})
        yield from bad
        self._events += 1
        if bad:
            self._done = done is True
            return
        assert isinstance(waiting_for, list)
        if head.get("error"):
            yield from self._rejected(None, waiting_for, done)
        elif done and waiting_for:
            yield _done_offering(waiting_for)
        elif not done and self.command is not None:
            yield from self._against_gates(None, self._rules.every, waiting_for)
        self._last = (b"", waiting_for)
        self._done = bool(done)

    def finish(self, exit_code: int | None, t: float) -> None:
        if not self._done:
            how = "end" if exit_code is None else f"exit with code {exit_code}"
            message = (
                f"zread did {how} without a done:true event where the chart expects "
                "the last event to have done:true"
            )
            self.deviations.append(Deviation("out", 0, t, message, ""))

    # -- zread's side ---------------------------------------------------------------------

    def _event(self, raw: bytes, doc: Any = None) -> Iterator[str]:
        if self._done:
            yield "zread did write a line after its done:true event where the chart expects nothing"
            return
        try:
            doc = decode_json(raw) if doc is None else doc
        except ValueError as exc:
            yield f"zread did write a line that is not JSON ({exc}) where the chart expects events"
            return
        if not isinstance(doc, dict):
            yield "zread did write JSON that is not an object where the chart expects an event"
            return
        if tuple(doc) != ENVELOPE_KEYS:
            yield (
                f"zread did write the keys {compact(list(doc))} where the chart expects "
                f"{compact(list(ENVELOPE_KEYS))} in that order"
            )
        vm, waiting_for, done = doc.get("vm"), doc.get("waiting_for"), doc.get("done")
        bad = _type_deviations(doc)
        yield from bad
        self._events += 1
        if bad:
            self._done = self._done or done is True
            return
        assert isinstance(vm, dict)
        assert isinstance(waiting_for, list)
        if doc.get("error"):
            yield from self._rejected(vm, waiting_for, done)
        else:
            yield from self._against_chart(vm, waiting_for, bool(done))
        self._last = (raw, waiting_for)
        self._done = bool(done)

    def _rejected(
        self, vm: dict[str, Any] | None, waiting_for: list[str], done: Any
    ) -> Iterator[str]:
        """An error event against the last one (``vm`` None: not judged)."""
        if self._last is None:
            yield "zread did reject a command in its first event where the chart expects a state"
            return
        last_line, last_waiting_for = self._last
        if done:
            yield "zread did write done:true with an error where the chart expects done:false"
        judged = vm is not None and last_line  # (its line decoded once already)
        if judged and vm != decode_json(last_line)["vm"]:
            yield (
                "zread did change the vm in an error event where the chart expects the "
                "previous event's vm repeated"
            )
        if waiting_for != last_waiting_for:
            yield (
                f"zread did offer waiting_for {compact(waiting_for)} in an error event where "
                f"the chart expects the previous {compact(last_waiting_for)} repeated"
            )

    def _against_chart(
        self, vm: dict[str, Any], waiting_for: list[str], done: bool
    ) -> Iterator[str]:
        if done and waiting_for:
            yield _done_offering(waiting_for)
        if self.command is None:
            return
        if self._rules.shape is not None:
            yield from field_deviations(vm, self._rules.shape, "")
        state, candidates = self._candidates(vm)
        if candidates is None:
            known = ", ".join(compact(s) for s in self._rules.states)
            yield f"zread did show vm.state {compact(state)} where the chart expects one of {known}"
            return
        if done:
            return  # quit ends in any state; a terminal state has done:true, []
        yield from self._against_gates(state, candidates, waiting_for)

    def _candidates(self, vm: dict[str, Any]) -> tuple[Any, list[Gate] | None]:
        """The state an event shows (None: the chart shows none), and the chart states it
        may be in (None: a vm.state the chart does not have)."""
        if not self._rules.shows_state:
            return None, self._rules.every
        state = vm.get("state")
        return state, self._rules.states.get(state) if isinstance(state, str) else None

    @staticmethod
    def _against_gates(state: Any, candidates: list[Gate], waiting_for: list[str]) -> Iterator[str]:
        """A done:false event's waiting_for against the gates of the states it may be in."""
        offered = _offered(candidates)
        where = f" in state {state}" if state is not None else ""
        if not offered:
            yield f"zread did write done:false{where} where the chart expects done:true (terminal)"
        elif waiting_for not in offered:
            expected = " or ".join(compact(w) for w in offered)
            yield (
                f"zread did offer waiting_for {compact(waiting_for)}{where} where the chart "
                f"expects {expected}"
            )

    # -- the client's side ----------------------------------------------------------------

    def _command(self, raw: bytes) -> Iterator[str]:
        """What is wrong with one line the client sent, decoded as zread decodes it
        (Go's rules: :func:`~simulator.core.envelope.decode_command`)."""
        if not raw.strip(b" \t\r\n"):
            return  # blank lines are ignored
        try:
            command: Command | None = decode_command(raw)
        except RejectedLine:
            command = None
        sent = "a line" if command is None or not command.type else compact(command.type)
        if self._done:
            yield f"the client sent {sent} after done:true where zread waits for nothing"
            return
        if command is None:
            yield "the client sent a line that is not a JSON object where zread waits for a command"
            return
        if not command.type:
            yield "the client sent an object without a string type where zread waits for a command"
            return
        yield from self._against_last(command, sent)

    def _against_last(self, command: Command, sent: str) -> Iterator[str]:
        kind = command.type
        if kind == "quit":
            return
        if self._last is None:
            yield f"the client sent {sent} before the first event where zread waits for nothing yet"
            return
        last_waiting_for = self._last[1]
        waiting = [w for w in last_waiting_for if w != "quit"]
        if kind not in last_waiting_for:
            if waiting:
                expected = ", ".join(compact(w) for w in last_waiting_for)
                yield f"the client sent {sent} where zread waits for one of {expected}"
            else:
                yield (
                    f"the client sent {sent} where zread waits for nothing "
                    "(an internal result is pending; only quit is accepted)"
                )
            return
        if not command.params.lstrip().startswith(b"{"):
            shown = command.params.decode("utf-8", "replace")
            yield f"the client sent {sent} with params {shown} where zread waits for an object"
            return
        struct = self._rules.params.get(kind)
        if struct is not None:
            try:
                decode_params(command.params, struct)
            except RejectedLine as exc:
                reason = in_words(str(exc).removeprefix("invalid params: "))
                yield (
                    f"the client sent {sent} with params that do not fit ({reason}) where "
                    f"zread waits for {struct.__name__}"
                )


# -- a cassette's check -------------------------------------------------------------------


def check_cassette(cassette: Mapping[str, Any], command: str | None = None) -> Checker:
    """The conformance check of a cassette's lines, as recording ran it live."""
    command = command or cassette.get("command") or command_of(cassette.get("argv") or [])
    if command is not None and command not in COMMANDS:
        raise RecordError(f"command {command!r}: not a zread command ({', '.join(COMMANDS)})")
    checker = Checker(command)
    for entry in cassette["lines"]:
        checker.feed(entry["dir"], entry["n"], float(entry["t"]), decode_line(entry))
    exit_code = cassette.get("exit_code")
    checker.finish(
        exit_code if isinstance(exit_code, int) else None, float(cassette.get("duration") or 0)
    )
    return checker


def report(
    checker: Checker, cassette: Mapping[str, Any], secrets: Secrets | None = None
) -> list[str]:
    """The check's report, one line each: the deviations (redacted with ``secrets``, by
    default the keys the cassette's lines name), then the verdict."""
    if secrets is None:
        secrets = Secrets()
        for entry in cassette["lines"]:
            secrets.learn(decode_line(entry))
    lines = [secrets.redact_text(str(deviation)) for deviation in checker.deviations]
    counted = {d: sum(1 for e in cassette["lines"] if e["dir"] == d) for d in DIRECTIONS}
    what = f"{checker.command} chart" if checker.command else "envelope only (no zread command)"
    summary = (
        f"{counted['out']} events, {counted['in']} commands, {counted['err']} stderr lines; "
        f"checked against the {what}: "
    )
    found = len(checker.deviations)
    lines.append(summary + ("clean" if not found else f"{found} deviation{'s' * (found != 1)}"))
    return lines
