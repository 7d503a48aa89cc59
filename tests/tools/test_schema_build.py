"""Tests of ``simulator/tools/schema_build.py``: every real event and command line fits
the schemas built from the structs, and they refuse what zread would never write or read.

The events come from real sessions in virtual time, every command under every built-in
scenario, driven through their gates the way the statechart tests drive them (and sent
two refused lines on the way, so events with an ``error`` are checked too).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonschema import Draft202012Validator

from simulator.core.envelope import RejectedLine, decode_command, decode_params
from simulator.errors import SimulatorBug
from simulator.scenario import ScenarioError, builtin_names, builtin_text, load_scenario
from simulator.tools.schema_build import (
    DRAFT,
    NoParams,
    _components,
    command_schema,
    event_schema,
    scenario_schema,
)
from simulator.virtual import SimSession, SimulationError, start
from statecharts import COMMANDS, load_chart
from statecharts.generate import ACTIONS

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = builtin_names()
STEPS = 40
"""At most this many commands in one session; then it quits."""

Event = dict[str, Any]
Answer = tuple[str, dict[str, Any]] | None


def check_schema(schema: dict[str, Any]) -> None:
    """Draft 2020-12's meta-schema takes ``schema``; each distinct one is checked once
    (the scenario schema is the same for every command)."""
    _check_schema_text(json.dumps(schema, sort_keys=True))


@functools.cache
def _check_schema_text(text: str) -> None:
    Draft202012Validator.check_schema(json.loads(text))


@functools.cache
def validator(kind: str, command: str) -> Draft202012Validator:
    if kind == "events":
        schema = event_schema(load_chart(command))
    elif kind == "commands":
        schema = command_schema(load_chart(command))
    else:
        schema = scenario_schema()
    check_schema(schema)
    return Draft202012Validator(schema)


def problems(kind: str, command: str, doc: Any) -> list[str]:
    found = validator(kind, command).iter_errors(doc)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in found]


@functools.cache
def event_problems(command: str, raw: bytes) -> tuple[str, ...]:
    """:func:`problems` of one event line: the sessions write the same line many times
    (a gate, a page's progress), so each distinct line of a command is validated once."""
    return tuple(problems("events", command, json.loads(raw)))


# -- driving sessions through their gates -------------------------------------------------


@dataclass
class Gatekeeper:
    """Answers the gates of one command, one way (``variant``), as its tests do."""

    command: str
    scenario: str
    variant: str
    step: int = 0

    def answer(self, event: Event) -> Answer:
        self.step += 1
        offered = set(event["waiting_for"]) - {"quit"}
        if not offered or self.step > STEPS:
            return None
        vm = event["vm"]
        how: Callable[[Event, set[str]], Answer] = getattr(self, f"_{self.command}")
        return how(vm, offered)

    def _generate(self, vm: Event, offered: set[str]) -> Answer:
        if "select_action" in offered:
            actions = ACTIONS.get(vm["select_action"]["scenario"], ("cancel",))
            index = int(self.variant) if self.variant.isdigit() else 0
            return "select_action", {"action": actions[index % len(actions)]}
        if "retry" in offered:
            failed = [t["id"] for t in vm["pages"]["tasks"] if t["state"] == "failed"]
            if self.step < 6 and failed:
                return "retry", {"task_id": failed[0]}
            return "skip_all", {}
        if "retry_catalog" in offered and self.step < 6:
            return "retry_catalog", {}
        return None

    def _config(self, vm: Event, offered: set[str]) -> Answer:
        plan = {
            "edit": [
                ("update_fields", {"fields": {"language": "zh", "max_retries": "1"}}),
                ("reload_llm", {}),
                ("update_fields", {"fields": {"llm_api_key": ""}}),
                ("reload_llm", {}),
                ("save", {}),
            ],
            "save": [("save", {})],
        }[self.variant]
        return plan[self.step - 1] if self.step <= len(plan) else None

    def _login(self, vm: Event, offered: set[str]) -> Answer:
        if "select_region" in offered:
            regions = load_scenario(self.scenario).world.login.regions
            own_key = self.variant == "own-key"
            return "select_region", {
                "region": "__use_own_key__" if own_key else (regions or ["global"])[0]
            }
        if "select_model" in offered:
            return "select_model", {"model": vm["avail_models"][-1]}
        return None

    def _update(self, vm: Event, offered: set[str]) -> Answer:
        if "download" in offered:
            return "download", {}
        if {"restart", "skip_restart"} <= offered:
            return ("restart" if self.variant == "restart" else "skip_restart"), {}
        return None

    def _browse(self, vm: Event, offered: set[str]) -> Answer:
        if "select_version" in offered:
            if self.variant == "current" and vm["has_current"]:
                return "select_version", {"current": True}
            return "select_version", {"wiki_id": vm["versions"][-1]["id"]}
        return None

    def _version(self, vm: Event, offered: set[str]) -> Answer:  # pragma: no cover - no gates
        return None


PLANS: dict[str, list[tuple[tuple[str, ...], str, str]]] = {
    # (zread flags, variant, interrupt: send this command at the first event offering it
    # after the session has started working)
    "generate": [
        (("-y",), "", ""),
        (("-y", "--skip-failed"), "", ""),
        ((), "0", ""),
        ((), "1", ""),
        ((), "2", ""),
        (("-y",), "", "cancel"),
        (("-y",), "", "quit"),
    ],
    "config": [((), "edit", ""), ((), "save", "")],
    "login": [((), "", ""), ((), "own-key", ""), (("--custom",), "", "")],
    "update": [((), "restart", ""), ((), "skip", "")],
    "browse": [((), "current", ""), ((), "last", "")],
    "version": [((), "", "")],
}


def settle(session: SimSession, until: Callable[[Event], bool] = lambda _: False) -> None:
    """Let virtual time run until ``until`` holds, the client's turn, or the end."""
    if session.done:
        return
    with contextlib.suppress(SimulationError):
        session.wait_for(until, horizon=3600)


@dataclass(frozen=True)
class Played:
    events: tuple[bytes, ...]
    accepted: tuple[bytes, ...]
    """The lines the sessions took (not refused)."""


def play_one(
    command: str, scenario: str, flags: tuple[str, ...], variant: str, interrupt: str
) -> tuple[list[bytes], list[bytes]]:
    keeper = Gatekeeper(command, scenario, variant)
    with start(command, *flags, scenario=scenario, ignore_faults=True) as session:
        if interrupt:
            settle(session, lambda e: interrupt in e["waiting_for"] and e["vm"]["pages"]["total"])
            if not session.done:
                session.send(interrupt)
        refused_sent = False
        while not session.done:
            settle(session)
            if session.done:
                break
            if not refused_sent and len(session.waiting_for) > 1:
                session.send_line(b'{"type":"no_such_command"}')
                session.send_line(b'{"type":"quit","params":[1]}')
                refused_sent = True
            answer = keeper.answer(session.last)
            if answer is None:
                break
            session.send(answer[0], **answer[1])
        if not session.done:
            session.send_line(b'{"type":"quit"}')
        out = [line.data for line in session.transcript if line.direction == "out"]
        taken = [entry.line for entry in session.session.journal if not entry.error]
    return out, taken


@functools.cache
def played(command: str, scenario: str) -> Played:
    events: list[bytes] = []
    accepted: list[bytes] = []
    for flags, variant, interrupt in PLANS[command]:
        out, taken = play_one(command, scenario, flags, variant, interrupt)
        events += out
        accepted += taken
    return Played(tuple(events), tuple(accepted))


# -- what every schema is -------------------------------------------------------------------


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_schema_is_a_self_contained_draft_2020_12_document(command: str) -> None:
    chart = load_chart(command)
    for schema in (event_schema(chart), command_schema(chart), scenario_schema()):
        assert schema["$schema"] == DRAFT
        assert schema["title"] and schema["description"]
        check_schema(schema)
        refs = re.findall(r'"\$ref": "#/\$defs/([^"]+)"', json.dumps(schema))
        assert set(refs) <= set(schema.get("$defs", {})), "every $ref names a component"
    camel = "".join(part.capitalize() for part in command.split("_"))
    assert event_schema(chart)["title"] == f"{camel}Event"
    assert command_schema(chart)["title"] == f"{camel}CommandLine"


# -- events ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_event_of_every_builtin_scenario_fits_the_event_schema(
    command: str, scenario: str
) -> None:
    events = played(command, scenario).events
    assert events
    for raw in events:
        event = json.loads(raw)
        assert list(event) == ["vm", "waiting_for", "done", "error"]
        assert not event_problems(command, raw), raw


REACHED_ELSEWHERE = {"generate": {"error"}}
"""States no built-in scenario reaches, covered by a test of their own."""


def test_the_sessions_reach_the_states_of_every_chart() -> None:
    """The driving covers the charts, not only their first events."""
    for command in COMMANDS:
        chart = load_chart(command)
        seen = {
            json.loads(raw)["vm"].get("state")
            for s in SCENARIOS
            for raw in played(command, s).events
        }
        if chart.shows_state:
            shown = {spec.vm_state for spec in chart.states.values()}
            shown -= {"starting"} | REACHED_ELSEWHERE.get(command, set())
            assert shown <= seen, (command, shown - seen)
        errors = [json.loads(raw)["error"] for s in SCENARIOS for raw in played(command, s).events]
        if any(spec.waiting_for for spec in chart.states.values()):
            assert any(errors), command


def test_a_generate_that_is_not_logged_in_fits_the_event_schema(tmp_path: Path) -> None:
    path = tmp_path / "logged-out.toml"
    path.write_text("[world.account]\nlogged_in = false\n", encoding="utf-8")
    with start("generate", "-y", scenario=str(path)) as session:
        last = session.wait_done()
    assert last["vm"]["state"] == "error"
    for line in session.transcript:
        assert not problems("events", "generate", json.loads(line.data))


@pytest.fixture(scope="module")
def generate_event() -> Event:
    """A generate event with a task, to break in many ways."""
    for raw in played("generate", "flaky-pages").events:
        event: Event = json.loads(raw)
        if event["vm"]["pages"]["tasks"]:
            return event
    raise AssertionError("no generate event with tasks")  # pragma: no cover


BROKEN_EVENTS: dict[str, Callable[[Event], None]] = {
    "an unknown vm key": lambda e: e["vm"].update(surprise=1),
    "an unknown event key": lambda e: e.update(extra=True),
    "a vm key left out": lambda e: e["vm"].pop("catalog"),
    "a task key left out": lambda e: e["vm"]["pages"]["tasks"][0].pop("slug"),
    "an unknown task key": lambda e: e["vm"]["pages"]["tasks"][0].update(late=1),
    "a wrong type": lambda e: e["vm"]["pages"].update(done="3"),
    "a string for a bool": lambda e: e.update(done="false"),
    "a task state zread never shows": lambda e: e["vm"]["pages"]["tasks"][0].update(state="x"),
    "a vm.state the chart lacks": lambda e: e["vm"].update(state="thinking"),
    "a waiting_for the chart lacks": lambda e: e.update(waiting_for=["select_version"]),
    "tasks as an object": lambda e: e["vm"]["pages"].update(tasks={}),
    "no error key": lambda e: e.pop("error"),
}


@pytest.mark.parametrize("breakage", list(BROKEN_EVENTS))
def test_the_event_schema_refuses_what_zread_never_writes(
    generate_event: Event, breakage: str
) -> None:
    assert not problems("events", "generate", generate_event)
    broken = copy.deepcopy(generate_event)
    BROKEN_EVENTS[breakage](broken)
    assert problems("events", "generate", broken)


def test_an_unset_vm_key_is_optional_and_a_set_one_must_have_its_type() -> None:
    events = [json.loads(raw) for raw in played("browse", "default").events]
    without_url = next(e for e in events if "url" not in e["vm"])
    assert not problems("events", "browse", without_url)
    with_url = next(e for e in events if "url" in e["vm"])
    with_url["vm"]["url"] = 9681
    assert problems("events", "browse", with_url)


# -- command lines --------------------------------------------------------------------------


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_line_the_sessions_took_fits_the_command_schema(command: str) -> None:
    lines = {line for scenario in SCENARIOS for line in played(command, scenario).accepted}
    gated = any(spec.waiting_for for spec in load_chart(command).states.values())
    assert lines or not gated  # version is done at its first event: it takes no line
    for line in lines:
        assert not problems("commands", command, json.loads(line)), line


ACCEPTED = {
    # lines the statechart tests send and the sessions take (the checks aside)
    "generate": [
        '{"type":"select_action","params":{"action":"generate"}}',
        '{"type":"select_action","params":{"action":"generate","extra":{"x":1}}}',
        '{"type":"retry","params":{"task_id":3}}',
        '{"type":"cancel","params":{}}',
        '{"type":"cancel"}',
        '{"type":"skip_all","params":null}',
        '{"type":"retry_catalog","params":{"ignored":[1]}}',
        '{"type":"quit","params":{"anything":true}}',
        '{"type":"quit","id":7}',
    ],
    "config": [
        '{"type":"update_fields","params":{"fields":{"language":"zh","max_retries":"1"}}}',
        '{"type":"update_fields","params":{"fields":{}}}',
        '{"type":"update_fields","params":{"fields":{"language":"de"},"extra":[1,2]}}',
        '{"type":"save","params":{"ignored":1}}',
        '{"type":"reload_llm"}',
    ],
    "login": [
        '{"type":"select_region","params":{"region":"cn"}}',
        '{"type":"select_region","params":{"region":"__use_own_key__","model":"glm-4.6"}}',
        '{"type":"select_model","params":{"model":"glm-4.5-air"}}',
    ],
    "update": [
        '{"type":"download","params":{}}',
        '{"type":"restart"}',
        '{"type":"skip_restart","params":null}',
    ],
    "browse": [
        '{"type":"select_version","params":{"current":true}}',
        '{"type":"select_version","params":{"wiki_id":"x"}}',
        '{"type":"select_version","params":{}}',
        '{"type":"select_version"}',
    ],
    "version": ['{"type":"quit"}', '{"type":"quit","params":{}}'],
}

REFUSED = {
    "generate": [
        '{"type":"no_such_command"}',
        '{"params":{}}',
        '{"type":"select_action","params":{"action":3}}',
        '{"type":"retry","params":{"task_id":"3"}}',
        '{"type":"cancel","params":[]}',
        '{"type":"quit","params":"now"}',
        '{"type":"_catalog_step"}',
    ],
    "config": [
        '{"type":"update_fields","params":{"fields":{"max_retries":1}}}',
        '{"type":"update_fields","params":{"fields":[]}}',
        '{"type":"select_action","params":{"action":"generate"}}',
    ],
    "login": ['{"type":"select_region","params":{"region":5}}'],
    "update": ['{"type":"download","params":5}', '{"type":"upgrade"}'],
    "browse": [
        '{"type":"select_version","params":{"current":"yes"}}',
        '{"type":"select_version","params":{"wiki_id":7}}',
    ],
    "version": ['{"type":"cancel"}', '{"type":5}'],
}


def decodes(command: str, line: str) -> bool:
    """True when the session gets past decoding ``line``: a known type, params that fit
    its struct (what a command's own check says aside)."""
    chart = load_chart(command)
    try:
        decoded = decode_command(line.encode())
        if decoded.type == "quit":
            decode_params(decoded.params, NoParams)
            return True
        if decoded.type not in chart.commands:
            return False
        decode_params(decoded.params, chart.commands[decoded.type].params or NoParams)
    except RejectedLine:
        return False
    return True


GO_LENIENT = [
    # lines Go's decoder takes, and so the decoder does, that a schema refuses: it
    # describes a command as a client should write it (a left-out or null field is its
    # zero value to Go, a key matches a field in any case)
    ("generate", '{"type":"select_action"}'),
    ("generate", '{"type":"retry","params":{}}'),
    ("generate", '{"type":"retry","params":{"task_id":null}}'),
    ("config", '{"type":"update_fields"}'),
    ("config", '{"type":"update_fields","params":{"fields":null}}'),
    ("login", '{"type":"select_region","params":{"region":null}}'),
    ("login", '{"type":"select_model","params":{}}'),
    ("login", '{"type":"select_region","params":{"name":"cn"}}'),
    ("login", '{"type":"select_region","params":{"Region":"cn"}}'),
    ("browse", '{"Type":"select_version","params":{"current":true}}'),
]


@pytest.mark.parametrize(("command", "line"), GO_LENIENT)
def test_the_decoder_takes_what_go_takes_beyond_the_command_schema(command: str, line: str) -> None:
    assert decodes(command, line), line
    assert problems("commands", command, json.loads(line)), line


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_command_schema_agrees_with_the_decoder(command: str) -> None:
    for line in ACCEPTED[command]:
        assert decodes(command, line), line
        assert not problems("commands", command, json.loads(line)), line
    for line in REFUSED[command]:
        assert not decodes(command, line), line
        assert problems("commands", command, json.loads(line)), line


# -- scenario files -------------------------------------------------------------------------


def doc_toml_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]):
        text = path.read_text(encoding="utf-8")
        for index, block in enumerate(re.findall(r"^```toml\n(.*?)^```$", text, re.S | re.M)):
            blocks.append((f"{path.name}#{index}", block))
    return blocks


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_builtin_scenario_fits_the_scenario_schema(name: str) -> None:
    data = tomllib.loads(builtin_text(name))
    assert not problems("scenario", "", data), name


@pytest.mark.parametrize(("where", "block"), doc_toml_blocks())
def test_every_toml_example_in_the_docs_fits_the_scenario_schema(where: str, block: str) -> None:
    assert not problems("scenario", "", tomllib.loads(block)), where


def test_the_first_full_example_in_scenarios_md_names_the_schema() -> None:
    [(_, first), *_] = [b for b in doc_toml_blocks() if b[0].startswith("scenarios.md")]
    assert first.startswith("#:schema ")


BROKEN_SCENARIOS = [
    'speed = "fast"',
    "[world]\nweather = 1",
    "[timing]\npage = { fixed = 1.0, uniform = [0.0, 2.0] }",
    "[timing]\npage = {}",
    "[timing]\npage = { uniform = [1.0] }",
    '[[failures]]\npoint = "nowhere"',
    "[[failures]]\ntarget = 3",
    '[[faults]]\nkind = "exit"\ncode = "one"',
    '[world.project]\npages = [{ section = "no title" }]',
]


@pytest.mark.parametrize("text", BROKEN_SCENARIOS)
def test_the_scenario_schema_refuses_what_loading_refuses(text: str, tmp_path: Path) -> None:
    """What loading refuses, or, for a failure point no chart declares, starting a
    session with the scenario."""
    from simulator.launch import check_failure_points

    assert problems("scenario", "", tomllib.loads(text))
    path = tmp_path / "broken.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError, match="broken"):
        check_failure_points(load_scenario(str(path)))


def test_an_unbounded_lognormal_has_no_default_json_cannot_spell() -> None:
    lognormal = scenario_schema()["$defs"]["Lognormal"]
    assert "default" not in lognormal["properties"]["max"]
    assert "Infinity" not in json.dumps(scenario_schema())


def test_a_vm_custom_type_needs_its_encoding() -> None:
    """A vm type msgspec cannot see is refused by name, not guessed."""

    class Opaque:
        pass

    vm = msgspec.defstruct("OpaqueVM", [("thing", Opaque)])
    with pytest.raises(SimulatorBug, match=r"no JSON Schema for .*Opaque"):
        _components([vm])
