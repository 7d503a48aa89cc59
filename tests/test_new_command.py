"""A command is its module: an eighth zread command, declared here and registered only
here, runs through every part of the simulator with nothing under ``simulator/``
changed for it.

This test module is the command's module: ``CHART``, its model, its flags, its timing,
its failure point, its help, its examples and its reference answer are all below. The
fixture registers it in ``statecharts.COMMANDS`` for one test; a process started here
registers it the same way before it runs the simulator's own ``main``. The command,
``zread greet``, waits at one gate (``greet``, a choice of loudness), then waves on a
timer (``wave``, 0.5 s by default) and says hello to ``--name``; a scenario failure at
point ``wave`` ends it in ``error``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest

import statecharts
from simulator.core.command import Answer, Examples, Flag
from simulator.core.driver import Driver, Flags, InvalidParams

ROOT = Path(__file__).resolve().parents[1]

# -- the command: everything true of ``zread greet`` ---------------------------------------

SUMMARY = "Greet someone (a command this test adds)"
HELP = "Greet someone, after waving for a while."
ABOUT = "Greets: the `greet` gate chooses the loudness, then a wave on a timer says hello."


class GreetFlags(Flags, frozen=True):
    name: Annotated[str, Flag("--name", metavar="string", help="whom to greet")] = "world"


class GreetParams(msgspec.Struct):
    loud: bool = False


class GreetVM(msgspec.Struct):
    state: str = ""
    greeting: str = ""
    error: str = ""


class GreetModel(Driver):
    flags: GreetFlags
    vm_type = GreetVM
    vm: GreetVM
    loud = False

    def choose(self, event: Any) -> None:
        self.loud = event.kwargs["params"].loud

    def check_greet(self, params: GreetParams) -> None:
        if not isinstance(params.loud, bool):
            raise InvalidParams("loud must be true or false")

    def greet_examples(self) -> list[dict[str, Any]]:
        return [{"loud": False}, {"loud": True}]

    def wave_fails(self, _: Any) -> bool:
        failure = self.rt.failure("wave")
        if failure is not None:
            self.vm.error = failure.error or "wave: arm too tired"
        return failure is not None

    def say_hello(self, _: Any) -> None:
        hello = f"hello, {self.flags.name}"
        self.vm.greeting = hello.upper() + "!" if self.loud else hello


CHART = {
    "name": "greet",
    "model": "GreetModel",
    "flags": "GreetFlags",
    "timing": {"wave": {"fixed": 0.5}},
    "failures": ["wave"],
    "initial": "asking",
    "states": [
        {"name": "asking", "waiting_for": ["greet", "quit"]},
        {"name": "waving", "timers": [{"after": "wave", "trigger": "_waved"}]},
        {"name": "done", "terminal": True},
        {"name": "error", "terminal": True},
    ],
    "transitions": [
        {"trigger": "greet", "source": "asking", "dest": "waving", "before": "choose"},
        {"trigger": "_waved", "source": "waving", "dest": "error", "conditions": "wave_fails"},
        {"trigger": "_waved", "source": "waving", "dest": "done", "before": "say_hello"},
    ],
    "commands": {
        "greet": {"params": "GreetParams", "check": "check_greet", "examples": "greet_examples"}
    },
}

EXAMPLES = Examples(
    flags=((), ("--name", "ada")),
    scenarios={"wave-fails": '[[failures]]\npoint = "wave"\nerror = "wave: no arms"\n'},
)


def answer(waiting: list[str], vm: dict[str, Any], memory: dict[str, Any]) -> Answer:
    return ("greet", {"loud": True}) if "greet" in waiting else None


# -- registered for one test ---------------------------------------------------------------

REGISTER = (
    f"import sys; sys.path.insert(0, {str(ROOT)!r}); import statecharts; "
    f"statecharts.COMMANDS['greet'] = {__name__!r}; "
    "from simulator.cli import main; sys.exit(main(prog='zread-sim'))"
)
"""A process that knows ``greet`` only by this registration, then runs the simulator."""


@pytest.fixture(autouse=True)
def greet_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(statecharts.COMMANDS, "greet", __name__)


def run_cli(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    from simulator.cli import main

    out, err = io.BytesIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin), stdout=out, stderr=err, prog="zread-sim")
    return code, out.getvalue().decode(), err.getvalue()


def events(text: str | bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- the command line ----------------------------------------------------------------------


def test_the_help_lists_it_and_its_own_help_shows_its_flag() -> None:
    code, listing, _ = run_cli(["--help"])
    assert code == 0
    assert f"  greet       {SUMMARY}" in listing.splitlines()
    code, own, _ = run_cli(["greet", "--help"])
    assert code == 0
    assert own.startswith(HELP + "\n\nUsage:\n  zread-sim greet [flags]\n")
    assert '      --name string   whom to greet (default "world")' in own.splitlines()


def test_a_bad_flag_is_refused_in_one_line() -> None:
    code, out, err = run_cli(["greet", "--stdio", "--loud"])
    assert (code, out) == (2, "")
    assert err == "zread-sim: greet: unrecognized arguments: --loud\n"


# -- the process runner, in a real process over real pipes -----------------------------------


def test_a_process_runs_it_over_pipes_with_a_journal(tmp_path: Path) -> None:
    journal = tmp_path / "greet.jsonl"
    argv = ["greet", "--stdio", "--name", "ada", "--speed", "0", "--no-files"]
    proc = subprocess.run(
        [sys.executable, "-c", REGISTER, *argv, "--journal", str(journal)],
        input=b'{"type":"greet","params":{"loud":true}}\n',
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    got = events(proc.stdout)
    assert [e["vm"]["state"] for e in got] == ["asking", "waving", "done"]
    assert got[0]["waiting_for"] == ["greet", "quit"]
    assert got[-1]["vm"]["greeting"] == "HELLO, ADA!" and got[-1]["done"] is True

    # coverage reads the journal and counts the new chart's states and transitions
    from simulator.tools import coverage

    table = io.StringIO()
    report_path = tmp_path / "coverage.json"
    assert coverage.main([str(journal), "--json", str(report_path)], out=table) == 0
    assert any(line.startswith("greet") for line in table.getvalue().splitlines())
    report = json.loads(report_path.read_text())
    greet = next(c for c in report["commands"] if c["command"] == "greet")
    assert greet["states"] == {"reached": 3, "total": 4}  # asking, waving, done; not error
    assert greet["transitions"] == {"reached": 2, "total": 3}
    assert greet["gates"] == {"reached": 1, "total": 2}  # asking:greet, not asking:quit


# -- virtual time, the reference client, failures -------------------------------------------


def test_virtual_time_runs_it_and_the_scenario_changes_its_delay_and_fails_it() -> None:
    from simulator.runners.virtual import start
    from simulator.scenario import load_scenario

    sim = start("greet", "--name", "bo")
    assert sim.waiting_for == ["greet", "quit"]
    sim.send("greet", loud=False)
    assert sim.vm["state"] == "waving"
    sim.advance(0.49)
    assert not sim.done
    sim.advance(0.01)
    assert sim.done and sim.vm["greeting"] == "hello, bo"

    slow = load_scenario("slow-wave", text="[timing]\nwave = { fixed = 3.0 }\n")
    sim = start("greet", scenario=slow)
    sim.send("greet")
    sim.advance(2.9)
    assert not sim.done
    sim.advance(0.1)
    assert sim.vm["greeting"] == "hello, world"

    failing = load_scenario("fails", text='[[failures]]\npoint = "wave"\n')
    sim = start("greet", scenario=failing)
    sim.send("greet")
    sim.advance(1)
    assert sim.done and sim.vm["state"] == "error" and sim.vm["error"] == "wave: arm too tired"


def test_the_reference_client_answers_its_gate() -> None:
    from simulator.tools.client import ReferenceClient

    event = {"vm": {"state": "asking"}, "waiting_for": ["greet", "quit"], "done": False}
    assert ReferenceClient().answer(event) == b'{"type":"greet","params":{"loud":true}}\n'


def test_bad_params_are_refused_by_the_session_as_for_any_command() -> None:
    from simulator.runners.virtual import start

    sim = start("greet")
    answer = sim.send_line('{"type":"greet","params":{"loud":"very"}}')
    assert answer[-1]["error"] and sim.vm["state"] == "asking"


# -- the tools -----------------------------------------------------------------------------


def test_paths_takes_every_transition_and_its_cases_replay() -> None:
    from simulator.tools import paths, paths_search

    cases, untaken = paths.paths("greet")
    assert untaken == []
    assert {case.scenario for case in cases} >= {"wave-fails"}  # its own example scenario
    for case in cases:
        paths_search.replay(case)


def test_charts_draws_it() -> None:
    from simulator.tools import charts

    diagram = charts.mermaid("greet")
    assert "    asking --> waving : greet\n" in diagram
    assert "    waving --> error : ⏱ _waved [wave_fails]\n" in diagram
    assert "    waving --> done : ⏱ _waved [else]\n" in diagram
    assert f"## greet\n\n{ABOUT}\n" in charts.docs_page()


def test_schema_describes_its_events_and_commands() -> None:
    from simulator.tools import schema

    events_schema = json.dumps(schema.event_schema("greet"))
    assert "greeting" in events_schema
    commands_schema = json.dumps(schema.command_schema("greet"))
    assert '"greet"' in commands_schema and "loud" in commands_schema
    scenario_schema = json.dumps(schema.scenario_schema())
    assert "timing" in scenario_schema
