"""Tests for simulator.launch: zread's own flags, and sessions built as the process
would start them (flags, scenario by name, path or value, seed, speed, a home).

Every session here is a real sans-I/O session, run to its end in virtual time where
the test needs a whole transcript.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest

from simulator.core.driver import Flags
from simulator.core.effects import SaveConfig
from simulator.core.session import Session
from simulator.hosts.files import FileStore
from simulator.launch import FlagError, add_zread_flags, build_session, flags_of, parse_flags
from simulator.scenario import load_scenario
from statecharts import COMMANDS
from statecharts.browse import BrowseFlags
from statecharts.generate import GenerateFlags
from statecharts.login import LoginFlags


def first_event(session: Session) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(session.start()[0])
    return event


def language_of(event: dict[str, Any]) -> str:
    """The initial value of config's language field."""
    field = next(f for f in event["vm"]["fields"] if f["json_key"] == "language")
    return str(field["initial"])


def run_to_the_end(session: Session) -> list[bytes]:
    """Every line of a session that needs no answer, its timers fired in order."""
    out = session.start()
    while not session.done:
        deadline = session.next_deadline()
        assert deadline is not None, "the session waits for a client"
        out += session.advance(deadline)
    return out


# -- the flags ----------------------------------------------------------------------------


def options_of(command: str) -> set[str]:
    parser = argparse.ArgumentParser(add_help=False)
    add_zread_flags(parser, command)
    return {option for action in parser._actions for option in action.option_strings}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_takes_its_own_flags_and_stdio(command: str) -> None:
    own = {
        "browse": {"--host", "--port", "--version", "--generate"},
        "generate": {"-y", "--yes", "--draft", "--draft-action", "--skip-failed"},
        "login": {"--custom"},
    }
    assert options_of(command) == {"--stdio", *own.get(command, set())}


def test_parsed_flags_become_flags() -> None:
    assert parse_flags("generate", []) == GenerateFlags()
    assert parse_flags("generate", ["--stdio", "-y", "--skip-failed"]) == GenerateFlags(
        yes=True, skip_failed=True
    )
    assert parse_flags("generate", ["--yes", "--draft-action", "clear"]) == GenerateFlags(
        yes=True, draft_action="clear"
    )
    assert parse_flags("generate", ["--draft", "resume"]) == GenerateFlags(draft_action="resume")
    assert parse_flags("login", ["--custom"]) == LoginFlags(custom=True)
    assert parse_flags("version", ["--stdio"]) == Flags()
    assert parse_flags(
        "browse", ["--port", "0", "--host", "::1", "--version", "v2"]
    ) == BrowseFlags(host="::1", port=0, version="v2")
    assert parse_flags("browse", ["--generate"]) == BrowseFlags(generate=True)  # not simulated


def test_browse_defaults_to_the_loopback_address_and_port_9681() -> None:
    flags = parse_flags("browse", [])
    assert (flags.host, flags.port, flags.version) == ("127.0.0.1", 9681, "")
    assert (BrowseFlags().host, BrowseFlags().port, BrowseFlags().version) == (
        "127.0.0.1",
        9681,
        "",
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "localhost", "LocalHost", "::1"])
def test_a_loopback_host_is_taken(host: str) -> None:
    assert parse_flags("browse", ["--host", host]).host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "::", "zread.ai", "", "127.0.0.256"])
def test_any_other_host_is_refused(host: str) -> None:
    with pytest.raises(FlagError, match=r"--host: refusing to serve on .* loopback address only"):
        parse_flags("browse", ["--host", host])


@pytest.mark.parametrize("port", ["-1", "65536", "port", "80.0"])
def test_a_port_outside_0_to_65535_is_refused(port: str) -> None:
    with pytest.raises(FlagError, match=r"--port: expected a port 0-65535"):
        parse_flags("browse", [f"--port={port}"])


def test_flags_are_not_abbreviated() -> None:
    with pytest.raises(FlagError, match="unrecognized arguments: --skip"):
        parse_flags("generate", ["--skip"])


def test_absent_flags_keep_their_defaults() -> None:
    assert flags_of("generate", argparse.Namespace()) == GenerateFlags()
    assert flags_of("generate", argparse.Namespace(yes=True, unrelated=1)) == GenerateFlags(
        yes=True
    )
    assert flags_of("version", argparse.Namespace(yes=True)) == Flags()


@pytest.mark.parametrize(
    ("command", "args", "says"),
    [
        ("nope", [], "unknown command 'nope' (one of browse, generate, config, login"),
        ("generate", ["--custom"], "zread generate: unrecognized arguments: --custom"),
        ("login", ["-y"], "zread login: unrecognized arguments: -y"),
        ("generate", ["--scenario", "empty"], "unrecognized arguments: --scenario empty"),
        ("generate", ["--draft-action", "keep"], "invalid choice: 'keep'"),
        ("generate", ["--draft-action"], "expected one argument"),
        ("generate", ["--draft", "keep"], "invalid choice: 'keep'"),
        ("browse", ["--version"], "expected one argument"),
        ("version", ["--version", "x"], "unrecognized arguments: --version x"),
    ],
)
def test_a_bad_flag_is_a_value_error_naming_it(command: str, args: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_flags(command, args)


# -- building a session -------------------------------------------------------------------


def test_a_session_runs_the_chart_of_its_command() -> None:
    event = first_event(build_session("version"))
    assert event["done"] is True and event["vm"]["version"]
    assert build_session("browse").chart is build_session("browse").chart  # shared, compiled once


def test_flags_as_strings_or_parsed_change_the_flow() -> None:
    asks = first_event(build_session("generate"))
    assert asks["vm"]["state"] == "select_action" and "select_action" in asks["waiting_for"]
    for args in (["-y"], GenerateFlags(yes=True)):
        skips = first_event(build_session("generate", args))
        assert skips["vm"]["state"] == "running" and "select_action" not in skips["waiting_for"]


def test_a_bad_flag_builds_no_session() -> None:
    with pytest.raises(ValueError, match="--bogus"):
        build_session("generate", ["--bogus"])


def test_the_scenario_by_name_by_path_or_loaded(tmp_path: Path) -> None:
    path = tmp_path / "empty.toml"
    path.write_text('extends = "empty"\n')
    for scenario in ("empty", str(path), load_scenario("empty")):
        event = first_event(build_session("browse", scenario=scenario))
        assert event["vm"]["state"] == "no_wiki" and event["done"] is True
    assert first_event(build_session("browse"))["vm"]["state"] == "loading"  # the default


def test_the_seed_chooses_the_run_and_reproduces_it() -> None:
    runs = [run_to_the_end(build_session("generate", ["-y"], seed=s, speed=0)) for s in (0, 0, 1)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_the_speed_scales_every_delay() -> None:
    instant = build_session("generate", ["-y"], speed=0)
    instant.start()
    assert instant.next_deadline() == 0.0
    normal, slow = build_session("generate", ["-y"]), build_session("generate", ["-y"], speed=2)
    normal.start()
    slow.start()
    first, later = normal.next_deadline(), slow.next_deadline()
    assert first is not None and later is not None
    assert later == pytest.approx(2 * first)


def test_a_store_lays_its_world_over_the_scenario(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "home", tmp_path / "project")
    store.apply(SaveConfig({"language": "fr"}))
    kept = first_event(build_session("config", home=store))
    plain = first_event(build_session("config"))
    assert language_of(kept) == "fr" and language_of(plain) == "en"


def test_the_value_parsers_refuse_in_the_simulators_words() -> None:
    import argparse

    from simulator.launch import integer, number

    assert integer("-12") == -12 and integer("9" * 400) == int("9" * 400)
    assert number(0.0)("0") == 0.0 and number(0.0, strict=True)("0.5") == 0.5
    for parse, text, says in (
        (integer, "abc", "expected an integer, got 'abc'"),
        (number(0.0), "nan", "expected a number >= 0, got 'nan'"),
        (number(0.0), "-1", "expected a number >= 0, got '-1'"),
        (number(0.0, strict=True), "0", "expected a number > 0, got '0'"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=f"^{says}$"):
            parse(text)


def test_a_failure_at_a_point_no_command_declares_is_refused_naming_it() -> None:
    from simulator.scenario import ScenarioError

    text = '[[failures]]\npoint = "check"\n[[failures]]\npoint = "nowhere"\n'
    scenario = load_scenario("mine", text=text)
    for command in COMMANDS:  # a point of another command is fine; this one is no one's
        with pytest.raises(ScenarioError, match=r"^scenario mine: failures\[1\]\.point: "):
            build_session(command, scenario=scenario)
    with pytest.raises(ScenarioError, match="'nowhere' is not a failure point"):
        build_session("version", scenario=scenario)
    checked = load_scenario("mine", text='[[failures]]\npoint = "page"\n')
    assert json.loads(build_session("update", scenario=checked).start()[0])["vm"]["state"]
