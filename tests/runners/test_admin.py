"""simulator.runners.admin: the admin API's handlers, called through a real pair of Conns.

Longer than most test modules: one test per handler, and one per way each refuses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from simulator.control import Conn, ControlError
from simulator.core.secrets import Secrets
from simulator.launch import build_session
from simulator.runners.admin import _unmarked, connect, install
from simulator.runners.aio import Channel, Hub
from simulator.scenario.failures import Failure
from simulator.tools.journal import read as read_journal
from tests.e2e.helpers import Proc
from tests.runners.helpers import stage_of

GENERATE = b'{"type":"select_action","params":{"action":"generate"}}'


class Recorder:
    """An endpoint that keeps what the channel writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.stderr_lines: list[str] = []

    def write(self, data: bytes) -> bool:
        self.writes.append(data)
        return True

    def stderr(self, line: str) -> None:
        self.stderr_lines.append(line)

    def close_stdout(self) -> None:
        pass

    @property
    def lines(self) -> list[bytes]:
        return b"".join(self.writes).splitlines(keepends=True)


class Admin:
    """A channel with the admin API installed on one Conn, and a client Conn facing it."""

    def __init__(
        self, command: str, *args: str, speed: float = 1.0, scenario: str = "default"
    ) -> None:
        loop = asyncio.get_running_loop()
        self.session = build_session(command, args, speed=speed, scenario=scenario)
        self.out = Recorder()
        self.channel = Channel(Hub(loop), self.session, stage_of(self.session), self.out)
        self.frames: list[bytes] = []
        peers: dict[str, Conn] = {}

        def to_client(frame: bytes) -> None:
            self.frames.append(frame)
            loop.call_soon(peers["client"].handle_frame, frame)

        def to_server(frame: bytes) -> None:
            loop.call_soon(peers["server"].handle_frame, frame)

        self.server = peers["server"] = Conn(to_client)
        self.client = peers["client"] = Conn(to_server)
        install(self.server, self.channel)
        self.channel.start()

    async def call(self, subtype: str, **params: Any) -> dict[str, Any]:
        return await self.client.request(subtype, params)

    def close(self) -> None:
        self.server.close()
        self.client.close()
        self.channel.close()


def run(main: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(main(), 10)

    asyncio.run(bounded())


# -- the handlers ----------------------------------------------------------------------


def test_snapshot() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=2.0)
        snap = await admin.call("snapshot")
        first = json.loads(admin.out.writes[0])
        assert snap["command"] == "generate"
        assert snap["state"] == "select_action"
        assert snap["vm"] == first["vm"]
        assert snap["waiting_for"] == first["waiting_for"]
        assert snap["timers"] == [] and snap["done"] is False
        assert snap["speed"] == 2.0 and snap["paused"] is False
        assert snap == {**admin.session.snapshot(), "paused": False}
        admin.close()

    run(main)


def test_snapshot_timers_and_paused() -> None:
    async def main() -> None:
        admin = Admin("generate", "-y", speed=50.0)
        assert (await admin.call("pause"))["paused"] is True
        snap = await admin.call("snapshot")
        assert snap["paused"] is True
        (timer,) = snap["timers"]
        assert timer["trigger"] == "_catalog_step"
        assert timer["deadline"] == admin.session.pending()[0].deadline
        assert timer["in"] == pytest.approx(timer["deadline"] - snap["clock"])
        admin.close()

    run(main)


def test_inject_a_failure() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0)
        failure = {"point": "page", "target": 2, "first": 99, "error": "page 2: injected"}
        answer = await admin.call("inject", failure=failure)
        assert answer == {"injected": "failure", "id": "failure-1"}
        assert admin.session.runtime.failure("page", target=2, attempt=7) == Failure(**failure)
        assert admin.session.runtime.failure("page", target=3, attempt=1) is None
        admin.channel.feed(GENERATE)
        gate = json.loads(admin.out.writes[-1])
        while "retry" not in gate["waiting_for"]:
            await asyncio.sleep(0.01)
            gate = json.loads(admin.out.writes[-1])
        states = {t["id"]: t["state"] for t in gate["vm"]["pages"]["tasks"]}
        assert states.pop(2) == "failed"
        assert set(states.values()) == {"done"}
        admin.close()

    run(main)


def test_inject_a_fault_now() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0)
        fault = {"kind": "diagnostic", "text": "now!"}
        assert await admin.call("inject", fault=fault) == {"injected": "fault", "id": "fault-1"}
        assert admin.out.lines == admin.out.writes[:1]  # nothing more until an event
        admin.channel.feed(GENERATE)
        lines = admin.out.lines
        assert lines[2] == b"now!\n"
        assert lines.count(b"now!\n") == 1
        admin.close()

    run(main)


def test_inject_a_fault_at_a_state_waits_for_it() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0)
        fault = {"kind": "stderr", "text": "done now", "on_state": "done"}
        assert await admin.call("inject", fault=fault) == {"injected": "fault", "id": "fault-1"}
        admin.channel.feed(GENERATE)
        assert await admin.channel.done == 0
        assert admin.out.stderr_lines == ["done now"]
        admin.close()

    run(main)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, 'inject takes {"failure": {...}}, {"fault": {...}} or {"http": {...}}'),
        ({"failures": []}, 'inject takes {"failure": {...}}, {"fault": {...}} or {"http": {...}}'),
        ({"failure": {"point": "moon"}}, "inject: point: 'moon' is not one of the allowed values"),
        ({"failure": {"point": "page", "first": -1}}, "inject: first and target must be >= 0"),
        ({"fault": {"kind": "exit", "code": 300}}, "inject: code must be 0-255"),
        ({"fault": {}}, "inject: kind: missing"),
        (
            {"fault": {"kind": "diagnostic"}, "http": {"reset": True}},
            "inject takes one entry at a time, not fault and http",
        ),
        (
            {"failure": {"point": "download", "first": 1}},
            "inject: point: 'download' is a failure point of update, not of generate",
        ),
        (
            {"fault": {"kind": "stderr", "on_state": "nosuchstate"}},
            "inject: on_state: 'nosuchstate' is not a state generate shows (",
        ),
    ],
)
def test_inject_refuses_and_changes_nothing(params: dict[str, Any], message: str) -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0)
        before = admin.session.snapshot()
        with pytest.raises(ControlError) as caught:
            await admin.call("inject", **params)
        assert caught.value.message.startswith(message), caught.value.message
        assert admin.session.snapshot() == before
        assert not admin.channel.stage.faults
        admin.channel.feed(GENERATE)
        assert await admin.channel.done == 0
        assert all(line.startswith(b'{"vm":') for line in admin.out.lines)
        admin.close()

    run(main)


def test_faults_lists_the_scenarios_then_the_injected_with_their_ids() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0, scenario="failing-pages")
        answer = await admin.call("inject", failure={"point": "catalog", "first": 1})
        assert answer == {"injected": "failure", "id": "failure-3"}
        answer = await admin.call("inject", fault={"kind": "stderr", "on_state": "done"})
        assert answer == {"injected": "fault", "id": "fault-1"}
        listed = (await admin.call("faults"))["faults"]
        assert listed == [
            {
                "id": "failure-1",
                "kind": "page",
                "source": "scenario",
                "where": {"point": "page", "target": 3, "first": 3},
                "left": {"first": 3},
                "fired": 0,
            },
            {
                "id": "failure-2",
                "kind": "page",
                "source": "scenario",
                "where": {"point": "page", "target": 7, "first": 3},
                "left": {"first": 3},
                "fired": 0,
            },
            {
                "id": "failure-3",
                "kind": "catalog",
                "source": "injected",
                "where": {"point": "catalog", "first": 1},
                "left": {"first": 1},
                "fired": 0,
            },
            {
                "id": "fault-1",
                "kind": "stderr",
                "source": "injected",
                "where": {"on_state": "done"},
                "left": {},
                "fired": 0,
            },
        ]
        admin.channel.feed(GENERATE)
        gate = json.loads(admin.out.writes[-1])
        while "retry" not in gate["waiting_for"]:
            await asyncio.sleep(0.01)
            gate = json.loads(admin.out.writes[-1])
        fired = {e["id"]: (e["fired"], e["left"]) for e in (await admin.call("faults"))["faults"]}
        assert fired["failure-1"] == (3, {"first": 0})  # the first try and two retries
        assert fired["failure-3"] == (1, {"first": 0})
        assert fired["fault-1"] == (0, {})
        admin.close()

    run(main)


def test_remove_one_then_the_run_goes_on_without_it() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0, scenario="failing-pages")
        assert await admin.call("remove", id="failure-1") == {"removed": "failure-1"}
        assert [e["id"] for e in (await admin.call("faults"))["faults"]] == ["failure-2"]
        admin.channel.feed(GENERATE)
        gate = json.loads(admin.out.writes[-1])
        while "retry" not in gate["waiting_for"]:
            await asyncio.sleep(0.01)
            gate = json.loads(admin.out.writes[-1])
        failed = [t["id"] for t in gate["vm"]["pages"]["tasks"] if t["state"] == "failed"]
        assert failed == [7]
        admin.close()

    run(main)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"id": "failure-9"}, "remove: no failure or fault has the id 'failure-9'"),
        ({"id": "x" * 60}, "remove: no failure or fault has the id '" + "x" * 39 + "…'"),
        ({}, 'remove takes {"id": "..."}, an id the faults request lists'),
        ({"id": 1}, 'remove takes {"id": "..."}, an id the faults request lists'),
    ],
)
def test_remove_refuses_and_changes_nothing(params: dict[str, Any], message: str) -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0, scenario="crash")
        before = await admin.call("faults")
        with pytest.raises(ControlError) as caught:
            await admin.call("remove", **params)
        assert caught.value.message == message
        assert await admin.call("faults") == before
        admin.close()

    run(main)


def test_reset_removes_the_scenarios_too_and_the_run_passes() -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0, scenario="failing-pages")
        await admin.call("inject", fault={"kind": "exit", "code": 3, "on_state": "done"})
        removed = await admin.call("reset")
        assert removed == {"removed": ["failure-1", "failure-2", "fault-1"]}
        assert await admin.call("faults") == {"faults": []}
        assert await admin.call("reset") == {"removed": []}
        admin.channel.feed(GENERATE)
        assert await admin.channel.done == 0
        last = json.loads(admin.out.writes[-1])
        assert last["done"] is True and last["vm"]["done_total"] == 16
        admin.close()

    run(main)


def test_http_faults_are_one_more_source() -> None:
    async def main() -> None:
        admin = Admin("browse", speed=0.0)
        await admin.call("inject", fault={"kind": "diagnostic", "on_state": "serving"})
        answer = await admin.call("inject", http={"path": "/", "status": 503})
        assert answer == {"injected": "http", "id": "http-1"}
        listed = [(e["id"], e["kind"]) for e in (await admin.call("faults"))["faults"]]
        assert listed == [("fault-1", "diagnostic"), ("http-1", "status")]
        assert admin.channel.host.http_faults.entries()[0]["id"] == "http-1"
        assert await admin.call("remove", id="http-1") == {"removed": "http-1"}
        await admin.call("inject", http={"path": "/", "reset": True})
        assert await admin.call("reset") == {"removed": ["fault-1", "http-2"]}
        assert not admin.channel.host.http_faults
        admin.close()

    run(main)


def test_set_timing_draws_the_next_timers_from_the_new_delay() -> None:
    async def main() -> None:
        admin = Admin("generate", "-y", speed=1.0)
        await admin.call("pause")
        (pending,) = (await admin.call("snapshot"))["timers"]
        answer = await admin.call("set_timing", name="catalog_step", timing={"fixed": 300})
        assert answer == {"name": "catalog_step", "timing": {"fixed": 300.0}}
        (kept,) = (await admin.call("snapshot"))["timers"]
        assert kept["deadline"] == pending["deadline"]  # a pending timer keeps its deadline
        lognormal = {"lognormal": {"median": 2.0, "sigma": 0.5}}
        answer = await admin.call("set_timing", name="page", timing=lognormal)
        assert answer == {"name": "page", "timing": lognormal}
        await admin.call("set_speed", speed=0)  # the pending step fires at once
        await asyncio.sleep(0.05)
        (following,) = (await admin.call("snapshot"))["timers"]
        assert following["trigger"] == "_catalog_step"
        assert following["in"] == 0.0  # speed 0: the draw is 300 s times 0
        assert admin.session.runtime.draw("catalog_step") == 300.0
        admin.close()

    run(main)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"name": "pages", "timing": {"fixed": 1}},
            "set_timing: 'pages' is not a timing of generate (catalog_step, page, page_retry)",
        ),
        (
            {"name": "pages", "timing": {"fixed": -1}},
            "set_timing: 'pages' is not a timing of generate",
        ),
        ({"name": "page", "timing": {"fixed": -1}}, "set_timing: timing of 'page': fixed must be"),
        (
            {"name": "page", "timing": {}},
            "set_timing: timing of 'page': a delay takes exactly one of fixed, uniform, lognormal",
        ),
        (
            {"name": "page", "timing": {"uniform": [2, 1]}},
            "set_timing: timing of 'page': uniform needs 0 <= lower <= upper",
        ),
        (
            {"name": "page", "timing": {"fixed": 1, "speed": 2}},
            "set_timing: timing of 'page': ",
        ),
        ({"name": "page"}, 'set_timing takes {"name": "...", "timing": {...}}'),
        ({"timing": {"fixed": 1}}, 'set_timing takes {"name": "...", "timing": {...}}'),
        ({"name": "page", "timing": 5}, 'set_timing takes {"name": "...", "timing": {...}}'),
    ],
)
def test_set_timing_refuses_and_changes_nothing(params: dict[str, Any], message: str) -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0)
        with pytest.raises(ControlError) as caught:
            await admin.call("set_timing", **params)
        assert caught.value.message.startswith(message), caught.value.message
        assert admin.session.runtime.timing("page") == admin.session.chart.timing["page"]
        admin.close()

    run(main)


def test_set_speed() -> None:
    async def main() -> None:
        admin = Admin("generate", "-y", speed=1.0)
        assert await admin.call("set_speed", speed=2.5) == {"speed": 2.5}
        assert admin.session.speed == 2.5
        assert await admin.call("set_speed", speed=0) == {"speed": 0.0}
        assert await asyncio.wait_for(admin.channel.done, 5) == 0
        admin.close()

    run(main)


@pytest.mark.parametrize("speed", [-0.5, "1", True, False, None, [], {}])
def test_set_speed_refuses(speed: Any) -> None:
    async def main() -> None:
        admin = Admin("generate", speed=1.0)
        with pytest.raises(ControlError) as caught:
            await admin.call("set_speed", speed=speed)
        assert caught.value.message == f"set_speed takes a number >= 0, got {json.dumps(speed)}"
        assert admin.session.speed == 1.0
        admin.close()

    run(main)


def test_pause_and_resume() -> None:
    async def main() -> None:
        admin = Admin("generate", "-y", speed=0.01)
        paused = await admin.call("pause")
        assert paused == {"paused": True, "clock": admin.session.now}
        assert admin.channel.paused
        count = len(admin.out.writes)
        await asyncio.sleep(0.2)  # the whole run takes ~0.1 s at this speed
        assert len(admin.out.writes) == count and not admin.session.done
        resumed = await admin.call("resume")
        assert resumed["paused"] is False and not admin.channel.paused
        assert await asyncio.wait_for(admin.channel.done, 5) == 0
        admin.close()

    run(main)


def test_quit() -> None:
    async def main() -> None:
        admin = Admin("generate", "-y", speed=1.0)
        assert await admin.call("quit") == {"done": True}
        last = json.loads(admin.out.writes[-1])
        assert last["done"] is True and last["waiting_for"] == []
        assert await admin.channel.done == 0
        assert await admin.call("quit") == {"done": True}  # again: nothing more written
        assert len(admin.out.writes) == 2
        admin.close()

    run(main)


def test_an_unknown_subtype_is_named() -> None:
    async def main() -> None:
        admin = Admin("version")
        with pytest.raises(ControlError) as caught:
            await admin.call("authorize")  # the simulator asks that; it does not answer it
        assert caught.value.message == "Unsupported control request subtype: authorize"
        admin.close()

    run(main)


@pytest.mark.parametrize(
    "params",
    [
        {"fault": {"kind": "diagnostic", "text": "warning: \ud800"}},
        {"failure": {"point": "page", "first": 99, "error": "page: \udc00"}},
    ],
)
def test_inject_with_a_lone_surrogate_is_refused_and_changes_nothing(
    params: dict[str, Any],
) -> None:
    async def main() -> None:
        admin = Admin("generate", speed=0.0)
        before = admin.session.snapshot()
        request = {"subtype": "inject", **params}
        frame = {"type": "control_request", "request_id": "s1", "request": request}
        assert admin.server.handle_frame(json.dumps(frame).encode()) is True
        for _ in range(10):
            await asyncio.sleep(0)
        assert admin.frames == [
            b'{"type":"control_response","response":{"subtype":"error","request_id":"s1",'
            b'"error":"control: invalid string (lone surrogate)"}}\n'
        ]
        assert admin.session.snapshot() == before
        assert not admin.channel.stage.faults
        assert admin.session.runtime.failure("page", target=1, attempt=1) is None
        admin.channel.feed(GENERATE)
        assert await admin.channel.done == 0
        assert all(line.startswith(b'{"vm":') for line in admin.out.lines)
        admin.close()

    run(main)


def test_violations_are_the_sessions_mistakes_as_plain_json() -> None:
    async def main() -> None:
        admin = Admin("config")
        assert await admin.call("violations") == {"violations": [], "total": 0}
        admin.channel.feed(b'{"type":"save","llm_api_key":"sk-hidden"')  # not even JSON
        admin.channel.feed(b'{"type":"generate"}')
        answer = await admin.call("violations")
        found = answer["violations"]
        assert found == [entry.as_json() for entry in admin.session.violations]
        assert answer["total"] == 2
        bad_json, out_of_turn = found
        assert "sk-hidden" not in bad_json["line"] and "***" in bad_json["line"]
        assert bad_json["error"].startswith("invalid JSON")
        assert out_of_turn == {
            "t": out_of_turn["t"],
            "line": '{"type":"generate"}',
            "state": "editing",
            "waiting_for": ["update_fields", "save", "reload_llm", "quit"],
            "after_done": False,
            "error": 'command "generate" not allowed in state editing',
        }
        admin.close()

    run(main)


def test_no_answer_holds_a_key_however_it_came() -> None:
    async def main() -> None:
        admin = Admin("config")
        escaped = b'{"type":"update_fields","params":{"fields":{"llm_\\u0061pi_key":"sk-admin-1"}}}'
        admin.channel.feed(escaped)
        admin.channel.feed(b"{'note': 'sk-\\u0061dmin-1'")  # not JSON; the key by value only
        answers = [await admin.call("snapshot"), await admin.call("violations")]
        with pytest.raises(ControlError) as caught:
            await admin.call("set_speed", speed="sk-admin-1")
        assert "***" in caught.value.message
        text = json.dumps(answers) + caught.value.message + repr(b"".join(admin.frames))
        assert "sk-admin-1" not in text and "sk-\\u0061dmin-1" not in text
        assert answers[1]["violations"][0]["line"] == "{'note': '***'"
        admin.close()

    run(main)


@pytest.mark.parametrize(
    ("result", "unmarked"),
    [
        ({"command": "config", "vm": {"state": "editing", "n": [1, 2.5, None]}}, True),
        ({"llm_api_key": ""}, False),  # a name: "_k"
        ({"LLM_API_\u212aEY": "x"}, False),  # with the Kelvin sign Go folds into k
        ({"json_key": "a_Key", "value": "x"}, False),
        ({"note": "sk-known-1 in a sentence"}, False),  # a value looked for
        ({"note": "a \\ backslash"}, False),  # an escape may spell anything
        ({"note": "\n"}, False),
        ({"note": "\ud800"}, False),  # msgspec does not write it: the walk judges
        ({1.5: "x"}, True),
        ({(1,): "x"}, False),
    ],
)
def test_an_answer_with_no_mark_of_a_key_is_left_as_it_is(result: Any, unmarked: bool) -> None:
    secrets = Secrets(["sk-known-1"])
    assert _unmarked(secrets, result) is unmarked
    if unmarked:
        assert secrets.redact(result) == result  # what the walk would have given


def test_a_connected_peer_gets_no_key_even_in_what_the_conn_echoes() -> None:
    async def main() -> None:
        session = build_session("config", [])
        session.secrets.add("sk-echoed-1")
        channel = Channel(Hub(asyncio.get_running_loop()), session, stage_of(session), Recorder())
        written: list[bytes] = []
        conn = connect(written.append, channel)
        frame = {
            "type": "control_request",
            "request_id": "sk-echoed-1",
            "request": {"subtype": "sk-echoed-1"},
        }
        assert conn.handle_frame(json.dumps(frame).encode())
        for _ in range(10):
            await asyncio.sleep(0)
        (answer,) = written
        assert (
            b"sk-echoed-1" not in answer and b"Unsupported control request subtype: ***" in answer
        )
        conn.close()
        channel.close()

    run(main)


def test_violations_over_control_stdio_and_the_journal_of_a_controlled_process(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.jsonl"
    with Proc("config", "--control", "stdio", "--journal", str(journal)) as proc:
        proc.read_event()
        proc.send({"type": "generate"})
        assert proc.read_event()["error"] == 'command "generate" not allowed in state editing'
        request = {
            "type": "control_request",
            "request_id": "v",
            "request": {"subtype": "violations"},
        }
        proc.send(request)
        response = json.loads(proc.read_raw())
        assert response["type"] == "control_response"
        (found,) = response["response"]["response"]["violations"]
        assert (found["line"], found["state"]) == ('{"type":"generate"}', "editing")
        assert found["waiting_for"] == ["update_fields", "save", "reload_llm", "quit"]
        proc.send({"type": "control_request", "request_id": "q", "request": {"subtype": "quit"}})
        assert proc.wait() == 0
    (process,) = read_journal(str(journal))
    kinds = [type(record).__name__ for record in process.records]
    assert kinds == ["Event", "Line", "Event", "Event", "Exit"]  # no control frame in it
    assert process.exit is not None and process.exit.how == "control-quit"
