"""Tests for simulator.core.session: lines in, events out, timers in virtual time.

The real charts (statecharts.load_chart) run against the real scenarios; a small
synthetic chart pins down timer ordering exactly.
"""

from __future__ import annotations

import json
import types
from typing import Any

import msgspec
import pytest

from simulator.core.chart import compile_chart
from simulator.core.driver import Driver, Flags
from simulator.core.effects import SaveConfig, SaveLogin
from simulator.core.envelope import MAX_LINE_BYTES
from simulator.core.interface import SessionError
from simulator.core.outcome import Outcome
from simulator.core.session import Session
from simulator.scenario import Scenario, load_scenario
from simulator.scenario.timing import Delay
from statecharts import load_chart
from statecharts.login import LoginFlags

QUIT = b'{"type":"quit"}'
SCRIPT = {
    "select_region": b'{"type":"select_region","params":{"region":"cn"}}',
    "select_model": b'{"type":"select_model","params":{"model":"glm-4.5-air"}}',
    "has_update": b'{"type":"download"}',
    "confirm_restart": b'{"type":"restart"}',
    "editing": b'{"type":"save"}',
}
"""The command a scripted client sends in each gated state to move on."""


class Wire(msgspec.Struct):
    """An event line split into its parts, ``vm`` and ``waiting_for`` as raw bytes."""

    vm: msgspec.Raw
    waiting_for: msgspec.Raw
    done: bool
    error: str


def parts(line: bytes) -> Wire:
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    return msgspec.json.decode(line, type=Wire)


def event(line: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(line)
    return decoded


def new_session(
    command: str,
    scenario: str | Scenario = "default",
    *,
    seed: int = 0,
    speed: float = 1.0,
    flags: Flags | None = None,
) -> Session:
    if isinstance(scenario, str):
        scenario = load_scenario(scenario)
    return Session(load_chart(command), scenario, flags=flags, seed=seed, speed=speed)


def step(session: Session) -> Outcome:
    """Advance to the next deadline (there must be one)."""
    deadline = session.next_deadline()
    assert deadline is not None, f"nothing pending in {session.state}"
    return session.advance(deadline)


def joined(first: Outcome, then: Outcome) -> Outcome:
    """The events and effects of two session calls, as one."""
    both = Outcome()
    both += first
    both += then
    both.effects = [*first.effects, *then.effects]
    both.done = then.done
    return both


def play(session: Session, stop_at: str | None = None, limit: int = 200) -> Outcome:
    """Run a scripted client with virtual time until done (or until ``stop_at``); every
    event and effect of the run."""
    out = Outcome()
    for _ in range(limit):
        if session.done or session.state == stop_at:
            return out
        if session.state in SCRIPT and session.waiting_for:
            out = joined(out, session.feed(SCRIPT[session.state]))
        else:
            out = joined(out, step(session))
    raise AssertionError("the run did not end")


def reach_all(command: str, target: str, scenario: str = "default") -> tuple[Session, Outcome]:
    """A started session in chart state ``target``, and every event and effect so far."""
    session = new_session(command, scenario)
    out = joined(session.start(), play(session, stop_at=target))
    assert session.state == target
    assert not session.done
    return session, out


def reach(command: str, target: str, scenario: str = "default") -> tuple[Session, bytes]:
    """A started session in chart state ``target``, and the last event it wrote."""
    session, out = reach_all(command, target, scenario)
    return session, out[-1]


# -- order of use ------------------------------------------------------------------


def test_start_once() -> None:
    session = new_session("update")
    assert len(session.start()) == 1
    with pytest.raises(SessionError):
        session.start()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.feed(QUIT),
        lambda s: s.advance(1.0),
        lambda s: s.quit(),
        lambda s: s.step(),
        lambda s: s.idle_until(1.0),
    ],
)
def test_nothing_before_start(call: Any) -> None:
    session = new_session("update")
    with pytest.raises(SessionError):
        call(session)


@pytest.mark.parametrize("speed", [-1.0, float("nan"), float("inf")])
def test_a_speed_that_is_not_a_finite_number_at_least_0_is_refused(speed: float) -> None:
    # NaN would spin for ever in virtual time; set_speed refuses the same ones.
    with pytest.raises(SessionError, match=r"^speed must be a number >= 0$"):
        new_session("update", speed=speed)


def test_the_python_api_refuses_a_nan_speed_at_once() -> None:
    from simulator.runners.virtual import ZreadSim

    sim = ZreadSim()
    try:
        with pytest.raises(SessionError, match="speed must be a number >= 0"):
            sim.start("generate", "-y", speed=float("nan"))
    finally:
        sim.close()


def test_a_scenarios_delay_wins_and_the_charts_default_fills_in() -> None:
    scenario = load_scenario("default")
    assert "check" not in scenario.timing  # update's chart has its default
    session = Session(load_chart("update"), scenario)
    session.start()
    deadline = session.next_deadline()
    low, high = load_chart("update").timing["check"].uniform or (0.0, 0.0)
    assert deadline is not None and low <= deadline <= high
    own = msgspec.structs.replace(scenario, timing={"check": Delay(fixed=9.0)})
    session = Session(load_chart("update"), own)
    session.start()
    assert session.next_deadline() == 9.0


# -- first events and gates ----------------------------------------------------------


def test_first_event_of_update_is_checking() -> None:
    first = event(new_session("update").start()[0])
    assert first["vm"]["state"] == "checking"
    assert first["waiting_for"] == []
    assert first["done"] is False
    assert first["error"] == ""


def test_version_is_one_done_event() -> None:
    session = new_session("version")
    out = session.start()
    assert len(out) == 1
    assert parts(out[0]).done is True
    assert bytes(parts(out[0]).waiting_for) == b"[]"
    assert session.done
    assert session.next_deadline() is None
    assert session.feed(QUIT) == []
    assert session.advance(1e9) == []


def test_config_first_event_waits_for_its_commands() -> None:
    first = event(new_session("config").start()[0])
    assert first["waiting_for"] == ["update_fields", "save", "reload_llm", "quit"]
    assert "state" not in first["vm"]
    assert len(first["vm"]["fields"]) == 9


EXPECTED_GATES = {
    ("update", "checking"): [],
    ("update", "has_update"): ["download", "quit"],
    ("update", "downloading"): [],
    ("update", "confirm_restart"): ["restart", "skip_restart", "quit"],
    ("login", "select_region"): ["select_region", "quit"],
    ("login", "init_flow"): [],
    ("login", "open_browser"): [],
    ("login", "waiting"): [],
    ("login", "select_model"): ["select_model", "quit"],
    ("login", "saving"): [],
    ("config", "editing"): ["update_fields", "save", "reload_llm", "quit"],
}
REACHABLE = sorted(EXPECTED_GATES)


@pytest.mark.parametrize(("command", "target"), REACHABLE)
def test_events_carry_the_fidelity_gates(command: str, target: str) -> None:
    session, last = reach(command, target)
    decoded = event(last)
    assert decoded["waiting_for"] == EXPECTED_GATES[command, target]
    assert decoded["done"] is False
    assert session.waiting_for == tuple(EXPECTED_GATES[command, target])
    if command != "config":
        assert decoded["vm"]["state"] == target


# -- quit ---------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "target"), REACHABLE)
def test_quit_in_every_reachable_state(command: str, target: str) -> None:
    session, last = reach(command, target)
    out = session.feed(QUIT)
    assert len(out) == 1
    final = parts(out[0])
    assert bytes(final.vm) == bytes(parts(last).vm)
    assert bytes(final.waiting_for) == b"[]"
    assert final.done is True
    assert final.error == ""
    assert session.done
    assert session.next_deadline() is None
    assert session.pending() == []
    # nothing after done
    assert session.feed(QUIT) == []
    assert session.feed(b'{"type":"download"}') == []
    assert session.feed(b"garbage") == []
    assert session.advance(1e9) == []


def test_quit_with_params_and_extra_keys_still_quits() -> None:
    session, _ = reach("update", "has_update")
    out = session.feed(b'{"type":"quit","params":{"why":1},"extra":true}')
    assert parts(out[0]).done is True


@pytest.mark.parametrize("params", [b"5", b"[1,2]", b'"now"', b"true"])
def test_quit_with_params_not_an_object_is_invalid_params_like_any_command(
    params: bytes,
) -> None:
    session, last = reach("update", "has_update")
    out = session.feed(b'{"type":"quit","params":' + params + b"}")
    event = parts(out[0])
    assert event.done is False
    assert json.loads(out[0])["vm"] == json.loads(last)["vm"]
    assert event.error.startswith("invalid params: expected `object`")
    assert session.state == "has_update"
    assert parts(session.feed(QUIT)[0]).done is True


def test_quit_with_an_escaped_lone_surrogate_quits_as_go_reads_it() -> None:
    session, _ = reach("update", "has_update")
    out = session.feed(b'{"type":"quit","x":"\\ud800"}')
    assert parts(out[0]).done is True


def test_quit_method_ends_like_the_command() -> None:
    a, _ = reach("login", "waiting")
    b, _ = reach("login", "waiting")
    assert a.quit() == b.feed(QUIT)
    with pytest.raises(SessionError):
        a.quit()


# -- rejected lines ------------------------------------------------------------------

REJECTED_IN_HAS_UPDATE = [
    (b"nope", "invalid JSON: "),
    (b'{"type":"download"', "invalid JSON: "),
    (b"[1]", "invalid JSON: "),
    (b"42", "invalid JSON: "),
    (b'"download"', "invalid JSON: "),
    (b"null", "invalid JSON: "),
    (b'{"type":"down\xffload"}', "invalid JSON: "),
    (b"\xc3\x28", "invalid JSON: "),
    (b"{}", 'command "" not allowed in state has_update'),
    (b'{"params":{}}', 'command "" not allowed in state has_update'),
    (b'{"type":7}', 'command "7" not allowed in state has_update'),
    (b'{"type":true}', 'command "true" not allowed in state has_update'),
    (b'{"type":"fly"}', 'command "fly" not allowed in state has_update'),
    (b'{"type":"restart"}', 'command "restart" not allowed in state has_update'),
    (b'{"type":"_checked"}', 'command "_checked" not allowed in state has_update'),
    (b'{"type":"_start"}', 'command "_start" not allowed in state has_update'),
    (b'{"type":"_step"}', 'command "_step" not allowed in state has_update'),
    (b'{"type":"Download"}', 'command "Download" not allowed in state has_update'),
    (b'{"type":"download","params":[1]}', "invalid params: "),
    (b'{"type":"download","params":"x"}', "invalid params: "),
    (b'{"type":"download","params":3}', "invalid params: "),
]


def assert_rejected(session: Session, last: bytes, line: bytes, expected: str) -> None:
    state, pending = session.state, session.pending()
    out = session.feed(line)
    assert len(out) == 1
    answer = parts(out[0])
    assert bytes(answer.vm) == bytes(parts(last).vm)
    assert bytes(answer.waiting_for) == bytes(parts(last).waiting_for)
    assert answer.done is False
    if expected.endswith(": "):
        assert answer.error.startswith(expected)
        assert len(answer.error) > len(expected)
    else:
        assert answer.error == expected
    assert session.state == state
    assert session.pending() == pending
    assert not session.done


@pytest.mark.parametrize(("line", "expected"), REJECTED_IN_HAS_UPDATE)
def test_rejected_line_repeats_the_previous_event(line: bytes, expected: str) -> None:
    session, last = reach("update", "has_update")
    assert_rejected(session, last, line, expected)
    # the session still works: the gate is open as before
    assert event(session.feed(b'{"type":"download"}')[0])["vm"]["state"] == "downloading"


def test_rejected_lines_in_a_row_all_repeat_the_last_accepted_event() -> None:
    session, last = reach("update", "has_update")
    for line, expected in REJECTED_IN_HAS_UPDATE:
        assert_rejected(session, last, line, expected)


@pytest.mark.parametrize(
    "line",
    [b'{"type":"download"}', b'{"type":"_checked"}', b'{"type":"select_region"}', b"{}"],
)
def test_commands_refused_while_checking(line: bytes) -> None:
    session, last = reach("update", "checking")
    expected = f'command "{json.loads(line).get("type", "")}" not allowed in state checking'
    assert_rejected(session, last, line, expected)
    # the check timer still fires as before
    assert event(step(session)[0])["vm"]["state"] == "has_update"


LOGIN_BAD_PARAMS = [
    b'{"type":"select_region"}',
    b'{"type":"select_region","params":null}',
    b'{"type":"select_region","params":{"region":5}}',
    b'{"type":"select_region","params":{"region":""}}',
    b'{"type":"select_region","params":{"regoin":"cn"}}',
    b'{"type":"select_region","params":["cn"]}',
]


@pytest.mark.parametrize("line", LOGIN_BAD_PARAMS)
def test_login_invalid_region_params(line: bytes) -> None:
    session, last = reach("login", "select_region")
    assert_rejected(session, last, line, "invalid params: ")


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"select_model","params":{"model":"gpt-0"}}',
        b'{"type":"select_model","params":{"model":["glm-4.6"]}}',
        b'{"type":"select_model"}',
    ],
)
def test_login_invalid_model_params(line: bytes) -> None:
    session, last = reach("login", "select_model")
    assert_rejected(session, last, line, "invalid params: ")


def test_unknown_params_keys_are_ignored() -> None:
    session, _ = reach("login", "select_region")
    out = session.feed(b'{"type":"select_region","params":{"region":"cn","colour":"red"}}')
    assert parts(out[0]).error == ""
    assert session.state == "init_flow"


CONFIG_BAD_FIELDS = [
    {"nope": "x"},
    {"": "x"},
    {"language": 3},
    {"max_concurrent": "0"},
    {"max_concurrent": "65"},
    {"max_concurrent": "four"},
    {"max_retries": "11"},
    {"max_retries": "-1"},
    {"language": "fr", "max_retries": "11"},  # all or nothing
]


@pytest.mark.parametrize("fields", CONFIG_BAD_FIELDS)
def test_config_refuses_bad_fields_all_or_nothing(fields: dict[str, Any]) -> None:
    session, last = reach("config", "editing")
    line = json.dumps({"type": "update_fields", "params": {"fields": fields}}).encode()
    assert_rejected(session, last, line, "invalid params: ")
    (saved,) = session.feed(b'{"type":"save"}').effects
    assert isinstance(saved, SaveConfig)
    assert saved.values["language"] == "en"
    assert saved.values["max_retries"] == "2"


def test_config_state_is_editing_in_errors() -> None:
    session, last = reach("config", "editing")
    assert_rejected(
        session, last, b'{"type":"restart"}', 'command "restart" not allowed in state editing'
    )


OVERSIZED = "invalid JSON: line exceeds 1048576 bytes"


@pytest.mark.parametrize(
    "line",
    [
        # a valid command, cut to the limit + 1 as LineBuffer hands it over
        (b'{"type":"download","pad":"' + b"x" * MAX_LINE_BYTES + b'"}')[: MAX_LINE_BYTES + 1],
        b"{" * (MAX_LINE_BYTES + 1),
        b" " * (MAX_LINE_BYTES - 1) + b'{"type":"download"}',
    ],
)
def test_oversized_line_is_rejected_for_its_length(line: bytes) -> None:
    session, last = reach("update", "has_update")
    assert len(line) > MAX_LINE_BYTES
    assert_rejected(session, last, line, OVERSIZED)


def test_line_of_exactly_the_limit_is_accepted() -> None:
    session, _ = reach("update", "has_update")
    command = b'{"type":"download"}'
    line = command + b" " * (MAX_LINE_BYTES - len(command))
    assert len(line) == MAX_LINE_BYTES
    out = session.feed(line)
    assert parts(out[0]).error == ""
    assert session.state == "downloading"


@pytest.mark.parametrize("line", [b"\x0b", b"\x0c", b" \x0c ", b"\x1c", b"\xc2\xa0"])
def test_lines_of_other_whitespace_are_invalid_json_as_go_says(line: bytes) -> None:
    session, _ = reach("update", "has_update")
    out = session.feed(line)
    assert len(out) == 1
    assert parts(out[0]).error.startswith("invalid JSON: ")
    assert session.state == "has_update"


def test_a_carriage_return_does_not_count_toward_the_limit() -> None:
    session, _ = reach("update", "has_update")
    command = b'{"type":"download"}'
    line = command + b" " * (MAX_LINE_BYTES - len(command)) + b"\r"
    out = session.feed(line)
    assert parts(out[0]).error == ""
    assert session.state == "downloading"


def test_a_line_one_byte_over_the_limit_before_its_return_is_refused() -> None:
    session, _ = reach("update", "has_update")
    command = b'{"type":"download"}'
    line = command + b" " * (MAX_LINE_BYTES + 1 - len(command)) + b"\r"
    out = session.feed(line)
    assert parts(out[0]).error == f"invalid JSON: line exceeds {MAX_LINE_BYTES} bytes"
    assert session.state == "has_update"


@pytest.mark.parametrize("line", [b"", b" ", b"\t", b"\r", b"  \t \r"])
def test_blank_lines_give_no_event(line: bytes) -> None:
    session, _ = reach("update", "has_update")
    assert session.feed(line) == []
    assert session.state == "has_update"
    # and do not disturb what comes next
    out = session.feed(b'{"type":"download"}')
    assert parts(out[0]).error == ""


def test_crlf_terminated_command_is_accepted() -> None:
    session, _ = reach("update", "has_update")
    out = session.feed(b'{"type":"download"}\r')
    assert parts(out[0]).error == ""
    assert session.state == "downloading"


def test_go_unsafe_characters_in_the_vm_are_escaped_and_repeated_identically() -> None:
    session, _ = reach("config", "editing")
    line = json.dumps(
        {"type": "update_fields", "params": {"fields": {"language": "<b>&\u2028\u2029é"}}}
    ).encode()
    accepted = session.feed(line)[0]
    assert b"\\u003cb\\u003e\\u0026\\u2028\\u2029\xc3\xa9" in accepted
    assert b"<" not in accepted
    rejected = session.feed(b'{"type":"nope"}')[0]
    assert bytes(parts(rejected).vm) == bytes(parts(accepted).vm)


# -- time and timers -----------------------------------------------------------------


class TickVM(msgspec.Struct):
    state: str = ""
    log: list[str] = msgspec.field(default_factory=list)


class TickModel(Driver):
    vm_type = TickVM
    vm: TickVM

    def note(self, event: Any) -> None:
        name = event.event.name
        self.vm.log.append(name)
        if name == "_a":
            self.rt.schedule("_d", 0.5)

    def leaving(self, event: Any) -> None:
        self.vm.log.append("leave")


TICK_CHART = {
    "name": "tick",
    "model": "TickModel",
    "timing": {"fast": {"fixed": 50.0}, "slow": {"fixed": 60.0}, "beat": {"fixed": 70.0}},
    "initial": "run",
    "states": [
        {
            "name": "run",
            "waiting_for": ["stop", "quit"],
            "timers": [
                {"after": "slow", "trigger": "_b"},
                {"after": "fast", "trigger": "_a"},
                {"after": "fast", "trigger": "_c"},
                {"after": "beat", "trigger": "_beat", "repeat": True},
            ],
        },
        {"name": "after", "waiting_for": ["quit"], "timers": [{"after": "slow", "trigger": "_e"}]},
        {"name": "ended", "terminal": True},
    ],
    "transitions": [
        {"trigger": "_a", "source": "run", "dest": None, "after": "note"},
        {"trigger": "_b", "source": "run", "dest": None, "after": "note"},
        {"trigger": "_c", "source": "run", "dest": None, "after": "note"},
        {"trigger": "_d", "source": "run", "dest": None, "after": "note"},
        {"trigger": "_beat", "source": "run", "dest": None, "after": "note"},
        {"trigger": "stop", "source": "run", "dest": "after", "before": "leaving"},
        {"trigger": "_e", "source": "after", "dest": "ended"},
    ],
    "commands": {"stop": {}},
}


def tick_session(speed: float = 1.0) -> Session:
    module = types.ModuleType("tick_chart")
    module.CHART = TICK_CHART  # type: ignore[attr-defined]
    module.TickModel = TickModel  # type: ignore[attr-defined]
    timing = {
        "fast": Delay(fixed=1.0),
        "slow": Delay(fixed=2.0),
        "beat": Delay(fixed=0.75),
    }
    scenario = msgspec.structs.replace(load_scenario("default"), timing=timing)
    return Session(compile_chart(module), scenario, speed=speed)


def logs(lines: list[bytes]) -> list[list[str]]:
    return [event(line)["vm"]["log"] for line in lines]


def test_timers_fire_in_deadline_order_ties_in_scheduling_order() -> None:
    session = tick_session()
    session.start()
    out = session.advance(2.0)
    # _beat at 0.75 and 1.5; _a, _c at 1.0 (in declaration order); _d at 1.0 + 0.5
    # (counted from _a's deadline, not from 2.0); _b at 2.0
    assert logs(out)[-1] == ["_beat", "_a", "_c", "_beat", "_d", "_b"]
    assert len(out) == 6
    assert session.now == 2.0


def test_one_big_advance_equals_stepping_deadline_by_deadline() -> None:
    one = tick_session()
    one.start()
    big = one.advance(3.0)
    stepped = tick_session()
    stepped.start()
    small: list[bytes] = []
    while (deadline := stepped.next_deadline()) is not None and deadline <= 3.0:
        small += stepped.advance(deadline)
    assert big == small
    assert one.next_deadline() == stepped.next_deadline()


def test_next_deadline_and_pending() -> None:
    session = tick_session()
    session.start()
    pending = session.pending()
    assert [t.trigger for t in pending] == ["_beat", "_a", "_c", "_b"]
    assert [t.deadline for t in pending] == [0.75, 1.0, 1.0, 2.0]
    assert session.next_deadline() == 0.75
    session.advance(0.5)
    assert session.next_deadline() == 0.75  # nothing was due
    assert session.now == 0.5


def test_advance_to_a_time_before_any_deadline_fires_nothing() -> None:
    session = tick_session()
    session.start()
    assert session.advance(0.7) == []
    assert len(session.pending()) == 4


def test_repeat_timer_counts_from_its_own_deadline() -> None:
    session = tick_session()
    session.start()
    session.advance(10.0)
    beats = [t for t in session.pending() if t.trigger == "_beat"]
    assert len(beats) == 1
    assert beats[0].deadline == pytest.approx(10.5)  # 0.75 * 14


def test_state_timers_are_dropped_on_leaving_the_state() -> None:
    session = tick_session()
    session.start()
    session.advance(1.2)  # _beat, _a, _c fired; _d (1.5), _b (2.0), _beat (1.5) pending
    out = session.feed(b'{"type":"stop"}')
    assert event(out[0])["vm"]["state"] == "after"
    triggers = [t.trigger for t in session.pending()]
    assert "_b" not in triggers
    assert "_beat" not in triggers
    assert "_e" in triggers
    # the timer the driver scheduled itself is not a state timer; it outlives the state
    assert "_d" in triggers
    # a timer fired after leaving has no transition from "after": no event
    assert session.advance(1.5) == []
    # _e counts from the time of the command (the last advance, 1.2)
    assert session.next_deadline() == pytest.approx(3.2)
    final = session.advance(100.0)
    assert len(final) == 1
    assert parts(final[0]).done is True
    assert session.pending() == []


def test_speed_zero_fires_everything_at_once() -> None:
    session = tick_session(speed=0.0)
    session.start()
    assert session.next_deadline() == 0.0
    assert {t.deadline for t in session.pending()} == {0.0}


def test_speed_multiplies_delays_of_a_synthetic_chart() -> None:
    session = tick_session(speed=3.0)
    session.start()
    assert [t.deadline for t in session.pending()] == [2.25, 3.0, 3.0, 6.0]


@pytest.mark.parametrize("speed", [2.0, 0.5, 10.0])
def test_speed_multiplies_the_update_check_delay(speed: float) -> None:
    base = new_session("update", seed=5, speed=1.0)
    base.start()
    fast = new_session("update", seed=5, speed=speed)
    fast.start()
    d1, d2 = base.next_deadline(), fast.next_deadline()
    assert d1 is not None
    assert d2 is not None
    assert d2 == pytest.approx(d1 * speed)
    assert 0.3 <= d1 <= 0.6  # default: check = uniform [0.3, 0.6]


def test_update_at_speed_zero_finishes_in_one_advance() -> None:
    session = new_session("update", speed=0.0)
    session.start()
    assert event(session.advance(0.0)[0])["vm"]["state"] == "has_update"
    session.feed(b'{"type":"download"}')
    out = session.advance(0.0)
    states = [event(line)["vm"]["state"] for line in out]
    assert states[-1] == "confirm_restart"
    # One event per step, the last at 100%, then confirm_restart.
    assert len(out) == load_scenario().world.release.download_steps + 1
    assert session.now == 0.0


def test_update_download_one_advance_equals_stepping() -> None:
    one, _ = reach("update", "has_update")
    many, _ = reach("update", "has_update")
    one.feed(b'{"type":"download"}')
    many.feed(b'{"type":"download"}')
    big = one.advance(one.now + 100.0)
    small: list[bytes] = []
    while many.state == "downloading":
        small += step(many)
    assert big == small
    assert one.state == many.state == "confirm_restart"


def test_download_progress_never_decreases_and_ends_at_100() -> None:
    session, _ = reach("update", "downloading")
    out: list[bytes] = []
    while session.state == "downloading":
        out += step(session)
    vms = [event(line)["vm"] for line in out]
    assert len(vms) >= 3
    percents = [vm["download_percent"] for vm in vms]
    downloaded = [vm["downloaded_bytes"] for vm in vms]
    assert percents == sorted(percents)
    assert downloaded == sorted(downloaded)
    assert percents[-1] == 100
    assert b'"download_percent":100,' in out[-1]
    assert downloaded[-1] == vms[-1]["total_bytes"]


def test_login_waiting_drops_the_expiry_timer_once_authorized() -> None:
    session, _ = reach("login", "waiting")
    triggers = sorted(t.trigger for t in session.pending())
    assert triggers == ["_authorized", "_expired"]
    expiry = next(t for t in session.pending() if t.trigger == "_expired")
    authorize = next(t for t in session.pending() if t.trigger == "_authorized")
    assert expiry.deadline - session.now == pytest.approx(300.0)
    assert authorize.deadline < expiry.deadline
    step(session)
    assert session.state == "select_model"
    assert session.pending() == []
    assert session.next_deadline() is None


def test_login_timeout_scenario_expires_after_auth_timeout() -> None:
    session, _ = reach("login", "waiting", scenario="login-timeout")
    entered = session.now
    # the simulated user never approves: _authorized fires without an event
    out = step(session)
    assert out == []
    assert session.state == "waiting"
    out = step(session)
    assert session.now == pytest.approx(entered + 3.0)
    final = event(out[0])
    assert final["done"] is True
    assert final["vm"]["state"] == "error"
    assert final["vm"]["error"]


def test_timers_scheduled_by_a_command_count_from_the_last_advance() -> None:
    session, _ = reach("login", "select_region")
    session.advance(50.0)
    session.feed(SCRIPT["select_region"])
    (timer,) = session.pending()
    assert timer.trigger == "_flow_ready"
    assert 50.2 <= timer.deadline <= 50.4  # default: init_flow = uniform [0.2, 0.4]


# -- determinism ---------------------------------------------------------------------


def full_run(command: str, seed: int, scenario: str = "default") -> list[bytes]:
    session = new_session(command, scenario, seed=seed)
    out = session.start() + play(session)
    assert session.done
    return out


def deadlines(command: str, seed: int) -> list[float]:
    session = new_session(command, seed=seed)
    session.start()
    times: list[float] = []
    for _ in range(200):
        if session.done:
            return times
        if session.state in SCRIPT and session.waiting_for:
            session.feed(SCRIPT[session.state])
        else:
            step(session)
            times.append(session.now)
    raise AssertionError("the run did not end")


@pytest.mark.parametrize("command", ["update", "login", "config"])
def test_same_seed_same_bytes(command: str) -> None:
    assert full_run(command, 7) == full_run(command, 7)


@pytest.mark.parametrize("command", ["update", "login"])
def test_same_seed_same_times(command: str) -> None:
    assert deadlines(command, 3) == deadlines(command, 3)
    assert deadlines(command, 3) != deadlines(command, 4)


def authorize_url(seed: int, scenario: Scenario | None = None) -> str:
    session = Session(load_chart("login"), scenario or load_scenario(), seed=seed)
    session.start()
    play(session, stop_at="waiting")
    url: str = event(session.feed(QUIT)[0])["vm"]["authorize_url"]
    return url


def test_different_seeds_give_different_authorize_urls() -> None:
    urls = {authorize_url(seed) for seed in range(5)}
    assert len(urls) == 5
    for url in urls:
        assert url.startswith("https://")
        assert "?" in url


def test_changing_a_delay_does_not_change_world_data() -> None:
    scenario = load_scenario()
    timing = dict(scenario.timing)
    timing["init_flow"] = Delay(fixed=0.0)
    timing["open_browser"] = Delay(lognormal={"median": 1.0, "sigma": 1.0})  # type: ignore[arg-type]
    changed = msgspec.convert(
        msgspec.to_builtins(msgspec.structs.replace(scenario, timing=timing)), Scenario
    )
    assert authorize_url(11, changed) == authorize_url(11)


def test_timing_draws_do_not_move_the_world_stream() -> None:
    def url_after_timing_draws(draws: int) -> str:
        session = new_session("login", seed=21)
        session.start()
        for _ in range(draws):
            session.runtime.cancel(session.runtime.schedule("_flow_ready", "authorize"))
        play(session, stop_at="waiting")
        url: str = event(session.feed(QUIT)[0])["vm"]["authorize_url"]
        return url

    assert url_after_timing_draws(0) == url_after_timing_draws(3)


def test_cancelled_timer_never_fires() -> None:
    session, _ = reach("login", "init_flow")
    (timer,) = session.pending()
    session.runtime.cancel(timer.seq)
    assert session.pending() == []
    assert session.next_deadline() is None
    assert session.advance(1e6) == []
    assert session.state == "init_flow"


def test_full_login_run_ends_done_with_a_username() -> None:
    out = full_run("login", 1)
    final = event(out[-1])
    assert final["done"] is True
    assert final["waiting_for"] == []
    assert final["vm"]["state"] == "done"
    assert final["vm"]["username"] == load_scenario().world.account.username
    assert all(event(line)["done"] is False for line in out[:-1])


# -- effects -------------------------------------------------------------------------


def test_config_save_effect_has_the_edited_values() -> None:
    session, before = reach_all("config", "editing")
    edit = session.feed(
        b'{"type":"update_fields","params":{"fields":{"language":"fr","max_concurrent":"8"}}}'
    )
    assert before.effects == [] and edit.effects == []
    out = session.feed(b'{"type":"save"}')
    final = event(out[0])
    assert final["done"] is True
    assert final["vm"]["saved"] is True
    effects = out.effects
    assert len(effects) == 1
    saved = effects[0]
    assert isinstance(saved, SaveConfig)
    world = load_scenario().world.config
    assert saved.values["language"] == "fr"
    assert saved.values["max_concurrent"] == "8"
    assert saved.values["llm_model"] == world.llm_model
    assert "" not in saved.values
    assert session.feed(QUIT).effects == []  # handed over once, with the call that made it


def test_config_quit_saves_nothing() -> None:
    session, before = reach_all("config", "editing")
    edit = session.feed(b'{"type":"update_fields","params":{"fields":{"language":"fr"}}}')
    assert [*before.effects, *edit.effects, *session.feed(QUIT).effects] == []


def test_login_done_saves_the_login() -> None:
    session = new_session("login")
    effects = joined(session.start(), play(session)).effects
    assert effects == [SaveLogin(load_scenario().world.account.username, "cn", "glm-4.5-air")]


def test_login_quit_before_done_saves_nothing() -> None:
    session, before = reach_all("login", "saving")
    assert [*before.effects, *session.feed(QUIT).effects] == []


def test_login_custom_flag_ends_at_once_without_saving() -> None:
    session = new_session("login", flags=LoginFlags(custom=True))
    first = session.start()
    (only,) = first
    assert event(only)["done"] is True
    assert event(only)["vm"]["wants_llm_provider_editor"] is True
    assert first.effects == []


def test_step_fires_the_next_timer_only_and_moves_the_clock_to_it() -> None:
    session = new_session("generate", "default")
    session.start()
    session.feed(b'{"type":"select_action","params":{"action":"generate"}}')
    timer = session.next_timer()
    assert timer is not None and timer.deadline == session.next_deadline()
    armed = session.armed
    others = {t.seq for t in session.pending()} - {timer.seq}
    session.step()
    assert session.now == timer.deadline
    after = {t.seq for t in session.pending()}
    assert after - others == {seq for seq in after if seq > armed}  # only new ones came
    assert others <= after  # and nothing else fired


def test_idle_until_moves_the_clock_as_advance_does_when_nothing_is_due() -> None:
    idle, advanced = new_session("generate", "default"), new_session("generate", "default")
    for session in (idle, advanced):
        session.start()
        session.feed(b'{"type":"select_action","params":{"action":"generate"}}')
    deadline = idle.next_deadline()
    assert deadline is not None and deadline > 0.01
    assert idle.idle_until(deadline / 2) is True
    assert advanced.advance(deadline / 2) == []
    assert idle.now == advanced.now == deadline / 2
    assert idle.idle_until(deadline / 4) is True  # the clock never goes back
    assert idle.now == deadline / 2
    assert idle.pending() == advanced.pending()
    # The timers then fire alike, from the same clock.
    assert idle.advance(deadline) == advanced.advance(deadline)


def test_idle_until_a_due_timer_changes_nothing_and_says_so() -> None:
    session = new_session("generate", "default")
    session.start()
    session.feed(b'{"type":"select_action","params":{"action":"generate"}}')
    deadline = session.next_deadline()
    assert deadline is not None
    pending, now = session.pending(), session.now
    assert session.idle_until(deadline) is False
    assert session.pending() == pending and session.now == now
    assert len(session.advance(deadline)) == 1  # advance is the one to fire it


def test_idle_until_after_done_leaves_it_to_advance() -> None:
    session = new_session("version", "default")
    session.start()
    assert session.done
    assert session.idle_until(5.0) is False
    assert session.now == 0.0
    out = session.advance(5.0)
    assert out == [] and out.done and session.now == 5.0


def test_step_with_nothing_pending_does_nothing() -> None:
    session = new_session("config", "default")
    session.start()
    assert session.next_timer() is None
    assert session.step() == []
    assert session.now == 0.0


# -- properties (Hypothesis): no input kills a session ----------------------------------
#
# Any mix of lines (valid commands, valid-looking commands with wrong params, arbitrary
# JSON, bytes that are not JSON, the shapes that break decoders: deep nesting, huge
# integers, escaped surrogates, odd whitespace) and of time passing, for every driver
# and built-in scenario. Effects are carried out as a runner does (a real browse
# server), so every state a line can reach is reached.

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from simulator.core.envelope import JSON_WHITESPACE  # noqa: E402
from simulator.hosts.effects import EffectHost  # noqa: E402
from simulator.launch import build_session  # noqa: E402
from simulator.scenario import builtin_names  # noqa: E402
from simulator.tools.client import ReferenceClient  # noqa: E402
from statecharts import COMMANDS  # noqa: E402
from tests.e2e.helpers import vm_and_waiting_for_bytes  # noqa: E402

KEY_ORDER = ["vm", "waiting_for", "done", "error"]
PARAM_KEYS = ("wiki_id", "current", "action", "task_id", "fields", "region", "model")
TYPES = sorted({kind for name in COMMANDS for kind in load_chart(name).commands} | {"quit"})

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
params = st.one_of(
    st.dictionaries(st.sampled_from(PARAM_KEYS), json_values, max_size=3),
    st.fixed_dictionaries(
        {
            "fields": st.dictionaries(
                st.sampled_from(["language", "max_retries", "llm_api_key", "x", ""]),
                json_values,
                max_size=3,
            )
        }
    ),
    json_values,
)
commands = st.builds(
    lambda kind, p, extra: json.dumps({"type": kind, "params": p, **extra}).encode(),
    st.sampled_from(TYPES) | json_values,
    params,
    st.dictionaries(st.text(max_size=5), json_values, max_size=2),
)
oddities = st.sampled_from(
    [
        b'{"type":"quit","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"type":"save","params":{"x":' + b"{" * 3000 + b"}" * 3000 + b"}}",
        b'{"type":"update_fields","params":{"fields":{"max_retries":"' + b"1" * 4301 + b'"}}}',
        b'{"type":"retry","params":{"task_id":' + b"9" * 5000 + b"}}",
        b'{"type":"quit","x":"\\ud800"}',
        b'{"type":"\\udfff"}',
        b"\x0b",
        b"\x0c\r",
        b" \t\r",
        b"\xff\xfe",
        b"{}",
        b"null",
        b'{"type":null}',
        b'{"type":"quit","params":5}',
    ]
)
lines = st.one_of(commands, oddities, st.binary(max_size=40), st.text(max_size=30).map(str.encode))
steps = st.lists(
    st.one_of(
        st.tuples(st.just("line"), lines),
        st.tuples(st.just("client"), st.none()),
        st.tuples(st.just("wait"), st.floats(min_value=0, max_value=120)),
    ),
    max_size=25,
)


def check_event(line: bytes) -> dict[str, Any]:
    assert line.endswith(b"\n") and line.count(b"\n") == 1, line[-80:]
    event = json.loads(line)
    assert list(event) == KEY_ORDER
    assert isinstance(event["waiting_for"], list) and isinstance(event["error"], str)
    return event


@given(
    command=st.sampled_from(tuple(COMMANDS)),
    scenario=st.sampled_from(builtin_names()),
    seed=st.integers(0, 3),
    script=steps,
)
def test_no_line_and_no_wait_kills_a_session(
    command: str, scenario: str, seed: int, script: list[tuple[str, Any]]
) -> None:
    session = build_session(
        command, ("-y",) if command == "generate" else (), scenario=scenario, seed=seed
    )
    host, client = EffectHost(), ReferenceClient()
    try:

        def take(outcome: Outcome) -> list[bytes]:
            for effect, result in host.perform_all(0, outcome.effects):
                outcome.extend(take(session.resolve(effect, result)))
            return list(outcome)

        last = take(session.start())[-1]
        for kind, value in script:
            if kind == "wait":
                out = take(session.advance(session.now + value))
                for line in out:
                    check_event(line)
                last = out[-1] if out else last
                continue
            line = value if kind == "line" else client.answer(json.loads(last))
            if line is None:
                continue
            line = line.rstrip(b"\n")
            before, state, done = last, session.state, session.done
            out = take(session.feed(line))
            if done or not line.strip(JSON_WHITESPACE):
                assert out == []
                continue
            assert len(out) == 1, (line[:80], out)
            event = check_event(out[0])
            if event["error"]:
                assert vm_and_waiting_for_bytes(out[0]) == vm_and_waiting_for_bytes(before)
                assert event["done"] is False and session.state == state
            last = out[0]
    finally:
        host.close()


@pytest.mark.parametrize("command", ["generate", "login", "config", "update", "version"])
def test_a_session_is_freed_without_the_cyclic_collector(command: str) -> None:
    # The driver holds its runtime, not its session: dropping the session frees both.
    import gc
    import weakref

    from simulator.launch import build_session

    enabled = gc.isenabled()
    gc.disable()
    try:
        session = build_session(command, ("-y",) if command == "generate" else ())
        session.start()
        while (deadline := session.next_deadline()) is not None and not session.done:
            session.advance(deadline)
        if not session.done:
            session.quit()
        session_ref, driver_ref = weakref.ref(session), weakref.ref(session.driver)
        del session
        assert session_ref() is None and driver_ref() is None
    finally:
        if enabled:
            gc.enable()


def test_what_a_session_keeps_of_its_lines_is_bounded_and_counted() -> None:
    from simulator.core.transcript import FIRST_VIOLATIONS, RECENT_LINES, RECENT_VIOLATIONS

    session = new_session("config")
    session.start()
    heard: list[bytes] = []
    session.transcript.listener = lambda entry: heard.append(entry.line)
    sent: list[bytes] = []
    for n in range(1500):
        bad = f'{{"type":"nope{n}"}}'.encode()
        good = b'{"type":"update_fields","params":{"fields":{}}}'
        for line in (bad, good):
            assert len(session.feed(line)) == 1  # every line still answered
            sent.append(line)
    assert heard == sent  # every line handed over as it came
    assert session.transcript.total == 3000
    assert session.transcript.total_violations == 1500
    assert [e.line for e in session.journal] == sent[-RECENT_LINES:]
    names = [json.loads(e.line)["type"] for e in session.violations]
    assert names == [
        *(f"nope{n}" for n in range(FIRST_VIOLATIONS)),
        *(f"nope{n}" for n in range(1500 - RECENT_VIOLATIONS, 1500)),
    ]
    assert session.violations[0].error == 'command "nope0" not allowed in state editing'
