"""simulator.tools.client.ReferenceClient: the sensible answer at every gate.

Hand-made events pin each answer; then the client runs every command of every built-in
scenario to its end, in virtual time and on a hub (where transport faults apply).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from simulator.launch import build_session
from simulator.runners.aio import Channel, Hub
from simulator.runners.output import OutputStage
from simulator.runners.virtual import start as virtual_start
from simulator.scenario import builtin_names, load_scenario
from simulator.tools.client import ReferenceClient, command_line
from statecharts import COMMANDS, command_module, load_chart
from tests.answering import drive


def event(waiting_for: list[str], **vm: Any) -> dict[str, Any]:
    return {"vm": vm, "waiting_for": waiting_for, "done": False, "error": ""}


def decoded(line: bytes | None) -> dict[str, Any]:
    assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
    return dict(json.loads(line))


# -- command_line ---------------------------------------------------------------------


def test_command_line_is_compact_json_with_a_newline() -> None:
    assert command_line("quit") == b'{"type":"quit","params":{}}\n'
    assert command_line("retry", task_id=3) == b'{"type":"retry","params":{"task_id":3}}\n'


# -- one answer per gate ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "action"),
    [("has_draft", "resume"), ("has_wiki", "generate"), ("empty", "generate")],
)
def test_select_action(scenario: str, action: str) -> None:
    answer = ReferenceClient().answer(
        event(["select_action", "cancel", "quit"], select_action={"scenario": scenario})
    )
    assert decoded(answer) == {"type": "select_action", "params": {"action": action}}


def test_retry_catalog_once_then_quit() -> None:
    client = ReferenceClient()
    gate = event(["quit", "retry_catalog"], state="running")
    assert decoded(client.answer(gate))["type"] == "retry_catalog"
    assert decoded(client.answer(gate))["type"] == "quit"
    assert client.memory["catalog_retries"] == 2


def test_retry_each_failed_page_once_then_skip_all() -> None:
    client = ReferenceClient()
    tasks = [
        {"id": 1, "state": "done"},
        {"id": 3, "state": "failed"},
        {"id": 7, "state": "failed"},
    ]
    gate = event(["quit", "retry", "skip_all"], pages={"tasks": tasks})
    assert decoded(client.answer(gate)) == {"type": "retry", "params": {"task_id": 3}}
    assert decoded(client.answer(gate)) == {"type": "retry", "params": {"task_id": 7}}
    assert decoded(client.answer(gate)) == {"type": "skip_all", "params": {}}
    assert client.memory["retried"] == {3, 7}
    nothing_failed = event(["quit", "retry", "skip_all"], pages={"tasks": tasks[:1]})
    assert decoded(ReferenceClient().answer(nothing_failed))["type"] == "skip_all"


def test_select_version() -> None:
    versions = [{"id": "v1"}, {"id": "v2"}, {"id": "v3"}]
    current = event(["select_version", "quit"], has_current=True, versions=versions)
    assert decoded(ReferenceClient().answer(current))["params"] == {"current": True}
    newest = event(["select_version", "quit"], has_current=False, versions=versions)
    assert decoded(ReferenceClient().answer(newest))["params"] == {"wiki_id": "v3"}


@pytest.mark.parametrize(
    ("waiting_for", "vm", "expected"),
    [
        (["select_region", "quit"], {}, {"type": "select_region", "params": {"region": "global"}}),
        (
            ["select_model", "quit"],
            {"avail_models": ["m1", "m2"]},
            {"type": "select_model", "params": {"model": "m1"}},
        ),
        (["download", "quit"], {}, {"type": "download", "params": {}}),
        (["restart", "skip_restart", "quit"], {}, {"type": "restart", "params": {}}),
        (["quit"], {"state": "serving"}, {"type": "quit", "params": {}}),
    ],
)
def test_each_gate(waiting_for: list[str], vm: dict[str, Any], expected: dict[str, Any]) -> None:
    assert decoded(ReferenceClient().answer(event(waiting_for, **vm))) == expected


def test_config_changes_one_field_then_saves() -> None:
    client = ReferenceClient()
    editing = event(["update_fields", "save", "reload_llm", "quit"])
    assert decoded(client.answer(editing)) == {
        "type": "update_fields",
        "params": {"fields": {"language": "de"}},
    }
    assert decoded(client.answer(editing)) == {"type": "save", "params": {}}


@pytest.mark.parametrize(
    "quiet",
    [
        event([], state="init_flow"),
        event(["quit", "cancel"], state="running"),
        event(["quit"], state="loading"),
        {"vm": {"state": "done"}, "waiting_for": [], "done": True, "error": ""},
    ],
)
def test_no_answer_where_nothing_is_asked(quiet: dict[str, Any]) -> None:
    assert ReferenceClient().answer(quiet) is None


# -- whole runs -------------------------------------------------------------------------


CASES = [(command, scenario) for scenario in builtin_names() for command in COMMANDS]


@pytest.mark.parametrize(("command", "scenario"), CASES)
def test_every_command_of_every_scenario_ends_in_virtual_time(command: str, scenario: str) -> None:
    sim = virtual_start(command, scenario=scenario, ignore_faults=True)
    try:
        drive(sim)
        assert sim.done, (sim.last, sim.waiting_for)
        assert sim.last["done"] is True and sim.last["waiting_for"] == []
        assert not sim.violations, [str(v) for v in sim.violations]
    finally:
        sim.close()


class Sink:
    """An endpoint answering each event with its own reference client."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.pending = b""
        self.channel: Channel | None = None
        self.client = ReferenceClient()

    def write(self, data: bytes) -> bool:
        *complete, self.pending = (self.pending + data).split(b"\n")
        for line in complete:
            self.lines.append(line)
            try:
                decoded_line = json.loads(line)
            except ValueError:
                continue  # a diagnostic
            answer = self.client.answer(decoded_line)
            if answer is not None:
                assert self.channel is not None
                self.channel.hub.loop.call_soon(self.channel.feed, answer[:-1])
        return True

    def stderr(self, line: str) -> None:
        pass

    def close_stdout(self) -> None:
        pass


def ending_faults(scenario: str) -> set[str]:
    return {f.kind for f in load_scenario(scenario).faults} & {"exit", "hang"}


@pytest.mark.parametrize("scenario", builtin_names())
def test_generate_of_every_scenario_on_a_hub(scenario: str) -> None:
    """As a process would run it: transport faults apply, so crash exits 3 mid-line and
    hang goes silent for good (its session never reports an exit)."""

    async def main() -> None:
        session = build_session("generate", (), scenario=scenario, speed=0.0)
        sink = Sink()
        stage = OutputStage.for_scenario(load_scenario(scenario), speed=session.speed)
        channel = Channel(Hub(), session, stage, sink)
        sink.channel = channel
        channel.start()
        ending = ending_faults(scenario)
        try:
            code = await asyncio.wait_for(asyncio.shield(channel.done), 0.5 if ending else 10)
        except TimeoutError:
            assert "hang" in ending, sink.lines[-3:]
            assert len(sink.lines) == 3 and sink.pending == b""  # silent after its 3rd
            return
        finally:
            channel.close()
        if "exit" in ending:
            assert code == 3 and channel.code == 3 and not session.done
            return
        assert code == 0 and session.done and not session.violations
        events = [json.loads(line) for line in sink.lines if line.startswith(b'{"vm":')]
        assert events[-1]["done"] is True

    asyncio.run(main())


def test_a_client_of_one_command_asks_that_module_alone_and_reads_the_vm_only_at_its_gate() -> None:
    looked: list[str] = []

    class Watched(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            looked.append(key)
            return super().get(key, default)

    client = ReferenceClient("generate")
    running = Watched(vm={"state": "running"}, waiting_for=["quit", "cancel"], done=False, error="")
    assert client.answer(running) is None
    assert "vm" not in looked  # no module read it: never looked up
    gate = Watched(vm={"select_action": {"scenario": "empty"}}, waiting_for=["select_action"])
    gate.update(done=False, error="")
    assert json.loads(client.answer(gate) or b"") == {
        "type": "select_action",
        "params": {"action": "generate"},
    }
    assert "vm" in looked
    assert ReferenceClient("login").answer(gate) is None  # not login's gate


@pytest.mark.parametrize("command", COMMANDS)
def test_a_module_answers_nothing_where_the_event_offers_none_of_its_answers(command: str) -> None:
    # The reference client skips a module whose ANSWERS an event does not offer: true of
    # every gate its chart has (the answer given no vm at all).
    module = command_module(command)
    gates = getattr(module, "ANSWERS", None)
    if gates is None:
        pytest.skip(f"{command} declares no ANSWERS: asked at every gate")
    chart = load_chart(command)
    offered = {spec.waiting_for for spec in chart.states.values() if spec.waiting_for}
    for waiting in offered:
        if gates.isdisjoint(waiting):
            assert module.answer(list(waiting), {}, {}) is None, (command, waiting)
    assert all(any(gate in w for w in offered) for gate in gates)  # each one offered
