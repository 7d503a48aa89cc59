"""simulator.tools.conformance: the check of both sides against the charts, and its
report.

Events here are the simulator's own lines (a real process's first event, and events
built from them), so the check is held against what a chart-true zread writes; the
recording itself, over real pipes, is in tests/e2e/test_record_e2e.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from simulator.tools.conformance import Checker, check_cassette, command_of, report
from tests.tools.recording import cassette, event, line


def running(**extra: Any) -> dict[str, Any]:
    vm: dict[str, Any] = {
        "state": "running",
        "max_retries": 2,
        "select_action": {"scenario": "", "draft_done": 0, "draft_total": 0, "next_action": ""},
        "catalog": {"status": "done", "tool_name": "", "error": "", "auto_retry": 0},
        "pages": {"tasks": [], "done": 0, "total": 0, "waiting_retry": False},
        "done_total": 0,
        "error": "",
    }
    vm.update(extra)
    return vm


def messages(checker: Checker) -> list[str]:
    return [d.message for d in checker.deviations]


def feed(checker: Checker, *lines: tuple[str, bytes]) -> Checker:
    counts = {"in": 0, "out": 0, "err": 0}
    for direction, raw in lines:
        counts[direction] += 1
        checker.feed(direction, counts[direction], 0.0, raw)
    return checker


# -- the check: zread's side -----------------------------------------------------------


def test_the_simulators_own_first_event_is_clean_for_every_command() -> None:
    for command, extra in [("config", []), ("generate", ["-y"]), ("version", [])]:
        proc = subprocess.run(
            [sys.executable, "-m", "simulator", command, "--stdio", "--no-files", *extra],
            input=b'{"type":"quit"}\n',
            capture_output=True,
            timeout=20,
            check=True,
        )
        checker = Checker(command)
        for n, raw in enumerate(proc.stdout.splitlines(), 1):
            checker.feed("out", n, 0.0, raw)
        checker.finish(proc.returncode, 1.0)
        assert checker.clean, [str(d) for d in checker.deviations]


def test_several_chart_states_sharing_one_vm_state_each_offer_their_gate() -> None:
    # generate's running is four chart states: catalog, pages, catalog_error, retry_gate.
    checker = feed(
        Checker("generate"),
        ("out", event(running(), ["quit", "cancel"])),
        ("out", event(running(), ["quit", "retry_catalog"])),
        ("out", event(running(), ["quit", "retry", "skip_all"])),
        ("out", event(running(state="done"), [], done=True)),
    )
    assert checker.clean, messages(checker)
    checker = feed(Checker("generate"), ("out", event(running(), ["quit"])))
    assert messages(checker) == [
        'zread did offer waiting_for ["quit"] in state running where the chart expects '
        '["quit","cancel"] or ["quit","retry_catalog"] or ["quit","retry","skip_all"]'
    ]


def test_a_wrong_waiting_for_and_an_unknown_vm_field_are_named_with_their_line() -> None:
    checker = Checker("generate")
    checker.feed("out", 7, 1.5, event(running(bogus=1), ["quit", "cancel"]))
    checker.feed("out", 8, 1.6, event(running(state="select_action"), ["quit"]))
    first, second = checker.deviations
    assert first.n == 7
    assert 'zread did show the vm field "bogus" where the chart expects only' in first.message
    assert str(first).startswith("stdout line 7 (t=1.500s): zread did show")
    assert str(first).endswith(event(running(bogus=1), ["quit", "cancel"]).decode())
    assert second.message == (
        'zread did offer waiting_for ["quit"] in state select_action where the chart expects '
        '["select_action","cancel","quit"]'
    )


def test_nested_fields_missing_fields_unknown_states_and_terminal_states() -> None:
    vm = running()
    vm["catalog"] = {"status": "done", "tool_name": "", "error": "", "auto_retry": 0, "x": 1}
    del vm["done_total"]
    checker = feed(
        Checker("generate"),
        ("out", event(vm, ["quit", "cancel"])),
        ("out", event(running(state="thinking"), [])),
        ("out", event(running(state="done"), [])),
    )
    found = messages(checker)
    assert any('"catalog.x" where the chart expects only the fields of Catalog' in m for m in found)
    assert any('leave out the vm field "done_total"' in m for m in found)
    assert any('vm.state "thinking" where the chart expects one of' in m for m in found)
    assert "zread did write done:false in state done where the chart expects done:true" in (
        " ".join(found)
    )
    # A field declared "present when ..." (msgspec.UNSET) may be left out.
    login = {"state": "select_region", "browser_warn": "", "selected_model": "", "error": ""}
    checker = feed(
        Checker("login"),
        ("out", event({**login, "wants_llm_provider_editor": False}, ["select_region", "quit"])),
    )
    assert checker.clean, messages(checker)


def test_the_envelope_key_order_types_and_nothing_after_done() -> None:
    vm = {"version": "0.2.13", "channel": "", "go_version": "go1", "os": "linux", "arch": "amd64"}
    bad_order = line({"waiting_for": [], "vm": vm, "done": True, "error": ""})
    checker = feed(
        Checker("version"),
        ("out", bad_order),
        ("out", event(vm, [], done=True)),
        ("out", b"not json"),
    )
    assert messages(checker) == [
        'zread did write the keys ["waiting_for","vm","done","error"] where the chart expects '
        '["vm","waiting_for","done","error"] in that order',
        "zread did write a line after its done:true event where the chart expects nothing",
        "zread did write a line after its done:true event where the chart expects nothing",
    ]
    checker = feed(Checker(None), ("out", b"{oops"), ("out", line({"vm": 1})))
    found = messages(checker)
    assert found[0].startswith("zread did write a line that is not JSON")
    assert any('"vm":1 where the chart expects an object' in m for m in found)


def test_a_rejected_command_must_repeat_the_vm_and_waiting_for() -> None:
    edit = ["update_fields", "save", "reload_llm", "quit"]
    vm = {"fields": [], "dirty": False, "saved": False, "error": ""}
    checker = feed(
        Checker("config"),
        ("out", event(vm, edit)),
        ("out", event(vm, edit, error='command "x" not allowed in state editing')),
        ("out", event({**vm, "dirty": True}, ["quit"], error="invalid params: no")),
    )
    assert messages(checker) == [
        "zread did change the vm in an error event where the chart expects the previous "
        "event's vm repeated",
        'zread did offer waiting_for ["quit"] in an error event where the chart expects the '
        'previous ["update_fields","save","reload_llm","quit"] repeated',
    ]


def test_an_event_given_decoded_is_judged_as_its_line() -> None:
    edit = ["update_fields", "save", "reload_llm", "quit"]
    vm = {"fields": [], "dirty": False, "saved": False, "error": ""}
    lines = [
        event(vm, edit),
        event({**vm, "dirty": True}, ["quit"], error="invalid params: no"),
        event({**vm, "extra": 1}, ["save"]),
    ]
    from_lines, from_decoded = Checker("config"), Checker("config")
    for n, raw in enumerate(lines, 1):
        from_lines.feed("out", n, 0.0, raw)
        from_decoded.feed("out", n, 0.0, raw, json.loads(raw))
    assert messages(from_decoded) == messages(from_lines) and len(messages(from_lines)) >= 3


def test_an_exit_without_done_is_a_deviation_at_exit() -> None:
    checker = Checker("config")
    checker.finish(3, 2.0)
    (deviation,) = checker.deviations
    assert str(deviation) == (
        "at exit (t=2.000s): zread did exit with code 3 without a done:true event where the "
        "chart expects the last event to have done:true"
    )


# -- the check: the client's side ------------------------------------------------------


def test_the_client_must_send_what_the_last_event_offers() -> None:
    gate = event(running(state="select_action"), ["select_action", "cancel", "quit"])
    checker = feed(
        Checker("generate"),
        ("in", line({"type": "select_action", "params": {"action": "generate"}})),
        ("out", gate),
        ("in", line({"type": "retry", "params": {"task_id": 1}})),
        ("in", line({"type": "select_action", "params": {"action": 3}})),
        ("in", line({"type": "cancel", "params": []})),
        ("in", b"   "),
        ("in", b"[1]"),
        ("in", line({"type": "select_action", "params": {"action": "generate"}})),
        ("in", line({"type": "quit"})),
        ("out", event(running(), [])),
        ("in", line({"type": "cancel"})),
        ("in", line({"type": "quit"})),
        ("out", event(running(), [], done=True)),
        ("in", line({"type": "quit"})),
    )
    assert [(d.n, d.message) for d in checker.deviations if d.direction == "in"] == [
        (1, 'the client sent "select_action" before the first event where zread waits for '
         "nothing yet"),
        (2, 'the client sent "retry" where zread waits for one of "select_action", "cancel", '
         '"quit"'),
        (3, 'the client sent "select_action" with params that do not fit (action: expected a '
         "string, got an integer) where zread waits for ActionParams"),
        (4, 'the client sent "cancel" with params [] where zread waits for an object'),
        (6, "the client sent a line that is not a JSON object where zread waits for a command"),
        (9, 'the client sent "cancel" where zread waits for nothing (an internal result is '
         "pending; only quit is accepted)"),
        (11, 'the client sent "quit" after done:true where zread waits for nothing'),
    ]  # fmt: skip


def test_the_client_is_checked_as_zread_decodes_its_lines() -> None:
    gate = event(running(state="select_action"), ["select_action", "cancel", "quit"])
    checker = feed(
        Checker("generate"),
        ("out", gate),
        ("in", b'{"Type":"select_action","PARAMS":{"Action":"generate"}}'),
        ("in", b'{"type":"cancel","params":null}'),
        ("in", b'{"type":"select_action","type":"retry"}'),  # the last key wins
    )
    assert messages(checker) == [
        'the client sent "retry" where zread waits for one of "select_action", "cancel", "quit"'
    ]


# -- a cassette's check and its report -------------------------------------------------


def test_command_of_finds_the_zread_command_in_an_argv() -> None:
    assert command_of(["zread", "generate", "--stdio", "-y"]) == "generate"
    assert command_of(["python", "-m", "simulator", "config", "--stdio"]) == "config"
    assert command_of(["zread"]) is None


def test_the_report_of_a_cassette_hides_the_keys_its_lines_name() -> None:
    sent = '{"type":"update_fields","params":{"fields":{"llm_api_key":"sk-old-cassette"}}}'
    lines = [
        {"t": 0.0, "dir": "in", "n": 1, "line": sent},  # before the first event: a deviation
        {"t": 0.1, "dir": "in", "n": 2, "line": "{'note': 'sk-old-cassette'}"},
    ]
    recorded = cassette(lines, command="config")
    text = "\n".join(report(check_cassette(recorded), recorded))
    assert "deviation" in text and "sk-old-cassette" not in text


# -- the check by envelope --------------------------------------------------------------


def _head(waiting_for: Any, done: Any = False, error: Any = "") -> dict[str, Any]:
    return {"waiting_for": waiting_for, "done": done, "error": error}


def test_an_event_judged_by_its_envelope_finds_what_its_head_shows() -> None:
    checker = Checker("generate")
    checker.feed_envelope(1, 0.0, b"{}\n", _head(["quit", "cancel"]))
    checker.feed_envelope(2, 0.1, b'{"a":1}\n', _head(["nope"]))
    checker.feed_envelope(3, 0.2, b"{}", _head("quit"))
    checker.feed_envelope(4, 0.3, b"{}", _head(["quit"], error="command x not allowed"))
    checker.feed_envelope(5, 0.4, b"{}", _head(["quit"], done=True))
    checker.feed_envelope(6, 0.5, b"{}", _head([], done=True))  # after a done:true
    found = [(d.n, d.message) for d in checker.deviations]
    assert found[0][0] == 2 and 'waiting_for ["nope"] where the chart expects' in found[0][1]
    assert checker.deviations[0].line == '{"a":1}'  # shown without its newline
    assert (
        3,
        'zread did write "waiting_for":"quit" where the chart expects a list of strings',
    ) in found
    assert (
        4,
        'zread did offer waiting_for ["quit"] in an error event where the chart '
        'expects the previous ["nope"] repeated',
    ) in found
    assert (
        5,
        'zread did offer waiting_for ["quit"] with done:true where the chart expects []',
    ) in found
    assert (
        6,
        "zread did write a line after its done:true event where the chart expects nothing",
    ) in found
    assert [n for n, _ in found] == [2, 3, 4, 5, 6]
    clean = Checker("generate")
    clean.feed_envelope(1, 0.0, b"{}", _head(["quit", "cancel"]))
    clean.feed_envelope(2, 0.1, b"{}", _head([], done=True))
    clean.finish(0, 0.2)
    assert clean.clean


def test_a_whole_run_judged_by_its_envelope_is_clean_as_it_is_in_full() -> None:
    from simulator.locust_user.event import read_head

    argv = [sys.executable, "-m", "simulator", "generate", "--stdio", "-y", "--no-files"]
    argv += ["--speed", "0", "--scenario", "flaky-pages", "--seed", "3"]
    out = subprocess.run(argv, input=b"", capture_output=True, check=True, timeout=30).stdout
    full, envelope = Checker("generate"), Checker("generate")
    for n, raw in enumerate(out.splitlines(), 1):
        full.feed("out", n, 0.0, raw)
        head = read_head(raw)
        assert head is not None
        envelope.feed_envelope(n, 0.0, raw, head)
    for checker in (full, envelope):
        checker.finish(0, 1.0)
        assert checker.clean, checker.deviations
    # A command the last event did not offer is found as in full.
    envelope.feed("in", 1, 1.0, b'{"type":"retry","params":{}}')
    assert "after done:true" in messages(envelope)[0]
