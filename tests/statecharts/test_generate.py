"""In-process tests of ``statecharts/generate.py`` driven through a sans-I/O Session.

Every run uses virtual time: ``next_deadline()`` then ``advance(deadline)``, so a run at
speed 1 takes no wall time and ``session.now`` at an event is the simulated time of it.
The reference is seeds/004 (the generate tables) and FIDELITY sections 1-3 and 5.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.core.session import Session
from simulator.scenario import Scenario, load_scenario, wiki
from statecharts import load_chart
from statecharts.generate import GenerateFlags as Flags

KEYS = ["vm", "waiting_for", "done", "error"]
VM_KEYS = ["state", "max_retries", "select_action", "catalog", "pages", "done_total", "error"]
CATALOG_KEYS = ["status", "tool_name", "error", "auto_retry"]
PAGES_KEYS = ["tasks", "done", "total", "waiting_retry"]
TASK_KEYS = ["id", "title", "slug", "state", "retry_count", "max_retries", "error"]

SELECT = ["select_action", "cancel", "quit"]
RUNNING = ["quit", "cancel"]
CATALOG_GATE = ["quit", "retry_catalog"]
RETRY_GATE = ["quit", "retry", "skip_all"]

TASK_STATES = {"pending", "running", "retry_pending", "done", "failed", "resumed"}
CATALOG_STATES = {"idle", "running", "done", "resumed", "error"}
GENERATE_SCENARIOS = ("default", "empty", "draft", "flaky-pages", "failing-pages", "catalog-error")
PROJECT = "acme/widget"
PAGES = 16
MAX_CONCURRENT = 4
MAX_RETRIES = 2

PAGE3_ERROR = "page: the model returned 502 Bad Gateway"
PAGE7_ERROR = "page: context length exceeded"
CATALOG_ERROR = "catalog: the model returned no JSON"

Event = dict[str, Any]


def cmd(type_: str, **params: Any) -> bytes:
    """A command line as a client writes it (no newline)."""
    return json.dumps({"type": type_, "params": params}, separators=(",", ":")).encode()


def head(raw: bytes) -> bytes:
    """The ``{"vm":…,"waiting_for":[…]`` part of an event line."""
    return raw[: raw.rindex(b',"done":')]


def vm_raw(raw: bytes) -> bytes:
    return raw[len(b'{"vm":') : raw.rindex(b',"waiting_for":')]


def scenario_file(tmp_path: Path, text: str, name: str = "custom") -> Scenario:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return load_scenario(str(path))


class Run:
    """One generate session in virtual time, with every event kept (raw, parsed, time)."""

    def __init__(
        self,
        scenario: str | Scenario = "default",
        *,
        seed: int = 0,
        speed: float = 1.0,
        yes: bool = False,
        draft_action: str = "",
        skip_failed: bool = False,
    ) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        flags = Flags(yes=yes, draft_action=draft_action, skip_failed=skip_failed)
        self.session = Session(
            load_chart("generate"), self.scenario, flags=flags, seed=seed, speed=speed
        )
        self.raw: list[bytes] = []
        self.events: list[Event] = []
        self.times: list[float] = []
        self.commands = 0
        self._take(self.session.start())

    def _take(self, lines: list[bytes]) -> list[Event]:
        new = []
        for line in lines:
            event = json.loads(line)
            self.raw.append(line)
            self.events.append(event)
            self.times.append(self.session.now)
            new.append(event)
        return new

    @property
    def last(self) -> Event:
        return self.events[-1]

    @property
    def vm(self) -> dict[str, Any]:
        return self.last["vm"]

    @property
    def tasks(self) -> list[dict[str, Any]]:
        return self.vm["pages"]["tasks"]

    def feed(self, line: bytes) -> list[Event]:
        self.commands += 1
        return self._take(self.session.feed(line))

    def send(self, type_: str, **params: Any) -> Event:
        """Send one command; exactly one event answers it."""
        out = self.feed(cmd(type_, **params))
        assert len(out) == 1, out
        return out[0]

    def reject(self, line: bytes, prefix: str) -> str:
        """Send a line that must be refused; check the answer; return its error text."""
        previous = self.raw[-1]
        out = self.feed(line)
        assert len(out) == 1, out
        event, raw = out[0], self.raw[-1]
        assert list(event) == KEYS
        assert head(raw) == head(previous), (previous, raw)
        assert event["done"] is False
        assert event["error"].startswith(prefix), event["error"]
        return str(event["error"])

    def step(self) -> list[Event]:
        """Fire the next timer(s); [] when the session waits for the client (or is done)."""
        deadline = self.session.next_deadline()
        if deadline is None:
            return []
        return self._take(self.session.advance(deadline))

    def until(self, predicate: Callable[[Event], bool], limit: int = 100_000) -> Event:
        """Advance until an event satisfies ``predicate``; return that event."""
        if predicate(self.last):
            return self.last
        for _ in range(limit):
            new = self.step()
            if not new:
                raise AssertionError(f"stalled before the predicate held: {self.last}")
            for event in new:
                if predicate(event):
                    return event
        raise AssertionError("too many steps")

    def settle(self, limit: int = 100_000) -> Event:
        """Advance until the session waits for the client or is done."""
        for _ in range(limit):
            if self.session.done or not self.step():
                return self.last
        raise AssertionError("too many steps")

    def finish(self, answer: Callable[[Event], bytes] | None = None) -> Event:
        """Run to the done event, answering every gate with ``answer``."""
        answer = answer or auto_answer
        for _ in range(1000):
            self.settle()
            if self.session.done:
                return self.last
            out = self.feed(answer(self.last))
            assert len(out) == 1 and out[0]["error"] == "", out
        raise AssertionError("too many gates")


def auto_answer(event: Event) -> bytes:
    """What a happy client answers at each gate: generate/resume, retry_catalog, retry."""
    vm = event["vm"]
    if vm["state"] == "select_action":
        action = "resume" if vm["select_action"]["scenario"] == "has_draft" else "generate"
        return cmd("select_action", action=action)
    if vm["catalog"]["status"] == "error":
        return cmd("retry_catalog")
    if vm["pages"]["waiting_retry"]:
        failed = [t["id"] for t in vm["pages"]["tasks"] if t["state"] == "failed"]
        return cmd("retry", task_id=failed[0])
    raise AssertionError(f"no gate to answer: {event}")


def running(event: Event) -> list[int]:
    return [t["id"] for t in event["vm"]["pages"]["tasks"] if t["state"] == "running"]


def states(event: Event) -> dict[int, str]:
    return {t["id"]: t["state"] for t in event["vm"]["pages"]["tasks"]}


def in_pages(event: Event) -> bool:
    return bool(event["vm"]["pages"]["tasks"])


def expected_waiting_for(vm: dict[str, Any]) -> list[str]:
    """FIDELITY section 2 for generate, from the vm alone."""
    if vm["state"] == "select_action":
        return SELECT
    if vm["state"] in ("done", "error"):
        return []
    assert vm["state"] == "running", vm
    if vm["catalog"]["status"] == "error":
        return CATALOG_GATE
    if vm["pages"]["waiting_retry"]:
        return RETRY_GATE
    return RUNNING


def compress(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not out or out[-1] != value:
            out.append(value)
    return out


def has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(has_float(v) for v in value)
    return False


# -- the first event and the select_action gate ------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "gate", "next_action"),
    [("default", "has_wiki", "browse"), ("empty", "empty", "generate"), ("draft", "has_draft", "")],
)
def test_first_event_is_the_select_action_gate(scenario: str, gate: str, next_action: str) -> None:
    run = Run(scenario)
    assert len(run.events) == 1
    event = run.last
    assert list(event) == KEYS
    assert event["waiting_for"] == SELECT
    assert event["done"] is False
    assert event["error"] == ""
    vm = event["vm"]
    assert list(vm) == VM_KEYS
    assert vm["state"] == "select_action"
    assert vm["max_retries"] == MAX_RETRIES
    assert vm["select_action"]["scenario"] == gate
    assert vm["select_action"]["next_action"] == next_action
    assert vm["catalog"] == {"status": "idle", "tool_name": "", "error": "", "auto_retry": 0}
    assert list(vm["catalog"]) == CATALOG_KEYS
    assert vm["pages"] == {"tasks": [], "done": 0, "total": 0, "waiting_retry": False}
    assert list(vm["pages"]) == PAGES_KEYS
    assert vm["done_total"] == 0
    assert vm["error"] == ""
    # The gate waits for the client: no timer is pending.
    assert run.session.next_deadline() is None


def test_has_wiki_gate_carries_the_current_wiki_date() -> None:
    for seed in (0, 1, 9):
        run = Run("default", seed=seed)
        gate = run.vm["select_action"]
        assert list(gate) == ["scenario", "wiki_date", "draft_done", "draft_total", "next_action"]
        current = [v for v in wiki.versions(run.scenario.world, seed) if v.is_current]
        assert gate["wiki_date"] == current[0].timestamp
        stamp = dt.datetime.fromisoformat(gate["wiki_date"].replace("Z", "+00:00"))
        assert stamp.utcoffset() == dt.timedelta(0)
        assert gate["draft_done"] == 0
        assert gate["draft_total"] == 0


def test_has_wiki_gate_uses_the_world_timestamp_when_given(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path,
        '[[world.wikis]]\nid = "w-old"\ntimestamp = "2025-01-02T03:04:05Z"\n\n'
        '[[world.wikis]]\nid = "w-new"\ntimestamp = "2025-06-07T08:09:10Z"\ncurrent = true\n',
    )
    gate = Run(scenario).vm["select_action"]
    assert gate["scenario"] == "has_wiki"
    assert gate["wiki_date"] == "2025-06-07T08:09:10Z"


@pytest.mark.parametrize("scenario", ["empty", "draft"])
def test_wiki_date_is_absent_unless_has_wiki(scenario: str) -> None:
    run = Run(scenario)
    assert "wiki_date" not in run.vm["select_action"]
    assert b"wiki_date" not in run.raw[0]
    run.finish()
    for raw in run.raw:
        assert b"wiki_date" not in raw


def test_has_draft_gate_counts_the_draft() -> None:
    gate = Run("draft").vm["select_action"]
    assert gate == {
        "scenario": "has_draft",
        "draft_done": 6,
        "draft_total": PAGES,
        "next_action": "",
    }


def test_draft_wins_over_an_existing_wiki() -> None:
    # draft.toml extends default, which has a current wiki.
    assert Run("draft").scenario.world.wikis
    assert Run("draft").vm["select_action"]["scenario"] == "has_draft"


ALLOWED = {
    "default": ("generate", "browse", "cancel"),
    "empty": ("generate", "cancel"),
    "draft": ("resume", "clear", "cancel"),
}
ALL_ACTIONS = ("generate", "browse", "resume", "clear", "cancel")


@pytest.mark.parametrize(
    ("scenario", "action"),
    [(s, a) for s in ALLOWED for a in ALL_ACTIONS if a not in ALLOWED[s]],
)
def test_an_action_the_gate_does_not_offer_is_invalid_params(scenario: str, action: str) -> None:
    run = Run(scenario)
    error = run.reject(cmd("select_action", action=action), "invalid params: ")
    assert action in error
    assert run.vm["state"] == "select_action"
    assert run.session.next_deadline() is None
    # Nothing changed: an allowed action is still taken.
    event = run.send("select_action", action=ALLOWED[scenario][0])
    assert event["error"] == ""
    assert event["vm"]["state"] in ("running", "done")


@pytest.mark.parametrize(
    "line",
    [
        cmd("select_action", action="launch"),
        cmd("select_action", action=""),
        cmd("select_action", action=1),
        cmd("select_action", action=None),
        cmd("select_action"),
        b'{"type":"select_action"}',
        b'{"type":"select_action","params":[]}',
        b'{"type":"select_action","params":"generate"}',
    ],
)
def test_malformed_select_action_params_are_invalid_params(line: bytes) -> None:
    for scenario in ("default", "draft"):
        run = Run(scenario)
        run.reject(line, "invalid params: ")
        # A second rejection repeats the same vm and waiting_for again.
        run.reject(line, "invalid params: ")
        assert run.session.next_deadline() is None


def test_unknown_params_keys_are_ignored() -> None:
    run = Run("empty")
    event = run.send("select_action", action="generate", extra={"x": 1})
    assert event["error"] == ""
    assert event["vm"]["state"] == "running"


@pytest.mark.parametrize(
    ("line", "type_"),
    [
        (cmd("retry", task_id=1), "retry"),
        (cmd("skip_all"), "skip_all"),
        (cmd("retry_catalog"), "retry_catalog"),
        (cmd("_start"), "_start"),
        (cmd("_catalog_step"), "_catalog_step"),
        (cmd("generate"), "generate"),
        (b'{"params":{}}', ""),
    ],
)
def test_commands_outside_waiting_for_are_not_allowed_at_the_gate(line: bytes, type_: str) -> None:
    run = Run("default")
    error = run.reject(line, "command ")
    assert error == f'command "{type_}" not allowed in state select_action'


@pytest.mark.parametrize("scenario", list(ALLOWED))
@pytest.mark.parametrize(
    "line", [cmd("cancel"), cmd("select_action", action="cancel")], ids=["command", "action"]
)
def test_cancel_at_the_gate_ends_at_once(scenario: str, line: bytes) -> None:
    run = Run(scenario)
    out = run.feed(line)
    assert len(out) == 1
    event = out[0]
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["error"] == ""
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == 0
    assert event["vm"]["catalog"]["status"] == "idle"
    assert event["vm"]["pages"]["tasks"] == []
    assert run.session.done
    assert run.session.next_deadline() is None
    assert run.feed(cmd("quit")) == []


def test_browse_ends_at_once() -> None:
    run = Run("default")
    event = run.send("select_action", action="browse")
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == 0
    assert run.session.done
    assert run.session.next_deadline() is None


@pytest.mark.parametrize(("scenario", "action"), [("default", "generate"), ("empty", "generate")])
def test_generate_starts_the_catalog(scenario: str, action: str) -> None:
    run = Run(scenario)
    event = run.send("select_action", action=action)
    assert event["done"] is False
    assert event["waiting_for"] == RUNNING
    assert event["vm"]["state"] == "running"
    assert event["vm"]["catalog"]["status"] == "running"
    assert event["vm"]["pages"]["tasks"] == []
    assert run.session.next_deadline() is not None
    final = run.finish()
    assert final["vm"]["state"] == "done"
    assert final["vm"]["done_total"] == PAGES


# -- flags --------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["default", "empty"])
def test_yes_skips_select_action(scenario: str) -> None:
    run = Run(scenario, yes=True)
    first = run.events[0]
    assert first["vm"]["state"] == "running"
    assert first["waiting_for"] == RUNNING
    assert first["vm"]["catalog"]["status"] == "running"
    assert all(e["vm"]["state"] != "select_action" for e in run.events)
    final = run.finish(lambda e: pytest.fail(f"--yes needs no command: {e}"))
    assert run.commands == 0
    assert final["vm"]["done_total"] == PAGES
    assert all(e["vm"]["state"] != "select_action" for e in run.events)


def check_resumed(run: Run) -> None:
    """The run resumed the draft: catalog resumed, its 6 pages resumed and counted."""
    first = next(e for e in run.events if in_pages(e))
    assert first["vm"]["catalog"]["status"] == "resumed"
    tasks = first["vm"]["pages"]["tasks"]
    assert [t["state"] for t in tasks[:6]] == ["resumed"] * 6
    assert all(t["state"] in ("pending", "running") for t in tasks[6:])
    assert first["vm"]["pages"]["done"] == 6
    assert first["vm"]["pages"]["total"] == PAGES
    final = run.finish()
    assert final["vm"]["state"] == "done"
    assert final["vm"]["catalog"]["status"] == "resumed"
    assert [t["state"] for t in final["vm"]["pages"]["tasks"][:6]] == ["resumed"] * 6
    assert all(t["state"] == "done" for t in final["vm"]["pages"]["tasks"][6:])
    assert final["vm"]["pages"]["done"] == PAGES
    assert final["vm"]["done_total"] == PAGES
    for event in run.events:
        # The catalog does not run again: no tool is called.
        assert event["vm"]["catalog"]["tool_name"] == ""
        assert event["vm"]["catalog"]["status"] in ("idle", "resumed")
        if in_pages(event):
            assert [t["state"] for t in event["vm"]["pages"]["tasks"][:6]] == ["resumed"] * 6


def test_yes_alone_ignores_a_draft_and_starts_over() -> None:
    """zread 0.2.13 as measured: ``-y`` without ``--draft`` reports ``empty`` and runs
    the catalog again; only ``--draft resume`` resumes."""
    run = Run("draft", yes=True)
    assert run.events[0]["vm"]["state"] == "running"
    assert run.events[0]["vm"]["select_action"]["scenario"] == "empty"
    check_cleared(run)
    assert run.commands == 0


def test_yes_with_draft_resume_resumes() -> None:
    run = Run("draft", yes=True, draft_action="resume")
    assert run.events[0]["vm"]["select_action"]["scenario"] == "has_draft"
    check_resumed(run)
    assert run.commands == 0


def test_draft_action_resume() -> None:
    run = Run("draft", draft_action="resume")
    assert run.events[0]["vm"]["state"] == "running"
    check_resumed(run)
    assert run.commands == 0


def test_select_action_resume() -> None:
    run = Run("draft")
    event = run.send("select_action", action="resume")
    assert event["vm"]["state"] == "running"
    assert event["waiting_for"] == RUNNING
    check_resumed(run)


def complete_draft() -> Scenario:
    """A draft read from disk with every page written: a run killed between its last
    page and its commit leaves one."""
    return load_scenario(
        "complete-draft",
        text='[[world.project.pages]]\ntitle = "A"\n[[world.project.pages]]\ntitle = "B"\n'
        '[world.draft]\nid = "2025-01-01-000000"\nfinished = ["1-a", "2-b"]\n',
    )


@pytest.mark.parametrize("how", ["--draft resume", "select_action resume"])
def test_resuming_a_draft_with_every_page_written_commits_it_at_once(how: str) -> None:
    from simulator.core.effects import CatalogReady, WikiGenerated

    flags = Flags(draft_action="resume") if how == "--draft resume" else Flags()
    session = Session(load_chart("generate"), complete_draft(), flags=flags)
    outcome = session.start()
    if how == "select_action resume":
        assert json.loads(outcome[-1])["vm"]["state"] == "select_action"
        outcome = session.feed(cmd("select_action", action="resume"))
    final = json.loads(outcome[-1])
    assert final["done"] is True and final["vm"]["state"] == "done"
    assert final["vm"]["done_total"] == 2 and final["vm"]["catalog"]["status"] == "resumed"
    assert all(t["state"] == "resumed" for t in final["vm"]["pages"]["tasks"])
    kinds = [type(effect) for effect in outcome.effects]
    assert kinds == [CatalogReady, WikiGenerated]
    assert outcome.effects[1] == WikiGenerated(pages_done=2, pages_total=2)


def test_a_scenario_drafts_done_count_always_leaves_a_page_to_run() -> None:
    run = Run(complete_draft_by_count(), draft_action="resume")
    assert run.vm["state"] == "running"
    assert run.finish()["vm"]["done_total"] == PAGES


def complete_draft_by_count() -> Scenario:
    return load_scenario("by-count", text='extends = "draft"\n[world.draft]\ndone = 99\n')


def check_cleared(run: Run) -> None:
    """The draft was thrown away: the catalog runs, then every page from scratch."""
    assert run.vm["catalog"]["status"] == "running"
    final = run.finish()
    first = next(e for e in run.events if in_pages(e))
    assert first["vm"]["catalog"]["status"] == "done"
    assert first["vm"]["pages"]["done"] == 0
    assert all(t["state"] in ("pending", "running") for t in first["vm"]["pages"]["tasks"])
    assert all(t["state"] != "resumed" for e in run.events for t in e["vm"]["pages"]["tasks"])
    assert any(e["vm"]["catalog"]["tool_name"] for e in run.events)
    assert final["vm"]["done_total"] == PAGES
    assert all(t["state"] == "done" for t in final["vm"]["pages"]["tasks"])


def test_draft_action_clear() -> None:
    run = Run("draft", draft_action="clear")
    assert run.events[0]["vm"]["state"] == "running"
    check_cleared(run)
    assert run.commands == 0


def test_select_action_clear() -> None:
    run = Run("draft")
    run.send("select_action", action="clear")
    check_cleared(run)


def test_draft_action_clear_beats_yes() -> None:
    run = Run("draft", yes=True, draft_action="clear")
    check_cleared(run)


def test_draft_action_cancel() -> None:
    run = Run("draft", draft_action="cancel")
    assert len(run.events) == 1
    event = run.last
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == 0
    assert run.session.done
    assert run.session.next_deadline() is None


def test_draft_action_without_a_draft_does_not_answer_select_action() -> None:
    for action in ("resume", "clear", "cancel"):
        run = Run("default", draft_action=action)
        assert run.last["vm"]["state"] == "select_action"
        assert run.last["done"] is False


# -- the catalog --------------------------------------------------------------------------


def test_catalog_goes_idle_running_done_and_calls_tools() -> None:
    run = Run("default")
    run.send("select_action", action="generate")
    run.until(in_pages)
    statuses = compress([e["vm"]["catalog"]["status"] for e in run.events])
    assert statuses == ["idle", "running", "done"]
    tools = [e["vm"]["catalog"]["tool_name"] for e in run.events]
    assert len({t for t in tools if t}) >= 3
    # The tool changes during the run (several events, several values, in sequence).
    assert len(compress([t for t in tools if t])) >= 4
    before_pages = [e for e in run.events if not in_pages(e)]
    assert all(e["vm"]["pages"]["total"] == 0 for e in before_pages)
    assert all(e["vm"]["catalog"]["auto_retry"] == 0 for e in run.events)
    assert all(e["vm"]["catalog"]["error"] == "" for e in run.events)


def test_catalog_error_retries_automatically_then_opens_the_gate() -> None:
    run = Run("catalog-error", yes=True)
    gate = run.settle()
    assert gate["done"] is False
    assert gate["waiting_for"] == CATALOG_GATE
    vm = gate["vm"]
    assert vm["state"] == "running"
    assert vm["catalog"]["status"] == "error"
    assert vm["catalog"]["error"] == CATALOG_ERROR
    # The first attempt and its max_retries automatic retries failed: auto_retry counts
    # the retries (2), as retry_count does for a page, not the failed attempts (3).
    assert vm["catalog"]["auto_retry"] == MAX_RETRIES
    assert vm["pages"]["tasks"] == []
    assert run.session.next_deadline() is None
    counts = [e["vm"]["catalog"]["auto_retry"] for e in run.events]
    assert compress(counts) == [0, 1, 2]
    # Each failed attempt but the last restarted the agent: tools ran again after it.
    for count in (1, 2):
        after = [
            e for e in run.events if e["vm"]["catalog"]["auto_retry"] == count and e is not gate
        ]
        assert all(e["vm"]["catalog"]["status"] == "running" for e in after)
        assert all(e["waiting_for"] == RUNNING for e in after)
        assert len({e["vm"]["catalog"]["tool_name"] for e in after} - {""}) >= 3
        assert all(e["vm"]["catalog"]["error"] == CATALOG_ERROR for e in after)


def test_catalog_gate_refuses_other_commands() -> None:
    run = Run("catalog-error", yes=True)
    run.settle()
    assert run.reject(cmd("cancel"), "command ") == 'command "cancel" not allowed in state running'
    assert run.reject(cmd("retry", task_id=1), "command ") == (
        'command "retry" not allowed in state running'
    )
    assert run.reject(cmd("skip_all"), "command ").endswith("not allowed in state running")


def test_retry_catalog_then_succeeds_and_pages_run() -> None:
    run = Run("catalog-error", yes=True)
    run.settle()
    event = run.send("retry_catalog")
    start = len(run.events) - 1  # by position: an earlier event may show the same vm
    assert event["waiting_for"] == RUNNING
    assert event["vm"]["catalog"]["status"] == "running"
    assert event["vm"]["state"] == "running"
    final = run.finish(lambda e: pytest.fail(f"no other gate expected: {e}"))
    after = run.events[start:]
    assert compress([e["vm"]["catalog"]["status"] for e in after]) == ["running", "done"]
    assert any(e["vm"]["catalog"]["tool_name"] for e in after)
    # The retry asked for is not an automatic one; the attempt it started succeeded.
    assert all(e["vm"]["catalog"]["auto_retry"] == MAX_RETRIES for e in after)
    assert final["vm"]["state"] == "done"
    assert final["vm"]["done_total"] == PAGES
    assert final["vm"]["catalog"]["status"] == "done"


def test_retry_catalog_is_refused_while_the_catalog_runs() -> None:
    run = Run("default", yes=True)
    run.step()
    error = run.reject(cmd("retry_catalog"), "command ")
    assert error == 'command "retry_catalog" not allowed in state running'


def test_catalog_automatic_retries_follow_max_retries(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path,
        "[world.config]\nmax_retries = 0\n\n"
        '[[failures]]\npoint = "catalog"\nfirst = 1\nerror = "catalog: boom"\n',
    )
    run = Run(scenario, yes=True)
    gate = run.settle()
    assert gate["waiting_for"] == CATALOG_GATE
    assert gate["vm"]["catalog"]["auto_retry"] == 0  # one failed attempt, no retry
    assert all(e["vm"]["catalog"]["auto_retry"] == 0 for e in run.events)
    assert gate["vm"]["catalog"]["error"] == "catalog: boom"
    run.send("retry_catalog")
    final = run.finish()
    assert final["vm"]["done_total"] == PAGES
    assert final["vm"]["catalog"]["auto_retry"] == 0


def test_auto_retry_counts_the_automatic_retries_of_every_round(tmp_path: Path) -> None:
    # max_retries 2, attempts 1-4 fail: round one is attempts 1-3 (two retries), the
    # gate; retry_catalog starts round two: attempt 4 fails, one more automatic retry,
    # attempt 5 succeeds. auto_retry keeps counting: 3 automatic retries in all.
    scenario = scenario_file(
        tmp_path, '[[failures]]\npoint = "catalog"\nfirst = 4\nerror = "catalog: boom"\n'
    )
    run = Run(scenario, yes=True)
    gate = run.settle()
    assert gate["vm"]["catalog"]["auto_retry"] == MAX_RETRIES
    run.send("retry_catalog")
    final = run.finish(lambda e: pytest.fail(f"no other gate expected: {e}"))
    assert final["vm"]["catalog"]["auto_retry"] == MAX_RETRIES + 1
    counts = compress([e["vm"]["catalog"]["auto_retry"] for e in run.events])
    assert counts == [0, 1, 2, 3]


def test_cancel_during_the_catalog() -> None:
    run = Run("default", yes=True)
    run.until(lambda e: e["vm"]["catalog"]["tool_name"] != "")
    event = run.send("cancel")
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == 0
    assert run.session.done
    assert run.session.next_deadline() is None


def test_cancel_during_the_catalog_leaves_it_idle() -> None:
    """Nothing runs after a cancel: the catalog that was being made is not made (idle,
    no tool), and its counters and last error stay as they were."""
    run = Run("catalog-error", yes=True)
    before = run.until(lambda e: e["vm"]["catalog"]["auto_retry"] == 1)
    run.until(lambda e: e["vm"]["catalog"]["tool_name"] != "")
    event = run.send("cancel")
    assert event["vm"]["catalog"] == {
        "status": "idle",
        "tool_name": "",
        "error": CATALOG_ERROR,
        "auto_retry": before["vm"]["catalog"]["auto_retry"],
    }
    assert event["vm"]["pages"]["tasks"] == []


def test_broken_repository_ends_with_the_catalog_in_error(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path, '[[failures]]\npoint = "repository"\nerror = "open repository: no .git here"\n'
    )
    run = Run(scenario, yes=True)
    assert run.last["vm"]["catalog"]["status"] == "running"
    final = run.settle()
    assert final["vm"]["state"] == "error"
    assert final["vm"]["catalog"] == {
        "status": "error",
        "tool_name": "",
        "error": "open repository: no .git here",
        "auto_retry": 0,
    }


# -- the pages ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 5, 123])
def test_pages_follow_the_wiki_catalog(seed: int) -> None:
    run = Run("default", seed=seed, yes=True)
    first = run.until(in_pages)
    expected = wiki.catalog(seed, PROJECT, PAGES)
    tasks = first["vm"]["pages"]["tasks"]
    assert [(t["id"], t["title"], t["slug"]) for t in tasks] == [
        (p.id, p.title, p.slug) for p in expected
    ]
    assert [t["id"] for t in tasks] == list(range(1, PAGES + 1))
    assert first["vm"]["pages"]["total"] == PAGES
    assert first["vm"]["pages"]["done"] == 0
    assert first["vm"]["pages"]["waiting_retry"] is False
    for task in tasks:
        assert list(task) == TASK_KEYS
        assert task["retry_count"] == 0
        assert task["max_retries"] == MAX_RETRIES
        assert task["error"] == ""
    # Created pending, in catalog order: the first max_concurrent have just started.
    assert running(first) == list(range(1, MAX_CONCURRENT + 1))
    assert all(t["state"] == "pending" for t in tasks[MAX_CONCURRENT:])


def test_pages_start_in_catalog_order_and_refill_slots() -> None:
    run = Run("default", yes=True)
    run.finish()
    started: list[int] = []
    for event in run.events:
        for task_id in running(event):
            if task_id not in started:
                started.append(task_id)
    assert started == list(range(1, PAGES + 1))
    counts = [len(running(e)) for e in run.events if in_pages(e)]
    assert max(counts) == MAX_CONCURRENT
    # While pages are still pending, every slot is used.
    for event in run.events:
        pending = [t for t in event["vm"]["pages"]["tasks"] if t["state"] == "pending"]
        if pending:
            assert len(running(event)) == MAX_CONCURRENT


def test_flaky_pages_retry_within_their_automatic_retries() -> None:
    seen_retry = 0
    for seed in range(5):
        run = Run("flaky-pages", seed=seed, yes=True)
        final = run.finish(lambda e: pytest.fail(f"flaky pages must not open a gate: {e}"))
        assert final["vm"]["state"] == "done"
        assert final["vm"]["done_total"] == PAGES
        assert all(t["state"] == "done" for t in final["vm"]["pages"]["tasks"])
        previous: dict[int, dict[str, Any]] = {}
        for event in run.events:
            for task in event["vm"]["pages"]["tasks"]:
                before = previous.get(task["id"])
                if task["state"] == "retry_pending" and before["state"] != "retry_pending":
                    seen_retry += 1
                    assert before["state"] == "running"
                    assert task["retry_count"] == before["retry_count"] + 1
                    assert task["retry_count"] <= task["max_retries"]
                    assert task["error"] == "page: the model request timed out"
                if before is not None and before["state"] == "retry_pending":
                    assert task["state"] in ("retry_pending", "pending", "running")
                previous[task["id"]] = task
            assert not event["vm"]["pages"]["waiting_retry"]
    assert seen_retry > 0


def run_to_retry_gate(**kwargs: Any) -> Run:
    run = Run("failing-pages", yes=True, **kwargs)
    run.settle()
    return run


def test_failing_pages_open_the_retry_gate() -> None:
    run = run_to_retry_gate()
    gate = run.last
    assert gate["done"] is False
    assert gate["waiting_for"] == RETRY_GATE
    vm = gate["vm"]
    assert vm["state"] == "running"
    assert vm["pages"]["waiting_retry"] is True
    assert run.session.next_deadline() is None
    tasks = {t["id"]: t for t in vm["pages"]["tasks"]}
    assert tasks[3]["state"] == "failed"
    assert tasks[3]["error"] == PAGE3_ERROR
    assert tasks[3]["retry_count"] == MAX_RETRIES
    assert tasks[7]["state"] == "failed"
    assert tasks[7]["error"] == PAGE7_ERROR
    assert tasks[7]["retry_count"] == MAX_RETRIES
    others = [t for i, t in tasks.items() if i not in (3, 7)]
    assert all(t["state"] == "done" and t["error"] == "" for t in others)
    assert vm["pages"]["done"] == PAGES - 2
    assert vm["done_total"] == 0
    # The gate opened only once nothing was pending or running.
    opened = [e for e in run.events if e["vm"]["pages"]["waiting_retry"]]
    assert opened == [gate]
    # Pages 3 and 7 went retry_pending twice before failing.
    for task_id in (3, 7):
        path = compress([states(e).get(task_id) for e in run.events if in_pages(e)])
        assert path == [
            "pending",
            "running",
            "retry_pending",
            "pending",
            "running",
            "retry_pending",
            "pending",
            "running",
            "failed",
        ] or path == [
            "running",
            "retry_pending",
            "pending",
            "running",
            "retry_pending",
            "pending",
            "running",
            "failed",
        ], path


@pytest.mark.parametrize(
    "line",
    [
        cmd("retry", task_id=1),
        cmd("retry", task_id=4),
        cmd("retry", task_id=0),
        cmd("retry", task_id=-3),
        cmd("retry", task_id=PAGES + 1),
        cmd("retry", task_id="3"),
        cmd("retry", task_id=3.5),
        cmd("retry"),
        b'{"type":"retry","params":{"id":3}}',
    ],
)
def test_retry_of_a_task_that_is_not_failed_is_invalid_params(line: bytes) -> None:
    run = run_to_retry_gate()
    run.reject(line, "invalid params: ")
    assert run.vm["pages"]["waiting_retry"] is True
    assert run.session.next_deadline() is None


def test_retry_gate_refuses_cancel_and_other_commands() -> None:
    run = run_to_retry_gate()
    assert run.reject(cmd("cancel"), "command ") == 'command "cancel" not allowed in state running'
    assert run.reject(cmd("retry_catalog"), "command ").endswith("not allowed in state running")
    assert run.reject(cmd("select_action", action="generate"), "command ").endswith(
        "not allowed in state running"
    )


def test_retry_three_then_seven_ends_done() -> None:
    run = run_to_retry_gate()
    event = run.send("retry", task_id=3)
    assert event["waiting_for"] == RUNNING
    assert event["vm"]["pages"]["waiting_retry"] is False
    task3 = event["vm"]["pages"]["tasks"][2]
    assert task3["state"] in ("pending", "running")
    assert task3["retry_count"] == 0  # a fresh set of retries
    assert states(event)[7] == "failed"
    # While page 3 runs again, the gate is closed.
    assert run.reject(cmd("retry", task_id=7), "command ") == (
        'command "retry" not allowed in state running'
    )
    gate = run.settle()
    assert gate["waiting_for"] == RETRY_GATE
    assert gate["vm"]["pages"]["waiting_retry"] is True
    assert states(gate)[3] == "done"
    assert states(gate)[7] == "failed"
    assert gate["vm"]["pages"]["done"] == PAGES - 1
    run.reject(cmd("retry", task_id=3), "invalid params: ")
    event = run.send("retry", task_id=7)
    assert event["vm"]["pages"]["waiting_retry"] is False
    final = run.settle()
    assert final["done"] is True
    assert final["waiting_for"] == []
    assert final["vm"]["state"] == "done"
    assert final["vm"]["done_total"] == PAGES
    assert final["vm"]["pages"]["done"] == PAGES
    assert final["vm"]["pages"]["waiting_retry"] is False
    assert all(t["state"] == "done" for t in final["vm"]["pages"]["tasks"])


def test_retry_gives_a_fresh_set_of_retries(tmp_path: Path) -> None:
    # Page 2 fails attempts 1-5: 1-3 spend its retries; after the manual retry, 4 and 5
    # fail again and 6 succeeds, within the fresh set of max_retries.
    scenario = scenario_file(
        tmp_path, '[[failures]]\npoint = "page"\ntarget = 2\nfirst = 5\nerror = "page: nope"\n'
    )
    run = Run(scenario, yes=True)
    run.settle()
    assert states(run.last)[2] == "failed"
    run.send("retry", task_id=2)
    final = run.settle()
    assert final["vm"]["state"] == "done", final
    assert final["vm"]["done_total"] == PAGES
    task = final["vm"]["pages"]["tasks"][1]
    assert task["state"] == "done"
    assert task["retry_count"] == MAX_RETRIES


def test_skip_all_ends_with_the_pages_done_so_far() -> None:
    run = run_to_retry_gate()
    event = run.send("skip_all")
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["error"] == ""
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == PAGES - 2
    assert event["vm"]["pages"]["done"] == PAGES - 2
    assert states(event)[3] == "failed"
    assert states(event)[7] == "failed"
    assert run.session.done


def test_skip_all_after_one_retry() -> None:
    run = run_to_retry_gate()
    run.send("retry", task_id=7)
    run.settle()
    event = run.send("skip_all")
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == PAGES - 1


def test_skip_failed_ends_by_itself() -> None:
    run = Run("failing-pages", yes=True, skip_failed=True)
    final = run.finish(lambda e: pytest.fail(f"--skip-failed needs no command: {e}"))
    assert run.commands == 0
    assert final["done"] is True
    assert final["vm"]["state"] == "done"
    assert final["vm"]["done_total"] == PAGES - 2
    assert states(final)[3] == "failed"
    assert states(final)[7] == "failed"


@pytest.mark.parametrize("seed", [0, 6, 11])
def test_skip_failed_writes_no_gate_event(seed: int) -> None:
    """--skip-failed answers the gate inside the driver: no event offers retry or
    skip_all (a client reacting to waiting_for would send a command nobody takes), and
    none shows waiting_retry. The page event that would open the gate ends the run."""
    gated = Run("failing-pages", yes=True, seed=seed)
    gate = gated.settle()
    assert gate["waiting_for"] == RETRY_GATE
    skipping = Run("failing-pages", yes=True, seed=seed, skip_failed=True)
    final = skipping.settle()
    assert final["done"] is True
    for event in skipping.events:
        assert "retry" not in event["waiting_for"], event
        assert "skip_all" not in event["waiting_for"], event
        assert event["vm"]["pages"]["waiting_retry"] is False, event
    # Up to the gate the runs are the same, byte for byte and in time; the gate event
    # becomes the done event, at the same moment.
    assert skipping.raw[:-1] == gated.raw[:-1]
    assert skipping.times == gated.times
    expected = {
        **gate["vm"],
        "state": "done",
        "pages": {**gate["vm"]["pages"], "waiting_retry": False},
        "done_total": PAGES - 2,
    }
    assert final["vm"] == expected
    assert skipping.session.next_deadline() is None


def test_skip_failed_needs_no_undeclared_delay() -> None:
    """Every delay a chart uses is declared: the skip is no zero-second timer."""
    run = Run("failing-pages", yes=True, skip_failed=True)
    triggers: set[str] = set()
    while not run.session.done:
        triggers |= {t.trigger for t in run.session.pending()}
        deadline = run.session.next_deadline()
        assert deadline is not None, run.last
        run._take(run.session.advance(deadline, limit=1))  # one event at a time
    assert triggers <= {"_catalog_step", "_page_done", "_retry_due"}


def test_skip_failed_without_failures_changes_nothing() -> None:
    plain = Run("default", yes=True, seed=4)
    plain.finish()
    skipping = Run("default", yes=True, seed=4, skip_failed=True)
    skipping.finish()
    assert plain.raw == skipping.raw


def test_cancel_during_the_pages() -> None:
    run = Run("default", yes=True)
    before = run.until(lambda e: e["vm"]["pages"]["done"] >= 3)
    assert len(running(before)) > 0
    so_far = run.vm["pages"]["done"]
    event = run.send("cancel")
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == so_far
    assert event["vm"]["pages"]["done"] == so_far
    assert so_far < PAGES
    assert run.session.next_deadline() is None
    assert run.feed(cmd("cancel")) == []


@pytest.mark.parametrize("scenario", ["default", "flaky-pages", "failing-pages", "draft"])
def test_cancel_sets_unfinished_tasks_back_to_pending(scenario: str) -> None:
    """After a cancel nothing runs: a running page, or one waiting for its retry, is
    ``pending`` (not written, as a resume would find it); the others keep their state,
    and every task keeps its retry_count and error."""
    run = Run(scenario, yes=True, seed=3)
    before = run.until(
        lambda e: len(running(e)) == MAX_CONCURRENT and e["vm"]["pages"]["done"] >= 2
    )
    if scenario in ("flaky-pages", "failing-pages"):  # a page waiting for its retry too
        before = run.until(
            lambda e: (
                any(t["state"] == "retry_pending" for t in e["vm"]["pages"]["tasks"])
                and bool(running(e))
            )
        )
    event = run.send("cancel")
    assert event["done"] is True
    after = event["vm"]["pages"]["tasks"]
    assert len(after) == len(before["vm"]["pages"]["tasks"])
    for old, new in zip(before["vm"]["pages"]["tasks"], after, strict=True):
        if old["state"] in ("running", "retry_pending"):
            assert new == {**old, "state": "pending"}
        else:
            assert new == old
    assert running(event) == []
    assert event["vm"]["pages"]["done"] == before["vm"]["pages"]["done"]
    assert event["vm"]["catalog"] == before["vm"]["catalog"]


def test_cancel_during_a_resumed_draft_counts_the_resumed_pages() -> None:
    run = Run("draft", yes=True)
    run.until(lambda e: e["vm"]["pages"]["done"] >= 8)
    so_far = run.vm["pages"]["done"]
    event = run.send("cancel")
    assert event["vm"]["done_total"] == so_far
    assert so_far >= 8


def test_cancel_while_a_page_waits_for_its_retry() -> None:
    run = Run("failing-pages", yes=True)
    run.until(lambda e: any(t["state"] == "retry_pending" for t in e["vm"]["pages"]["tasks"]))
    so_far = run.vm["pages"]["done"]
    event = run.send("cancel")
    assert event["vm"]["state"] == "done"
    assert event["vm"]["done_total"] == so_far


# -- quit in every state ------------------------------------------------------------------


def stage_select_action() -> Run:
    return Run("default")


def stage_catalog() -> Run:
    run = Run("default", yes=True)
    run.until(lambda e: e["vm"]["catalog"]["tool_name"] != "")
    return run


def stage_catalog_error() -> Run:
    run = Run("catalog-error", yes=True)
    run.settle()
    assert run.last["waiting_for"] == CATALOG_GATE
    return run


def stage_pages() -> Run:
    run = Run("default", yes=True)
    run.until(lambda e: e["vm"]["pages"]["done"] >= 2)
    return run


def stage_resumed_pages() -> Run:
    run = Run("draft", yes=True)
    run.step()
    return run


def stage_retry_gate() -> Run:
    run = run_to_retry_gate()
    assert run.last["waiting_for"] == RETRY_GATE
    return run


def stage_after_retry() -> Run:
    run = run_to_retry_gate()
    run.send("retry", task_id=3)
    return run


def stage_after_rejection() -> Run:
    run = Run("empty")
    run.reject(cmd("select_action", action="browse"), "invalid params: ")
    return run


STAGES = {
    "select_action": stage_select_action,
    "catalog": stage_catalog,
    "catalog_error": stage_catalog_error,
    "pages": stage_pages,
    "resumed_pages": stage_resumed_pages,
    "retry_gate": stage_retry_gate,
    "after_retry": stage_after_retry,
    "after_rejection": stage_after_rejection,
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_quit_ends_with_the_vm_as_it_stood(stage: str) -> None:
    run = STAGES[stage]()
    assert not run.session.done
    previous = run.raw[-1]
    out = run.feed(cmd("quit"))
    assert len(out) == 1
    event, raw = out[0], run.raw[-1]
    assert list(event) == KEYS
    assert vm_raw(raw) == vm_raw(previous)
    assert event["done"] is True
    assert event["waiting_for"] == []
    assert event["error"] == ""
    assert run.session.done
    assert run.session.next_deadline() is None
    assert run.session.advance(run.session.now + 1000) == []
    assert run.feed(cmd("quit")) == []
    assert run.feed(cmd("cancel")) == []


def test_quit_with_unknown_params_is_still_quit() -> None:
    run = stage_pages()
    out = run.feed(b'{"type":"quit","params":{"now":true}}')
    assert out[0]["done"] is True


# -- rejected lines -----------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["select_action", "catalog", "pages", "retry_gate"])
def test_bad_json_is_rejected_without_a_change(stage: str) -> None:
    run = STAGES[stage]()
    deadline = run.session.next_deadline()
    assert run.reject(b"{not json", "invalid JSON: ")
    assert run.reject(b"[1,2]", "invalid JSON: ")
    assert run.reject(b"\xff\xfe", "invalid JSON: ")
    assert run.feed(b"   ") == []
    assert run.session.next_deadline() == deadline


# -- invariants over whole runs -----------------------------------------------------------

RUN_CASES = [
    (scenario, seed, {}) for scenario in GENERATE_SCENARIOS for seed in (0, 1, 2, 17, 2024)
] + [
    ("default", 3, {"yes": True}),
    ("draft", 3, {"yes": True}),
    ("draft", 4, {"draft_action": "clear"}),
    ("draft", 5, {"draft_action": "resume"}),
    ("failing-pages", 6, {"yes": True, "skip_failed": True}),
    ("flaky-pages", 7, {"yes": True, "skip_failed": True}),
    ("catalog-error", 8, {"yes": True}),
]


def check_invariants(run: Run, max_concurrent: int = MAX_CONCURRENT) -> None:
    max_retries = run.scenario.world.config.max_retries
    done_so_far = 0
    auto_retry = 0
    catalog_seen: list[tuple[int, str, str]] | None = None
    for index, (raw, event) in enumerate(zip(run.raw, run.events, strict=True)):
        last = index == len(run.events) - 1
        # The bytes: compact JSON, one line, keys in order, no floats.
        assert raw.endswith(b"\n") and raw.count(b"\n") == 1
        assert raw == json.dumps(event, separators=(",", ":")).encode() + b"\n"
        assert list(event) == KEYS
        assert isinstance(event["waiting_for"], list)
        assert event["error"] == ""
        assert not has_float(event)
        vm = event["vm"]
        assert list(vm) == VM_KEYS
        assert vm["state"] in ("select_action", "running", "done", "error")
        assert vm["max_retries"] == max_retries
        assert event["waiting_for"] == expected_waiting_for(vm), event
        assert event["done"] is last
        if last:
            assert event["waiting_for"] == []
        else:
            assert vm["state"] not in ("done", "error")
        catalog = vm["catalog"]
        assert catalog["status"] in CATALOG_STATES
        assert catalog["auto_retry"] >= auto_retry
        auto_retry = catalog["auto_retry"]
        pages = vm["pages"]
        tasks = pages["tasks"]
        assert pages["done"] >= done_so_far
        done_so_far = pages["done"]
        if tasks:
            assert catalog["status"] in ("done", "resumed")
            shape = [(t["id"], t["title"], t["slug"]) for t in tasks]
            if catalog_seen is None:
                catalog_seen = shape
            assert shape == catalog_seen
            assert [t["id"] for t in tasks] == list(range(1, len(tasks) + 1))
            assert pages["total"] == len(tasks)
        else:
            assert catalog_seen is None
            assert pages["total"] == 0
            assert pages["done"] == 0
        assert pages["done"] == sum(t["state"] in ("done", "resumed") for t in tasks)
        assert len(running(event)) <= max_concurrent
        for task in tasks:
            assert list(task) == TASK_KEYS
            assert task["state"] in TASK_STATES
            assert task["max_retries"] == max_retries
            assert 0 <= task["retry_count"] <= task["max_retries"]
            if task["state"] in ("failed", "retry_pending"):
                assert task["error"]
        settled = all(t["state"] in ("done", "resumed", "failed") for t in tasks)
        if pages["waiting_retry"]:
            assert settled and any(t["state"] == "failed" for t in tasks)
        if not last:
            assert vm["done_total"] == 0
    final = run.events[-1]["vm"]
    assert final["done_total"] == final["pages"]["done"]
    # Nothing after the done event.
    assert run.session.done
    assert run.session.next_deadline() is None
    assert run.session.advance(run.session.now + 10_000) == []
    assert run.session.feed(cmd("quit")) == []


@pytest.mark.parametrize(("scenario", "seed", "flags"), RUN_CASES)
def test_invariants_over_whole_runs(scenario: str, seed: int, flags: dict[str, Any]) -> None:
    run = Run(scenario, seed=seed, **flags)
    final = run.finish()
    check_invariants(run)
    assert final["vm"]["state"] == "done"
    if flags.get("skip_failed") and scenario == "failing-pages":
        assert final["vm"]["done_total"] == PAGES - 2
    else:
        assert final["vm"]["done_total"] == PAGES
        assert final["vm"]["pages"]["total"] == PAGES


@pytest.mark.parametrize(
    "stage", ["select_action", "catalog", "pages", "resumed_pages", "after_retry"]
)
def test_invariants_hold_up_to_a_cancel(stage: str) -> None:
    run = STAGES[stage]()
    assert "cancel" in run.last["waiting_for"]
    event = run.send("cancel")
    assert event["vm"]["state"] == "done"
    check_invariants(run)


# -- no final event shows work in progress -----------------------------------------------
#
# A client renders the last event it reads: a task or a catalog still ``running`` there
# is a spinner that never stops. Every way a run can end is walked here; only ``quit``
# shows the vm as it stood (FIDELITY section 2), and that is checked as such.

UNFINISHED = ("running", "retry_pending")


def check_settled(event: Event) -> None:
    """The final event of a run shows nothing still at work."""
    assert event["done"] is True and event["waiting_for"] == []
    vm = event["vm"]
    assert vm["state"] in ("done", "error"), vm
    assert vm["catalog"]["status"] != "running", vm["catalog"]
    assert vm["catalog"]["tool_name"] == "", vm["catalog"]
    assert [t for t in vm["pages"]["tasks"] if t["state"] in UNFINISHED] == []
    assert vm["pages"]["waiting_retry"] is False
    assert vm["done_total"] == vm["pages"]["done"]


def drive(run: Run) -> Iterator[None]:
    """Drive ``run`` to its end as a happy client would, pausing after every call."""
    while not run.session.done:
        yield
        if run.session.next_deadline() is None:
            run.feed(auto_answer(run.last))
        else:
            run.step()


WALKS: dict[str, Callable[[], Run]] = {
    "default": lambda: Run("default", seed=1),
    "yes": lambda: Run("default", yes=True, seed=2),
    "flaky-pages": lambda: Run("flaky-pages", yes=True, seed=3),
    "failing-pages": lambda: Run("failing-pages", yes=True, seed=4),
    "catalog-error": lambda: Run("catalog-error", yes=True, seed=5),
    "draft-resume": lambda: Run("draft", draft_action="resume", seed=6),
    "draft-gate": lambda: Run("draft", seed=7),
}


@pytest.mark.parametrize("walk", list(WALKS))
def test_a_run_driven_to_its_end_is_settled(walk: str) -> None:
    run = WALKS[walk]()
    for _ in drive(run):
        pass
    check_settled(run.last)
    assert run.last["vm"]["state"] == "done"


@pytest.mark.parametrize("walk", list(WALKS))
def test_a_cancel_at_any_moment_is_settled(walk: str) -> None:
    """Cancel at every moment a run offers it, from the first event to the last."""
    whole = WALKS[walk]()
    moments = sum(1 for _ in drive(whole))
    cancelled = 0
    for moment in range(moments):
        run = WALKS[walk]()
        walker = drive(run)
        for _ in range(moment + 1):
            next(walker)
        if "cancel" not in run.last["waiting_for"]:
            continue
        before = run.last
        event = run.send("cancel")
        check_settled(event)
        assert event["vm"]["state"] == "done"
        assert event["vm"]["pages"]["done"] == before["vm"]["pages"]["done"]
        cancelled += 1
    assert cancelled >= 3


def end_at_the_retry_gate(answer: str, **flags: Any) -> Run:
    run = Run("failing-pages", yes=True, **flags)
    gate = run.settle()
    assert gate["waiting_for"] == RETRY_GATE
    if answer == "retry-then-skip":
        run.send("retry", task_id=3)
        run.settle()
    run.send("skip_all")
    return run


def end_with_skip_failed() -> Run:
    run = Run("failing-pages", yes=True, skip_failed=True)
    run.settle()
    return run


def end_in_error(tmp_path: Path, text: str, **flags: Any) -> Run:
    run = Run(scenario_file(tmp_path, text), **flags)
    run.settle()
    assert run.last["vm"]["state"] == "error"
    return run


def end_at_select_action(line: bytes, scenario: str = "default") -> Run:
    run = Run(scenario)
    run.feed(line)
    return run


ENDINGS: dict[str, Callable[[Path], Run]] = {
    "skip_all": lambda _: end_at_the_retry_gate("skip"),
    "retry-then-skip_all": lambda _: end_at_the_retry_gate("retry-then-skip"),
    "skip-failed": lambda _: end_with_skip_failed(),
    "not-logged-in": lambda tmp: end_in_error(
        tmp, "[world.account]\nlogged_in = false\n", yes=True
    ),
    "broken-repository": lambda tmp: end_in_error(
        tmp, '[[failures]]\npoint = "repository"\n', yes=True
    ),
    "draft-is-a-version": lambda tmp: end_in_error(
        tmp,
        'extends = "draft"\n[world.draft]\nid = "2025-01-01-000000"\n\n'
        '[[world.wikis]]\nid = "2025-01-01-000000"\n',
        draft_action="resume",
    ),
    "select-cancel": lambda _: end_at_select_action(cmd("cancel")),
    "select-browse": lambda _: end_at_select_action(cmd("select_action", action="browse")),
    "select-action-cancel": lambda _: end_at_select_action(
        cmd("select_action", action="cancel"), "draft"
    ),
    "draft-cancel": lambda _: Run("draft", draft_action="cancel"),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_other_ending_is_settled(ending: str, tmp_path: Path) -> None:
    run = ENDINGS[ending](tmp_path)
    assert run.session.done, run.last
    check_settled(run.last)


@pytest.mark.parametrize("walk", list(WALKS))
def test_a_quit_shows_the_vm_as_it_stood(walk: str) -> None:
    """The exception, by FIDELITY section 2: quit's final event repeats the vm of the
    event before it, byte for byte, running tasks included (a client that quits knows
    why the work stopped)."""
    whole = WALKS[walk]()
    moments = sum(1 for _ in drive(whole))
    for moment in range(0, moments, 3):
        run = WALKS[walk]()
        walker = drive(run)
        for _ in range(moment + 1):
            next(walker)
        previous = run.raw[-1]
        event = run.send("quit")
        assert event["done"] is True and event["waiting_for"] == []
        assert vm_raw(run.raw[-1]) == vm_raw(previous)


# -- determinism --------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["default", "flaky-pages", "failing-pages", "draft"])
def test_same_seed_same_bytes(scenario: str) -> None:
    first = Run(scenario, seed=11)
    first.finish()
    second = Run(scenario, seed=11)
    second.finish()
    assert first.raw == second.raw
    assert first.times == second.times


def test_different_seeds_differ() -> None:
    runs = []
    for seed in range(4):
        run = Run("default", seed=seed, yes=True)
        run.finish()
        runs.append(run)
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            assert (a.raw, a.times) != (b.raw, b.times)
    catalogs = {tuple(t["title"] for t in r.last["vm"]["pages"]["tasks"]) for r in runs}
    assert len(catalogs) > 1
    assert len({r.session.now for r in runs}) == len(runs)


def test_flaky_failures_depend_on_the_seed() -> None:
    patterns = set()
    for seed in range(6):
        run = Run("flaky-pages", seed=seed, yes=True)
        final = run.finish()
        patterns.add(tuple(t["retry_count"] for t in final["vm"]["pages"]["tasks"]))
    assert len(patterns) > 1


# -- timing (virtual time at speed 1) -----------------------------------------------------


def catalog_window(run: Run) -> tuple[float, float]:
    start = next(
        i
        for i, e in enumerate(run.events)
        if e["vm"]["state"] == "running" and e["vm"]["catalog"]["status"] == "running"
    )
    end = next(i for i, e in enumerate(run.events) if e["vm"]["catalog"]["status"] == "done")
    return run.times[start], run.times[end]


def page_durations(run: Run) -> list[float]:
    """From the event where a page turns running to the event where it turns done."""
    started: dict[int, float] = {}
    previous: dict[int, str] = {}
    durations = []
    for event, at in zip(run.events, run.times, strict=True):
        for task in event["vm"]["pages"]["tasks"]:
            before = previous.get(task["id"])
            if task["state"] == "running" and before != "running":
                started[task["id"]] = at
            if task["state"] == "done" and before != "done":
                durations.append(at - started.pop(task["id"]))
            previous[task["id"]] = task["state"]
    return durations


@pytest.mark.parametrize("seed", range(10))
def test_default_generate_timing(seed: int) -> None:
    run = Run("default", seed=seed, yes=True)
    final = run.finish()
    assert final["done"]
    assert 5.0 <= run.session.now <= 15.0, run.session.now
    assert run.times[-1] == run.session.now
    start, end = catalog_window(run)
    assert start == 0.0
    assert 1.0 <= end - start <= 2.0, end - start
    durations = page_durations(run)
    assert len(durations) == PAGES
    assert all(0.3 <= d <= 1.5 for d in durations), durations
    assert run.times == sorted(run.times)


def test_catalog_starts_when_the_client_answers() -> None:
    run = Run("default", seed=2)
    run.session.advance(3.0)  # the client thinks for 3 s at the gate
    run.send("select_action", action="generate")
    run.finish()
    start, end = catalog_window(run)
    assert start == 3.0
    assert 1.0 <= end - start <= 2.0


def test_page_durations_with_retries() -> None:
    for seed in range(3):
        run = Run("flaky-pages", seed=seed, yes=True)
        run.finish()
        durations = page_durations(run)
        assert len(durations) == PAGES
        assert all(0.3 <= d <= 1.5 for d in durations), durations


def test_speed_scales_virtual_time() -> None:
    normal = Run("default", seed=3, yes=True)
    normal.finish()
    fast = Run("default", seed=3, yes=True, speed=0.5)
    fast.finish()
    assert fast.raw == normal.raw
    assert fast.session.now == pytest.approx(normal.session.now / 2)
    # Speed 0: no delay at all (the order of simultaneous timers may differ).
    instant = Run("default", seed=3, yes=True, speed=0)
    final = instant.finish()
    assert instant.session.now == 0.0
    assert set(instant.times) == {0.0}
    assert final["vm"]["done_total"] == PAGES
    check_invariants(instant)


# -- the world's config, project and repository -------------------------------------------


def test_config_sets_max_concurrent_and_max_retries(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path, 'extends = "default"\n\n[world.config]\nmax_concurrent = 2\nmax_retries = 0\n'
    )
    run = Run(scenario, yes=True)
    final = run.finish()
    assert run.events[0]["vm"]["max_retries"] == 0
    assert all(t["max_retries"] == 0 for e in run.events for t in e["vm"]["pages"]["tasks"])
    counts = [len(running(e)) for e in run.events if in_pages(e)]
    assert max(counts) == 2
    check_invariants(run, max_concurrent=2)
    assert final["vm"]["done_total"] == PAGES


def test_max_retries_zero_fails_at_the_first_failed_attempt(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path,
        "[world.config]\nmax_retries = 0\n\n"
        '[[failures]]\npoint = "page"\ntarget = 5\nfirst = 1\nerror = "page: once"\n',
    )
    run = Run(scenario, yes=True)
    gate = run.settle()
    assert gate["waiting_for"] == RETRY_GATE
    task = gate["vm"]["pages"]["tasks"][4]
    assert task == {
        "id": 5,
        "title": task["title"],
        "slug": task["slug"],
        "state": "failed",
        "retry_count": 0,
        "max_retries": 0,
        "error": "page: once",
    }
    assert all(t["state"] != "retry_pending" for e in run.events for t in e["vm"]["pages"]["tasks"])
    run.send("retry", task_id=5)
    assert run.finish()["vm"]["done_total"] == PAGES


def test_max_concurrent_one_runs_pages_one_by_one(tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, "[world.config]\nmax_concurrent = 1\n")
    run = Run(scenario, yes=True)
    run.finish()
    assert max(len(running(e)) for e in run.events) == 1
    check_invariants(run, max_concurrent=1)


def test_max_concurrent_above_the_page_count(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path, "[world.config]\nmax_concurrent = 64\n\n[world.project]\npages = 5\n"
    )
    run = Run(scenario, yes=True)
    first = run.until(in_pages)
    assert running(first) == [1, 2, 3, 4, 5]
    final = run.finish()
    assert final["vm"]["done_total"] == 5


def test_project_sets_the_catalog(tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, '[world.project]\nname = "foo/bar"\npages = 40\n')
    run = Run(scenario, seed=3, yes=True)
    final = run.finish()
    expected = wiki.catalog(3, "foo/bar", 40)
    tasks = final["vm"]["pages"]["tasks"]
    assert [(t["id"], t["title"], t["slug"]) for t in tasks] == [
        (p.id, p.title, p.slug) for p in expected
    ]
    assert final["vm"]["done_total"] == 40
    check_invariants(run)


def test_draft_total_follows_the_project(tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, "[world.project]\npages = 9\n\n[world.draft]\ndone = 4\n")
    run = Run(scenario)
    gate = run.vm["select_action"]
    assert (gate["draft_done"], gate["draft_total"]) == (4, 9)
    run.send("select_action", action="resume")
    final = run.finish()
    assert [t["state"] for t in final["vm"]["pages"]["tasks"]][:4] == ["resumed"] * 4
    assert final["vm"]["done_total"] == 9


def test_broken_repository_ends_in_error(tmp_path: Path) -> None:
    scenario = scenario_file(
        tmp_path, '[[failures]]\npoint = "repository"\nerror = "open repository: no .git here"\n'
    )
    run = Run(scenario, yes=True)
    final = run.settle()
    assert final["done"] is True
    assert final["waiting_for"] == []
    assert final["vm"]["state"] == "error"
    assert final["vm"]["error"] == "open repository: no .git here"
    assert final["vm"]["pages"]["tasks"] == []
    check_invariants(run)


# -- the delays a run needs ----------------------------------------------------------------


def test_the_chart_gives_every_delay_a_run_draws_a_default() -> None:
    assert set(load_chart("generate").timing) == {"catalog_step", "page", "page_retry"}


def test_a_scenario_without_a_delay_runs_on_the_charts_default(tmp_path: Path) -> None:
    """A scenario that stands alone (``extends = ""``) and names only some delays: the
    others are the chart's defaults, the named one its own."""
    alone = scenario_file(tmp_path, 'extends = ""\n[timing]\npage = { fixed = 7.0 }\n')
    assert set(alone.timing) == {"page"}
    chart = load_chart("generate")
    scenario = msgspec.structs.replace(alone, timing={"page": alone.timing["page"]})
    session = Session(chart, scenario, flags=Flags(yes=True), seed=2)
    session.start()
    deadlines = []
    while not session.done and len(deadlines) < 400:
        deadline = session.next_deadline()
        assert deadline is not None
        deadlines.append(deadline)
        session.advance(deadline)
    low, high = chart.timing["catalog_step"].uniform or (0.0, 0.0)
    assert low <= deadlines[0] <= high  # the catalog's first step: the chart's default
    gaps = {round(b - a, 9) for a, b in itertools.combinations(deadlines, 2)}
    assert 7.0 in gaps  # one round of pages to the next: the scenario's own page delay


# -- the task list re-encodes only what changed --------------------------------------------


@pytest.mark.parametrize("pages", [16, 150])
@pytest.mark.parametrize("scenario", ["default", "flaky-pages", "failing-pages", "draft"])
def test_every_event_shows_the_tasks_as_they_are(scenario: str, pages: int) -> None:
    """The tasks in each event's bytes equal a fresh encoding of the tasks at that moment:
    no change of a task escapes ``TaskList.edit``."""
    import msgspec

    from simulator.tools.client import ReferenceClient

    loaded = load_scenario(scenario)
    world = msgspec.structs.replace(
        loaded.world, project=msgspec.structs.replace(loaded.world.project, pages=pages)
    )
    session = Session(
        load_chart("generate"),
        msgspec.structs.replace(loaded, world=world),
        flags=Flags(yes=True),
        seed=3,
        speed=1,
    )
    client = ReferenceClient()
    lines = session.start()
    checked = 0
    while True:
        for line in lines:
            tasks = session.driver.vm.pages.tasks
            event = json.loads(line)
            fresh = msgspec.json.encode(list(tasks)).decode()
            assert event["vm"]["pages"]["tasks"] == json.loads(fresh)
            checked += 1
            answer = client.answer(event)
            if answer is not None and not session.done:
                lines = session.feed(answer.rstrip(b"\n"))
                break
        else:
            deadline = session.next_deadline()
            if session.done or deadline is None:
                break
            lines = session.advance(deadline, limit=1)
    assert session.done
    assert checked > 5


@pytest.mark.parametrize("count", [3, 40])
def test_the_task_list_bytes_equal_a_fresh_encoding_after_any_edits(count: int) -> None:
    """Whatever tasks change between two encodings, and however their lengths change,
    the list's JSON is byte for byte the Go-escaped encoding of the tasks as they are."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from simulator.core.eventbytes import encode_part
    from statecharts.generate import Task, TaskList

    states = ["pending", "running", "done", "retry_pending", "failed", "resumed"]
    edit = st.tuples(
        st.integers(1, count), st.sampled_from(states), st.integers(0, 12), st.text(max_size=8)
    )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.lists(edit, max_size=5), min_size=1, max_size=6))
    def check(rounds: list[list[tuple[int, Any, int, str]]]) -> None:
        tasks = TaskList(
            [
                Task(i, f"<Page> & {i}\u2028", f"{i}-page", max_retries=2)
                for i in range(1, count + 1)
            ]
        )
        assert tasks.json_fragment() == encode_part(list(tasks))
        for edits in rounds:
            for task_id, state, retries, error in edits:
                task = tasks.task(task_id)
                task.state, task.retry_count, task.error = state, retries, error
            assert tasks.json_fragment() == encode_part(list(tasks))

    check()
