"""FaultPlan: which transport faults fire at which event, and the actions each one asks for."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from simulator.scenario.faults import (
    KINDS,
    CloseStdout,
    Exit,
    Fault,
    FaultPlan,
    Hang,
    Pause,
    Stderr,
    StopReading,
    Write,
)

LINE = (
    b'{"vm":{"state":"running","catalog":{"status":"running","tool_name":"list_dir"}},'
    b'"waiting_for":["quit","cancel"],"done":false,"error":""}\n'
)
BODY = len(LINE) - 1


def fault(**fields: Any) -> Fault:
    """A Fault as a scenario file declares it (validated like one)."""
    return msgspec.convert(fields, Fault)


def plan(*faults: Fault, seed: int = 0, speed: float = 1.0) -> FaultPlan:
    return FaultPlan(list(faults), random.Random(seed), speed=speed)


def run(p: FaultPlan, states: list[str], line: bytes = LINE) -> list[list[Any]]:
    """The actions for one event per entry of ``states``."""
    return [p.actions(line, state) for state in states]


def fired(actions: list[list[Any]], line: bytes = LINE) -> list[int]:
    """The 1-based events whose actions are anything but the one plain write."""
    return [i for i, acts in enumerate(actions, start=1) if acts != [Write(line)]]


def written(actions: list[Any]) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, Write))


# -- no fault -----------------------------------------------------------------------


def test_kinds_are_the_documented_ten() -> None:
    assert set(KINDS) == {
        "diagnostic",
        "stderr",
        "split",
        "truncate",
        "invalid_utf8",
        "duplicate",
        "exit",
        "hang",
        "close_stdout",
        "stop_reading",
    }


def test_no_faults_is_exactly_one_write_of_the_line() -> None:
    p = plan()
    assert not p
    for state in ["running", "running", "done"]:
        assert p.actions(LINE, state) == [Write(LINE)]


def test_passed_if_none_counts_only_without_faults() -> None:
    p = plan()
    assert p.passed_if_none(2, "running") is True
    p.add(Fault(kind="diagnostic", text="now"), now=True)
    assert p.passed_if_none(1, "running") is False  # nothing counted
    assert fired(run(p, ["running"]), LINE) == [1]  # the third event, the first after


def test_a_fault_that_does_not_fire_leaves_the_line_alone() -> None:
    p = plan(fault(kind="truncate", after_event=99))
    assert p
    assert run(p, ["a"] * 5) == [[Write(LINE)]] * 5


# -- what each kind does ------------------------------------------------------------


@pytest.mark.parametrize("pieces", [2, 3, 5])
def test_split_writes_pieces_whose_concatenation_is_the_line(pieces: int) -> None:
    actions = plan(fault(kind="split", pieces=pieces, pause=0.05, times=1)).actions(LINE, "a")
    writes = [a for a in actions if isinstance(a, Write)]
    assert len(writes) == pieces
    assert all(w.data for w in writes)
    assert written(actions) == LINE
    # Write, Pause, Write, Pause, ..., Write: a pause between pieces, none at the ends.
    assert [type(a) for a in actions] == [Write, Pause] * (pieces - 1) + [Write]
    assert all(a == Pause(0.05) for a in actions if isinstance(a, Pause))


@pytest.mark.parametrize(("length", "pieces"), [(400, 30), (100, 7), (64, 64)])
def test_split_writes_exactly_pieces_writes_whatever_the_line_length(
    length: int, pieces: int
) -> None:
    line = b"x" * (length - 1) + b"\n"
    actions = plan(fault(kind="split", pieces=pieces)).actions(line, "a")
    assert written(actions) == line
    assert sum(isinstance(a, Write) for a in actions) == pieces


@pytest.mark.parametrize(("speed", "expected"), [(1.0, 0.2), (2.5, 0.5), (0.0, 0.0)])
def test_split_pause_is_multiplied_by_the_speed(speed: float, expected: float) -> None:
    actions = plan(fault(kind="split", pause=0.2), speed=speed).actions(LINE, "a")
    pauses = [a.seconds for a in actions if isinstance(a, Pause)]
    assert pauses and all(s == pytest.approx(expected) for s in pauses)


def test_truncate_writes_half_the_line_then_a_newline() -> None:
    actions = plan(fault(kind="truncate")).actions(LINE, "a")
    assert actions == [Write(LINE[: BODY // 2] + b"\n")]
    data = actions[0].data
    assert LINE.startswith(data[:-1]) and len(data) < len(LINE)
    with pytest.raises(json.JSONDecodeError):
        json.loads(data)


def test_truncate_at_byte() -> None:
    assert plan(fault(kind="truncate", at_byte=10)).actions(LINE, "a") == [Write(LINE[:10] + b"\n")]


def test_duplicate_writes_the_line_twice() -> None:
    assert plan(fault(kind="duplicate")).actions(LINE, "a") == [Write(LINE), Write(LINE)]


def test_exit_between_lines_writes_the_line_then_exits() -> None:
    assert plan(fault(kind="exit")).actions(LINE, "a") == [Write(LINE), Exit(1)]
    assert plan(fault(kind="exit", code=7)).actions(LINE, "a") == [Write(LINE), Exit(7)]
    assert plan(fault(kind="exit", code=0)).actions(LINE, "a") == [Write(LINE), Exit(0)]


def test_exit_mid_line_writes_a_prefix_then_exits() -> None:
    actions = plan(fault(kind="exit", mid_line=True, code=3)).actions(LINE, "a")
    assert actions == [Write(LINE[: BODY // 2]), Exit(3)]
    assert not actions[0].data.endswith(b"\n")
    at = plan(fault(kind="exit", mid_line=True, at_byte=5)).actions(LINE, "a")
    assert at == [Write(LINE[:5]), Exit(1)]


def test_diagnostic_writes_the_line_then_its_text() -> None:
    actions = plan(fault(kind="diagnostic", text="warning: hello")).actions(LINE, "a")
    assert actions == [Write(LINE), Write(b"warning: hello\n")]


def test_diagnostic_without_text_writes_one_non_json_line() -> None:
    for seed in range(10):
        actions = plan(fault(kind="diagnostic"), seed=seed).actions(LINE, "a")
        assert actions[0] == Write(LINE) and len(actions) == 2
        extra = actions[1].data
        assert extra.endswith(b"\n") and extra.count(b"\n") == 1 and extra.strip()
        extra.decode("utf-8")
        with pytest.raises(json.JSONDecodeError):
            json.loads(extra)


def test_stderr_writes_the_line_then_a_stderr_line() -> None:
    assert plan(fault(kind="stderr", text="oops")).actions(LINE, "a") == [
        Write(LINE),
        Stderr("oops"),
    ]
    drawn = plan(fault(kind="stderr")).actions(LINE, "a")
    assert drawn[0] == Write(LINE) and isinstance(drawn[1], Stderr) and drawn[1].line


def test_invalid_utf8_writes_the_line_then_a_line_that_is_not_utf8() -> None:
    actions = plan(fault(kind="invalid_utf8")).actions(LINE, "a")
    assert actions[0] == Write(LINE) and len(actions) == 2
    bad = actions[1].data
    assert bad.endswith(b"\n") and bad.count(b"\n") == 1
    with pytest.raises(UnicodeDecodeError):
        bad.decode("utf-8")


@pytest.mark.parametrize(
    ("kind", "action"),
    [("hang", Hang()), ("close_stdout", CloseStdout()), ("stop_reading", StopReading())],
)
def test_hang_close_stdout_stop_reading_come_after_the_line(kind: str, action: Any) -> None:
    assert plan(fault(kind=kind)).actions(LINE, "a") == [Write(LINE), action]


# -- when a fault fires -------------------------------------------------------------


def test_without_a_trigger_a_fault_fires_at_every_event() -> None:
    assert fired(run(plan(fault(kind="duplicate")), ["a", "a", "b"])) == [1, 2, 3]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_after_event_fires_at_exactly_that_event(n: int) -> None:
    actions = run(plan(fault(kind="duplicate", after_event=n)), ["a"] * 8)
    assert fired(actions) == [n]
    assert actions[n - 1] == [Write(LINE), Write(LINE)]


def test_on_state_fires_on_entering_the_state_only() -> None:
    states = ["a", "b", "b", "c", "b", "b", "b"]
    actions = run(plan(fault(kind="duplicate", on_state="b")), states)
    # Entered at event 2 and again at 5; events 3, 6, 7 keep the state: no fault.
    assert fired(actions) == [2, 5]


def test_on_state_counts_the_first_event_as_entering() -> None:
    assert fired(run(plan(fault(kind="duplicate", on_state="a")), ["a", "a", "b"])) == [1]


def test_on_state_never_fires_for_a_state_never_shown() -> None:
    assert fired(run(plan(fault(kind="duplicate", on_state="zzz")), ["a", "b", "a"])) == []


def test_after_event_and_on_state_must_both_hold() -> None:
    states = ["a", "b", "a", "b"]
    assert fired(run(plan(fault(kind="duplicate", on_state="b", after_event=4)), states)) == [4]
    assert fired(run(plan(fault(kind="duplicate", on_state="b", after_event=3)), states)) == []


def test_probability_zero_never_fires() -> None:
    assert fired(run(plan(fault(kind="duplicate", probability=0.0)), ["a"] * 500)) == []


def test_probability_one_always_fires() -> None:
    assert len(fired(run(plan(fault(kind="duplicate", probability=1.0)), ["a"] * 200))) == 200


def test_probability_fires_about_that_often() -> None:
    hits = fired(run(plan(fault(kind="duplicate", probability=0.3), seed=11), ["a"] * 4000))
    assert 0.26 < len(hits) / 4000 < 0.34


def test_probability_is_reproducible_from_the_seeded_random() -> None:
    def pattern(seed: int) -> list[int]:
        p = plan(fault(kind="diagnostic", probability=0.4), fault(kind="stderr"), seed=seed)
        return fired(run(p, ["a"] * 300))

    def texts(seed: int) -> list[list[Any]]:
        p = plan(fault(kind="diagnostic", probability=0.4), seed=seed)
        return run(p, ["a"] * 300)

    assert texts(5) == texts(5)
    assert texts(5) != texts(6)
    assert pattern(5) == pattern(5)


def test_times_caps_how_often_a_fault_fires() -> None:
    assert fired(run(plan(fault(kind="duplicate", times=2)), ["a"] * 6)) == [1, 2]
    capped = run(plan(fault(kind="duplicate", probability=0.5, times=3), seed=1), ["a"] * 200)
    assert len(fired(capped)) == 3


def test_times_counts_on_state_entries() -> None:
    states = ["a", "b", "a", "b", "a", "b"]
    assert fired(run(plan(fault(kind="duplicate", on_state="b", times=2)), states)) == [2, 4]


def test_each_fault_keeps_its_own_count() -> None:
    p = plan(fault(kind="stderr", text="x", times=1), fault(kind="diagnostic", text="y", times=2))
    acts = run(p, ["a"] * 3)
    assert acts[0] == [Write(LINE), Stderr("x"), Write(b"y\n")]
    assert acts[1] == [Write(LINE), Write(b"y\n")]
    assert acts[2] == [Write(LINE)]


# -- several faults at one event ----------------------------------------------------


def test_several_faults_at_one_event_combine() -> None:
    p = plan(
        fault(kind="duplicate"),
        fault(kind="diagnostic", text="noise"),
        fault(kind="stderr", text="err"),
    )
    assert p.actions(LINE, "a") == [Write(LINE), Write(LINE), Write(b"noise\n"), Stderr("err")]


def test_split_then_duplicate_at_one_event_sends_the_line_twice() -> None:
    actions = plan(fault(kind="split"), fault(kind="duplicate")).actions(LINE, "a")
    assert written(actions) == LINE + LINE


def test_duplicate_then_split_at_one_event_sends_the_line_twice() -> None:
    actions = plan(fault(kind="duplicate"), fault(kind="split")).actions(LINE, "a")
    assert written(actions) == LINE + LINE


def test_a_change_and_an_addition_at_one_event() -> None:
    actions = plan(fault(kind="truncate", at_byte=4), fault(kind="stderr", text="e")).actions(
        LINE, "a"
    )
    assert actions == [Write(LINE[:4] + b"\n"), Stderr("e")]


def test_exit_listed_first_still_lets_the_other_faults_of_its_event_act() -> None:
    actions = plan(fault(kind="exit", code=4), fault(kind="diagnostic", text="bye")).actions(
        LINE, "a"
    )
    assert actions[-1] == Exit(4)
    assert Write(b"bye\n") in actions


# -- validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "explode"},
        {},
        {"kind": "split", "pieces": 1},
        {"kind": "split", "pieces": "3"},
        {"kind": "split", "pause": -0.1},
        {"kind": "duplicate", "after_event": -1},
        {"kind": "duplicate", "times": -1},
        {"kind": "truncate", "at_byte": -1},
        {"kind": "duplicate", "probability": 1.5},
        {"kind": "duplicate", "probability": -0.1},
        {"kind": "exit", "code": 256},
        {"kind": "exit", "code": -1},
        {"kind": "exit", "mid_line": "yes"},
        {"kind": "duplicate", "on_state": 3},
        {"kind": "duplicate", "toxicity": 0.5},
    ],
)
def test_invalid_faults_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(fields, Fault)


def test_fault_defaults() -> None:
    f = fault(kind="split")
    assert (f.after_event, f.on_state, f.probability, f.times) == (0, "", 1.0, 0)
    assert (f.text, f.pieces, f.pause, f.at_byte, f.code, f.mid_line) == (
        "",
        3,
        0.05,
        0,
        1,
        False,
    )


# -- ids, listing and removal -----------------------------------------------------------


def test_faults_have_ids_in_order_the_scenarios_first() -> None:
    p = plan(fault(kind="diagnostic", after_event=3), fault(kind="stderr", on_state="done"))
    assert p.add(fault(kind="split", times=2)) == "fault-3"
    assert p.add(fault(kind="duplicate"), now=True) == "fault-4"
    entries = p.entries()
    assert [(e["id"], e["kind"], e["source"]) for e in entries] == [
        ("fault-1", "diagnostic", "scenario"),
        ("fault-2", "stderr", "scenario"),
        ("fault-3", "split", "injected"),
        ("fault-4", "duplicate", "injected"),
    ]
    assert [e["where"] for e in entries] == [
        {"after_event": 3},
        {"on_state": "done"},
        {},
        {"after_event": 1},
    ]
    assert [e["left"] for e in entries] == [
        {"after_event": 3},
        {},
        {"times": 2},
        {"after_event": 1},
    ]


def test_entries_count_what_fired_and_what_is_left() -> None:
    p = plan(fault(kind="diagnostic", after_event=2), fault(kind="stderr", times=2))
    run(p, ["running", "running", "running"])
    diagnostic, stderr = p.entries()
    assert diagnostic["fired"] == 1 and diagnostic["left"] == {"after_event": 0}
    assert stderr["fired"] == 2 and stderr["left"] == {"times": 0}
    p.add(fault(kind="diagnostic", probability=0.5))
    assert p.entries()[-1]["where"] == {"probability": 0.5}


def test_remove_and_clear_leave_the_scenarios_list_as_it_was() -> None:
    declared = [fault(kind="diagnostic", text="one"), fault(kind="diagnostic", text="two")]
    p = FaultPlan(declared, random.Random(0))
    run(p, ["running"])
    assert p.remove("fault-1") is True and p.remove("fault-1") is False
    assert p.remove("failure-2") is False
    assert written(p.actions(LINE, "running")) == LINE + b"two\n"
    assert [e["id"] for e in p.entries()] == ["fault-2"]
    assert p.fired == {"diagnostic"}  # what fired is still known once removed
    p.clear()
    assert not p and p.entries() == [] and p.actions(LINE, "running") == [Write(LINE)]
    assert p.fired == {"diagnostic"}
    assert len(declared) == 2  # another session of the scenario still has them
    assert p.add(fault(kind="hang")) == "fault-3"
