"""Tests for simulator.runners.virtual: a zread session driven by a test, in virtual time.

Everything here runs the real charts against the real scenarios; the only thing that is
not the process's is the clock, which moves only when the test waits or advances.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from simulator.runners.virtual import SimSession, SimulationError, TranscriptLine, ZreadSim, start
from simulator.scenario import ScenarioError, builtin_names, load_scenario
from simulator.tools.client import ReferenceClient

COMMANDS: list[tuple[str, ...]] = [
    ("generate",),
    ("generate", "-y"),
    ("browse",),
    ("config",),
    ("login",),
    ("update",),
    ("version",),
]
"""Every command zread has, generate both with and without its prompt."""


def drive(session: SimSession) -> dict[str, Any]:
    """Run ``session`` to its end with a :class:`ReferenceClient`; the done event."""
    client = ReferenceClient()
    while True:
        event = session.wait_for(lambda _: True)
        line = client.answer(event)
        if line is not None:
            answer = session.send_line(line.rstrip(b"\n"))
            assert len(answer) == 1 and answer[0]["error"] == "", answer
        if event["done"]:
            return event


def out_lines(session: SimSession) -> list[bytes]:
    return [line.data for line in session.transcript if line.direction == "out"]


def refused(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.URLError as err:
        return isinstance(err.reason, ConnectionRefusedError)
    return False


# -- events and transcript ---------------------------------------------------------------


def test_events_are_the_decoded_bytes_on_the_wire() -> None:
    with start("generate", "-y") as session:
        done = session.wait_done()
        lines = out_lines(session)
        assert len(lines) == len(session.events) > 10
        for line, event in zip(lines, session.events, strict=True):
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            assert json.loads(line) == event
            assert list(event) == ["vm", "waiting_for", "done", "error"]
            # Compact, as zread writes it.
            assert b'": ' not in line and b'", "' not in line
        assert done is session.events[-1] is session.last
        assert session.vm == done["vm"] and session.waiting_for == [] and session.done


def test_transcript_has_both_directions_with_non_decreasing_times() -> None:
    with start("generate", scenario="failing-pages") as session:
        drive(session)
        directions = [line.direction for line in session.transcript]
        assert directions.count("in") == 3  # select_action, retry 3, retry 7
        assert directions[0] == "out" and directions[-1] == "out"
        times = [line.time for line in session.transcript]
        assert times == sorted(times)
        assert times[-1] == session.now > 0
        assert all(isinstance(line, TranscriptLine) for line in session.transcript)
        sent = [line.data for line in session.transcript if line.direction == "in"]
        assert sent[0] == b'{"type":"select_action","params":{"action":"generate"}}'
        assert sent[1:] == [
            b'{"type":"retry","params":{"task_id":3}}',
            b'{"type":"retry","params":{"task_id":7}}',
        ]


def test_the_same_seed_gives_the_same_bytes_and_another_seed_other_data() -> None:
    def run(seed: int) -> list[bytes]:
        with start("generate", "-y", scenario="flaky-pages", seed=seed) as session:
            session.wait_done()
            return out_lines(session)

    assert run(7) == run(7)
    assert run(7) != run(8)


# -- send --------------------------------------------------------------------------------


def test_send_answers_at_once_with_exactly_one_event() -> None:
    with start("generate") as session:
        assert session.waiting_for == ["select_action", "cancel", "quit"]
        answer = session.send("select_action", action="generate")
        assert len(answer) == 1
        assert answer[0]["vm"]["state"] == "running" and answer[0]["error"] == ""
        assert answer[0] is session.events[-1]
        assert session.now == 0.0  # an answer takes no virtual time
        assert session.transcript[-2].direction == "in"
        assert session.transcript[-2].data == (
            b'{"type":"select_action","params":{"action":"generate"}}'
        )
        rejected = session.send("select_action", action="generate")
        assert len(rejected) == 1
        assert rejected[0]["error"] == 'command "select_action" not allowed in state running'
        assert rejected[0]["vm"] == answer[0]["vm"]
        assert rejected[0]["waiting_for"] == answer[0]["waiting_for"]
        # Byte for byte the previous vm and waiting_for.
        lines = out_lines(session)
        assert lines[-1].rsplit(b',"done":', 1)[0] == lines[-2].rsplit(b',"done":', 1)[0]


def test_send_line_takes_raw_bytes_and_text() -> None:
    with start("config") as session:
        raw = b'{"type":"update_fields","params":{"fields":{"language":"de"}}}'
        (event,) = session.send_line(raw)
        assert event["vm"]["fields"][0]["value"] == "de" and event["vm"]["dirty"] is True
        assert session.transcript[-2] == TranscriptLine("in", 0.0, raw)
        (event,) = session.send_line(
            '{"type":"update_fields","params":{"fields":{"language":"日本語"}}}'
        )
        assert event["vm"]["fields"][0]["value"] == "日本語"
        (event,) = session.send_line(b"\xff not utf-8")
        assert event["error"].startswith("invalid JSON: ")
        assert session.send_line(b"   ") == []  # blank lines are ignored, as zread does
        assert len(session.session.journal) == 3
        (event,) = session.send_line(b'{"type":"save"}')
        assert event["done"] is True and event["vm"]["saved"] is True


# -- wait_for ----------------------------------------------------------------------------


def page_done(event: dict[str, Any]) -> bool:
    return any(task["state"] == "done" for task in event["vm"]["pages"]["tasks"])


def test_wait_for_returns_each_event_once_then_the_next_match() -> None:
    with start("generate", "-y") as session:
        first = session.wait_for(page_done)
        second = session.wait_for(page_done)
        assert first is not second
        assert session.events.index(second) > session.events.index(first)
        done_pages = [
            sum(t["state"] == "done" for t in e["vm"]["pages"]["tasks"]) for e in (first, second)
        ]
        assert done_pages[1] > done_pages[0] >= 1
        # The first event is behind the cursor now: a wait for it does not find it again.
        with pytest.raises(SimulationError):
            session.wait_for(lambda e: e is session.events[0])


def test_wait_for_sees_events_that_send_returned() -> None:
    with start("generate") as session:
        assert session.wait_state("select_action") is session.events[0]
        (answer,) = session.send("select_action", action="generate")
        assert session.wait_state("running") is answer


def test_wait_for_moves_virtual_time_not_wall_time() -> None:
    with start("generate", "-y") as session:
        assert session.now == 0.0
        session.wait_done()
        # 16 pages of 0.6-1.5 s, four at a time, after a catalog of a few steps.
        assert 5.0 <= session.now <= 15.0
        assert session.transcript[-1].time == session.now


def test_speed_zero_runs_every_timer_at_time_zero() -> None:
    with start("generate", "-y", speed=0) as session:
        done = session.wait_done()
        assert session.now == 0.0
        assert done["vm"]["done_total"] == 16


def test_wait_for_raises_when_the_session_ends_first() -> None:
    with start("version") as session:
        with pytest.raises(SimulationError) as info:
            session.wait_for(lambda e: e["vm"].get("state") == "never")
        message = str(info.value)
        assert "the session ended (done:true)" in message
        assert isinstance(info.value, AssertionError)


def test_wait_for_raises_when_the_client_must_speak() -> None:
    with start("generate") as session:
        with pytest.raises(SimulationError) as info:
            session.wait_done()
        message = str(info.value)
        assert "waiting for the client" in message
        assert "'select_action'" in message
        assert "['select_action', 'cancel', 'quit']" in message
        assert not session.done


def test_wait_for_raises_past_the_horizon() -> None:
    with start("login", scenario="login-timeout") as session:
        session.send("select_region", region="global")
        # The user never authorizes; the 3 s auth_timeout is the only thing left.
        with pytest.raises(SimulationError) as info:
            session.wait_state("error", horizon=1.0)
        assert "nothing matched within 1 s" in str(info.value)
        assert session.now < 3.0
        error = session.wait_state("error")
        assert error["done"] is True and error["vm"]["error"]


def test_wait_state_and_wait_done_through_an_update() -> None:
    with start("update") as session:
        gate = session.wait_state("has_update")
        assert gate["waiting_for"] == ["download", "quit"]
        session.send("download")
        first = session.wait_state("downloading")
        restart = session.wait_state("confirm_restart")
        shown = session.events[session.events.index(first) : session.events.index(restart) + 1]
        progress = [e["vm"]["download_percent"] for e in shown]
        assert len(progress) >= 4 and progress == sorted(progress) and progress[-1] == 100
        assert restart["waiting_for"] == ["restart", "skip_restart", "quit"]
        session.send("restart")
        done = session.wait_done()
        assert done["done"] is True and done["waiting_for"] == []
        assert not session.violations


# -- advance, close_stdin, close -----------------------------------------------------------


def test_advance_fires_what_is_due_and_returns_it() -> None:
    with start("generate", "-y") as session:
        fired = session.advance(1.0)
        assert session.now == 1.0
        assert fired and fired == session.events[1 : 1 + len(fired)]
        assert all(line.time <= 1.0 for line in session.transcript)
        assert session.advance(0) == []
        later = session.advance(100.0)
        assert later[-1]["done"] is True and session.now == 101.0


def test_advance_at_a_gate_only_moves_the_clock() -> None:
    with start("generate") as session:
        assert session.advance(60.0) == []
        assert session.now == 60.0 and len(session.events) == 1


def test_quit_ends_with_the_vm_as_it_stood() -> None:
    with start("generate", "-y") as session:
        session.advance(2.0)
        before = session.last
        (final,) = session.quit()
        assert final["done"] is True and final["waiting_for"] == [] and final["error"] == ""
        assert final["vm"] == before["vm"]
        lines = out_lines(session)
        assert lines[-1].split(b',"waiting_for"')[0] == lines[-2].split(b',"waiting_for"')[0]
        assert session.quit() == []
        assert not session.violations


def test_close_stdin_is_not_quit_the_run_goes_on() -> None:
    with start("generate", "-y") as session:
        assert session.close_stdin() == []
        assert session.wait_done()["vm"]["state"] == "done"
        with pytest.raises(SimulationError, match="stdin is closed"):
            session.send("quit")


def test_close_stops_the_browse_server() -> None:
    session = start("browse")
    serving = session.wait_state("serving")
    url = serving["vm"]["url"]
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/html")
        body = response.read().decode("utf-8")
    assert "<html" in body and "acme/widget" in body
    session.close()
    assert session.done and session.last["done"] is True
    assert refused(url)


def test_a_scenarios_http_faults_meet_the_browse_server_in_virtual_time() -> None:
    faulty = load_scenario(
        "faulty",
        text='extends = "default"\n[[faults.http]]\npath = "/api/wiki"\nstatus = 503\n'
        'body = "busy"\nfirst = 1\n',
    )
    with start("browse", scenario=faulty) as session:
        url = session.wait_state("serving")["vm"]["url"]
        with pytest.raises(urllib.error.HTTPError) as busy:
            urllib.request.urlopen(f"{url}/api/wiki", timeout=5)
        assert (busy.value.code, busy.value.read()) == (503, b"busy")
        with urllib.request.urlopen(f"{url}/api/wiki", timeout=5) as response:
            assert response.status == 200  # first = 1: once only


def test_quit_stops_the_browse_server_too() -> None:
    with start("browse", scenario="versions") as session:
        session.send("select_version", current=True)
        url = session.wait_state("serving")["vm"]["url"]
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200
        (final,) = session.send("quit")
        assert final["done"] is True
        assert refused(url)


def test_zread_sim_closes_every_session_it_started() -> None:
    sim = ZreadSim()
    browse = sim.start("browse", scenario="versions", seed=3)
    browse.send("select_version", current=True)
    url = browse.wait_state("serving")["vm"]["url"]
    generate = sim.start("generate", "-y", speed=0)
    assert sim.sessions == [browse, generate]
    sim.close()
    assert browse.done and generate.done and sim.sessions == []
    assert refused(url)
    assert not generate.violations and not browse.violations


# -- violations --------------------------------------------------------------------------


def test_every_kind_of_client_mistake_is_a_violation_saying_what_was_expected() -> None:
    with start("config") as session:
        expected = "update_fields, save, reload_llm, quit"
        session.send("bogus")
        session.send_line(b"{oops")
        session.send("update_fields", fields={"max_concurrent": "0"})
        session.send("update_fields", fields={"language": "fr"})  # accepted
        session.send("reload_llm")  # accepted
        session.send("save")  # accepted, ends the session
        assert session.send("save") == []  # after done: no answer, but recorded

        mistakes = session.violations
        assert [entry.line for entry in mistakes] == [
            b'{"type":"bogus","params":{}}',
            b"{oops",
            b'{"type":"update_fields","params":{"fields":{"max_concurrent":"0"}}}',
            b'{"type":"save","params":{}}',
        ]
        wrong_type, bad_json, bad_params, after_done = mistakes
        assert wrong_type.error == 'command "bogus" not allowed in state editing'
        assert bad_json.error.startswith("invalid JSON: ")
        assert bad_params.error.startswith("invalid params: ") and "max_concurrent" in (
            bad_params.error
        )
        for entry in (wrong_type, bad_json, bad_params):
            text = str(entry)
            assert entry.line.decode() in text
            assert f"expected {expected}" in text
            assert entry.error in text
            assert entry.waiting_for == ("update_fields", "save", "reload_llm", "quit")
            assert entry.state == "editing" and not entry.after_done
        assert after_done.after_done is True
        assert '{"type":"save","params":{}}' in str(after_done)
        assert "the session was done" in str(after_done)
        assert len(session.session.journal) == 7


def test_a_command_sent_while_nothing_is_expected_says_so() -> None:
    with start("update") as session:
        assert session.waiting_for == []  # checking
        session.send("download")
        (entry,) = session.violations
        assert entry.waiting_for == () and entry.state == "checking"
        assert "expected nothing (wait for the next event)" in str(entry)
        assert '{"type":"download","params":{}}' in str(entry)


@pytest.mark.parametrize(
    ("argv", "scenario", "state"),
    [
        (("generate",), "default", "select_action"),
        (("generate", "-y"), "default", "running"),
        (("generate", "-y"), "failing-pages", "retry gate"),
        (("generate", "-y"), "catalog-error", "catalog gate"),
        (("browse",), "default", "loading"),
        (("browse",), "default", "serving"),
        (("browse",), "versions", "select_version"),
        (("config",), "default", "editing"),
        (("login",), "default", "select_region"),
        (("login",), "default", "waiting"),
        (("login",), "default", "select_model"),
        (("update",), "default", "checking"),
        (("update",), "default", "has_update"),
        (("update",), "default", "downloading"),
        (("update",), "default", "confirm_restart"),
    ],
)
def test_quit_is_accepted_in_every_state(argv: tuple[str, ...], scenario: str, state: str) -> None:
    def reached(event: dict[str, Any]) -> bool:
        if state == "retry gate":
            return bool(event["vm"]["pages"]["waiting_retry"])
        if state == "catalog gate":
            return "retry_catalog" in event["waiting_for"]
        return event["vm"].get("state", "editing") == state

    with start(*argv, scenario=scenario) as session:
        client = ReferenceClient()
        while True:
            event = session.wait_for(lambda _: True)
            if reached(event):
                break
            line = client.answer(event)
            if line is not None:
                session.send_line(line.rstrip(b"\n"))
        assert event is session.last
        before = session.last
        (final,) = session.send("quit")
        assert final["done"] is True and final["waiting_for"] == [] and final["error"] == ""
        assert final["vm"] == before["vm"]
        assert not session.violations
        assert session.session.journal[-1].line == b'{"type":"quit","params":{}}'


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_well_behaved_client_has_no_violations_in_any_scenario(argv: tuple[str, ...]) -> None:
    for name in builtin_names():
        with start(*argv, scenario=name, seed=7, ignore_faults=True) as session:
            done = drive(session)
            assert done["done"] is True
            assert not session.violations, (name, [str(v) for v in session.violations])


# -- start's arguments -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("generate", "--bogus"), "--bogus"),
        (("generate", "--draft-action", "later"), "later"),
        (("login", "-y"), "-y"),
        (("browse", "--custom"), "--custom"),
        (("deploy",), "deploy"),
    ],
)
def test_bad_flags_are_a_value_error_naming_them(argv: tuple[str, ...], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        start(*argv)


def test_help_flag_is_a_value_error_not_an_exit() -> None:
    # A library call must not print usage on stdout and raise SystemExit.
    with pytest.raises(ValueError, match=r"help|-h"):
        start("generate", "--help")


def test_a_simulator_option_among_zread_flags_is_not_silently_dropped() -> None:
    # "--scenario" is not a zread flag: start() must refuse it, or honour it.
    try:
        session = start("generate", "--scenario", "empty")
        outcome = session.vm["select_action"]["scenario"]
    except ValueError as err:
        outcome = str(err)
    assert outcome == "empty" or "--scenario" in outcome, outcome


def test_scenario_by_name() -> None:
    with start("browse", scenario="empty") as session:
        assert session.last["done"] is True and session.vm["state"] == "no_wiki"


def test_scenario_from_a_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "two-pages.toml"
    path.write_text(
        'description = "two pages, page 2 fails for good"\n'
        "[world.project]\npages = 2\n"
        '[[failures]]\npoint = "page"\ntarget = 2\nfirst = 3\nerror = "page: boom"\n',
        encoding="utf-8",
    )
    with start("generate", "-y", scenario=str(path)) as session:
        gate = session.wait_for(lambda e: e["vm"]["pages"]["waiting_retry"])
        tasks = gate["vm"]["pages"]["tasks"]
        assert [t["state"] for t in tasks] == ["done", "failed"]
        assert tasks[1]["error"] == "page: boom"
        assert gate["waiting_for"] == ["quit", "retry", "skip_all"]
        (answer,) = session.send("skip_all")
        assert answer["done"] is True and answer["vm"]["done_total"] == 1


def test_scenario_as_a_loaded_object() -> None:
    scenario = load_scenario("versions")
    with start("browse", scenario=scenario) as session:
        assert session.vm["state"] == "select_version"
        assert len(session.vm["versions"]) == 3
    sim = ZreadSim()
    try:
        other = sim.start("browse", scenario=scenario)
        assert other.events == session.events[:1]
    finally:
        sim.close()


def test_an_api_key_is_shown_in_the_events_but_never_in_the_record() -> None:
    sim = start("config")
    sim.send("update_fields", fields={"llm_api_key": "sk-live-secret"})
    sim.send("update_fields", fields={"llm_api_key": 5})  # rejected: a violation
    assert sim.events[-2]["vm"]["fields"][8]["value"] == "sk-live-secret"  # as zread shows
    record = [
        repr(sim.transcript),
        repr(sim.violations),
        str(sim.violations[0]),
        repr(sim.session.journal),
        json.dumps(sim.session.snapshot()),
    ]
    for text in record:
        assert "sk-live-secret" not in text
        assert "sk-sim-" not in text  # the scenario's own key, shown at start
    assert "***" in record[0]
    assert sim.session.snapshot()["vm"]["fields"][8]["value"] == "***"


@pytest.mark.parametrize("name", ["hang", "crash", "noisy"])
def test_a_scenario_with_transport_faults_is_refused_naming_them(name: str) -> None:
    kinds = sorted({fault.kind for fault in load_scenario(name).faults})
    with pytest.raises(ScenarioError, match=rf"{name}.*\({', '.join(kinds)}\).*zread_bin"):
        start("generate", "-y", scenario=name)
    with pytest.raises(ScenarioError, match="transport faults"):
        ZreadSim().start("generate", scenario=load_scenario(name))


def test_ignore_faults_plays_the_events_without_them() -> None:
    with start("generate", "-y", scenario="hang", speed=0, ignore_faults=True) as session:
        assert session.wait_done()["vm"]["state"] == "done"


# -- the test as the control peer --------------------------------------------------------

PEER_LOGIN = '[world.login]\napprover = "control"\n'


def peer_login(tmp_path: Path, *, peer: bool = True) -> SimSession:
    scenario = tmp_path / "peer.toml"
    scenario.write_text(PEER_LOGIN, encoding="utf-8")
    session = start("login", scenario=str(scenario), peer=peer)
    session.send("select_region", region="cn")
    session.wait_state("waiting")
    return session


def test_a_peer_answers_login_s_approval_request(tmp_path: Path) -> None:
    session = peer_login(tmp_path)
    assert session.approval is not None
    assert session.approval["authorize_url"] == session.vm["authorize_url"]
    assert session.approval["auth_timeout"] == session.vm["auth_timeout"]
    events = session.answer_approval(True)
    assert [e["vm"]["state"] for e in events] == ["select_model"]
    assert session.approval is None
    with pytest.raises(SimulationError, match="no approval request is pending"):
        session.answer_approval(True)


def test_a_peer_that_denies_ends_login_in_error(tmp_path: Path) -> None:
    session = peer_login(tmp_path)
    (event,) = session.answer_approval(False, "not this time")
    assert event["done"] and event["vm"]["state"] == "error"
    assert event["vm"]["error"] == "not this time"


def test_without_a_peer_nobody_is_asked(tmp_path: Path) -> None:
    session = peer_login(tmp_path, peer=False)
    assert session.approval is None
    assert session.wait_state("select_model")["vm"]["state"] == "select_model"


def test_the_timeout_withdraws_the_request(tmp_path: Path) -> None:
    session = peer_login(tmp_path)
    assert session.wait_done()["vm"]["error"] == "authorization timed out"
    assert session.approval is None


def test_start_refuses_a_missing_folder_in_the_words_of_the_command_line(tmp_path: Path) -> None:
    from simulator.errors import ConfigurationError

    missing = tmp_path / "typo" / "proj"
    with pytest.raises(ConfigurationError) as caught:
        start("generate", "-y", project=missing, home=tmp_path)
    assert str(caught.value) == f"project {missing}: no such folder; zread-sim creates none"
    with pytest.raises(ConfigurationError, match=r"^home .*nohome: no such folder; zread-sim"):
        start("config", home=tmp_path / "nohome")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["generate", "update", "config", "login", "version", "browse"])
@pytest.mark.parametrize("scenario", builtin_names())
def test_which_event_is_done_is_what_the_events_say(scenario: str, command: str) -> None:
    """wait_done takes which event is done:true from the session's outcome: for every
    scenario and command, the decoded events say the same."""
    args = ("-y",) if command == "generate" else ()
    session = start(command, *args, scenario=scenario, speed=1.0, ignore_faults=True)
    try:
        session.advance(120.0)
        session.quit()
        decoded = [json.loads(line) for line in session._lines]
        assert len(decoded) >= 1
        assert session._done == [event["done"] for event in decoded]
        assert session.events == decoded
    finally:
        session.close()
