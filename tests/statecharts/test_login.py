"""Tests for statecharts.login, in process and in virtual time.

select_region → init_flow → open_browser → waiting → select_model → saving → done, or
error. Only select_region and select_model are gates; the other states end on their
own timers, so a test sees each of them by moving virtual time one event at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from simulator.virtual import SimSession, start
from statecharts import load_chart

GATES = {
    "select_region": ["select_region", "quit"],
    "init_flow": [],
    "open_browser": [],
    "waiting": [],
    "select_model": ["select_model", "quit"],
    "saving": [],
}
TERMINAL = ("done", "error")
FLOW = ["select_region", "init_flow", "open_browser", "waiting", "select_model", "saving", "done"]
VM_KEYS = [
    "state",
    "authorize_url",
    "auth_timeout",
    "browser_warn",
    "username",
    "avail_models",
    "selected_model",
    "error",
    "wants_llm_provider_editor",
]
PRESENT_IN = {
    "authorize_url": {"open_browser", "waiting"},
    "auth_timeout": {"waiting"},
    "avail_models": {"select_model"},
    "username": {"done"},
}
MODELS = ["glm-4.6", "glm-4.5-air"]
USERNAME = "octocat"
AUTHORIZE = "https://zread.ai/oauth/authorize"
REDIRECT = "http://127.0.0.1:53682/callback"
DEFAULT_TIMEOUT_NS = 300 * 10**9
DELAYS = {  # the default scenario's [timing], seconds
    "init_flow": (0.2, 0.4),
    "open_browser": (0.2, 0.3),
    "waiting": (1.0, 2.0),
    "saving": (0.2, 0.4),
}
NO_BROWSER = "could not open a browser; open the URL above to log in"
EPS = 1e-9

Starter = Callable[..., SimSession]


@pytest.fixture
def run() -> Iterator[Starter]:
    """Start ``zread login --stdio`` sessions in virtual time; closed at the end."""
    opened: list[SimSession] = []

    def _start(*args: str, **kwargs: Any) -> SimSession:
        sim = start("login", *args, **kwargs)
        opened.append(sim)
        return sim

    yield _start
    for sim in opened:
        sim.close()


def vm(state: str, **fields: Any) -> dict[str, Any]:
    """The login vm in ``state``: conditional keys only where they are present."""
    values = {
        "state": state,
        "browser_warn": "",
        "selected_model": "",
        "error": "",
        "wants_llm_provider_editor": False,
        **fields,
    }
    return {key: values[key] for key in VM_KEYS if key in values}


def event(state: str, **fields: Any) -> dict[str, Any]:
    terminal = state in TERMINAL
    return {
        "vm": vm(state, **fields),
        "waiting_for": [] if terminal else GATES[state],
        "done": terminal,
        "error": "",
    }


def check_presence(ev: dict[str, Any]) -> None:
    state = ev["vm"]["state"]
    expected = [k for k in VM_KEYS if k not in PRESENT_IN or state in PRESENT_IN[k]]
    assert list(ev["vm"]) == expected, (state, list(ev["vm"]))


def check_url(url: str, region: str) -> None:
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == AUTHORIZE
    query = parse_qs(parts.query, strict_parsing=True)
    nonce = query.pop("state")
    assert len(nonce) == 1 and re.fullmatch(r"[0-9a-f]{16}", nonce[0])
    assert query == {
        "client_id": ["zread-cli"],
        "region": [region],
        "response_type": ["code"],
        "redirect_uri": [REDIRECT],
    }


def out_lines(sim: SimSession) -> list[bytes]:
    return [line.data for line in sim.transcript if line.direction == "out"]


def vm_and_gate(line: bytes) -> bytes:
    return line[: line.index(b',"done":')]


def vm_bytes(line: bytes) -> bytes:
    return line[: line.index(b',"waiting_for":')]


def scenario_file(tmp_path: Path, text: str, name: str = "custom") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text('extends = "default"\n' + text, encoding="utf-8")
    return str(path)


def pending_triggers(sim: SimSession) -> list[str]:
    return [timer.trigger for timer in sim.session.pending()]


def drive_to(sim: SimSession, state: str, *, region: str = "cn", model: str = "glm-4.6") -> None:
    """From the first event to the first event showing ``state``."""
    if state == "select_region":
        return
    sim.send("select_region", region=region)
    if state in ("init_flow", "open_browser", "waiting", "select_model"):
        sim.wait_state(state)
        return
    sim.wait_state("select_model")
    sim.send("select_model", model=model)
    assert sim.vm["state"] == state


# -- the chart ---------------------------------------------------------------------------


def test_chart_states_and_gates() -> None:
    chart = load_chart("login")
    shown = {name: spec for name, spec in chart.states.items() if name != chart.initial}
    assert set(shown) == set(GATES) | set(TERMINAL)
    for name, spec in shown.items():
        assert spec.vm_state == name
        assert spec.terminal is (name in TERMINAL)
        assert list(spec.waiting_for) == GATES.get(name, [])
        # A state with an empty gate must end by itself: it has a timer; a gate has none.
        has_timer = bool(spec.timers)
        assert has_timer is (not spec.terminal and not spec.waiting_for), name
    assert set(chart.commands) == {"select_region", "select_model"}


# -- the default flow --------------------------------------------------------------------


@pytest.mark.parametrize("chosen", MODELS)
def test_default_flow_every_state_in_order(run: Starter, chosen: str) -> None:
    sim = run()
    assert sim.events == [event("select_region")]
    assert sim.session.pending() == []
    assert sim.advance(60.0) == []  # a gate: nothing happens until the client answers
    t0 = sim.now

    assert sim.send("select_region", region="cn") == [event("init_flow")]
    assert sim.now == t0
    assert len(sim.session.pending()) == 1

    opened = sim.wait_state("open_browser")
    url = opened["vm"]["authorize_url"]
    check_url(url, "cn")
    assert opened == event("open_browser", authorize_url=url)
    low, high = DELAYS["init_flow"]
    assert low - EPS <= sim.now - t0 <= high + EPS
    t1 = sim.now

    waiting = sim.wait_state("waiting")
    assert waiting == event("waiting", authorize_url=url, auth_timeout=DEFAULT_TIMEOUT_NS)
    assert type(waiting["vm"]["auth_timeout"]) is int
    low, high = DELAYS["open_browser"]
    assert low - EPS <= sim.now - t1 <= high + EPS
    assert len(sim.session.pending()) == 2  # the approval and the timeout
    t2 = sim.now

    select = sim.wait_state("select_model")
    assert select == event("select_model", avail_models=MODELS)
    low, high = DELAYS["waiting"]
    assert low - EPS <= sim.now - t2 <= high + EPS
    assert sim.session.pending() == []  # the timeout went with the waiting state
    t3 = sim.now

    assert sim.send("select_model", model=chosen) == [event("saving", selected_model=chosen)]
    assert sim.now == t3

    done = sim.wait_done()
    assert done == event("done", username=USERNAME, selected_model=chosen)
    low, high = DELAYS["saving"]
    assert low - EPS <= sim.now - t3 <= high + EPS

    assert [e["vm"]["state"] for e in sim.events] == FLOW
    for ev in sim.events:
        check_presence(ev)
    assert sim.violations == []
    assert sim.session.pending() == []


def test_the_authorize_url_is_go_escaped_on_the_wire(run: Starter) -> None:
    sim = run()
    sim.send("select_region", region="eu <&> west", extra=[1])
    opened = sim.wait_state("open_browser")
    check_url(opened["vm"]["authorize_url"], "eu <&> west")
    raw = out_lines(sim)[-1]
    assert b"\\u0026" in raw
    assert b"&" not in raw and b"<" not in raw and b">" not in raw


def test_speed_zero_runs_every_timer_at_once(run: Starter) -> None:
    sim = run(speed=0)
    sim.send("select_region", region="cn")
    sim.wait_state("select_model")
    sim.send("select_model", model="glm-4.6")
    sim.wait_done()
    assert sim.now == 0.0
    assert [e["vm"]["state"] for e in sim.events] == FLOW


# -- select_region -----------------------------------------------------------------------


def test_use_own_key_region_ends_for_the_llm_editor(run: Starter) -> None:
    sim = run()
    answer = sim.send("select_region", region="__use_own_key__")
    assert answer == [event("done", username=USERNAME, wants_llm_provider_editor=True)]
    assert sim.done is True
    assert sim.session.pending() == []
    assert len(sim.events) == 2


def test_custom_flag_ends_at_once_for_the_llm_editor(run: Starter) -> None:
    sim = run("--custom")
    assert sim.events == [event("done", username=USERNAME, wants_llm_provider_editor=True)]
    assert sim.done is True
    assert sim.session.pending() == []
    assert sim.send("select_region", region="cn") == []
    assert sim.violations[-1].after_done is True


NOBODY = "[world.account]\nlogged_in = false\n"


@pytest.mark.parametrize("how", ["--custom", "__use_own_key__"])
def test_own_key_with_nobody_logged_in_shows_no_username(
    run: Starter, tmp_path: Path, how: str
) -> None:
    """Bringing one's own key logs nobody in: the done event names no user. username is
    present (it is documented for the done state) and empty, Go's zero value."""
    sim = run(*([how] if how == "--custom" else []), scenario=scenario_file(tmp_path, NOBODY))
    if how != "--custom":
        sim.send("select_region", region=how)
    assert sim.last == event("done", username="", wants_llm_provider_editor=True)
    assert b'"username":"",' in out_lines(sim)[-1]


@pytest.mark.parametrize("how", ["--custom", "__use_own_key__"])
def test_own_key_with_someone_logged_in_names_them(run: Starter, tmp_path: Path, how: str) -> None:
    scenario = scenario_file(tmp_path, '[world.account]\nusername = "alice"\n')
    sim = run(*([how] if how == "--custom" else []), scenario=scenario)
    if how != "--custom":
        sim.send("select_region", region=how)
    assert sim.last == event("done", username="alice", wants_llm_provider_editor=True)


def test_the_login_flow_names_who_logged_in_even_when_nobody_was(
    run: Starter, tmp_path: Path
) -> None:
    sim = run(scenario=scenario_file(tmp_path, NOBODY))
    drive_to(sim, "saving")
    assert sim.wait_done() == event("done", username=USERNAME, selected_model="glm-4.6")


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            b'{"type":"select_region","params":{"region":""}}',
            "invalid params: region must not be empty",
        ),
        # Go's decoder: a left-out or null region is "", and Region is region.
        (b'{"type":"select_region","params":{}}', "invalid params: region must not be empty"),
        (b'{"type":"select_region"}', "invalid params: region must not be empty"),
        (
            b'{"type":"select_region","params":{"Region":""}}',
            "invalid params: region must not be empty",
        ),
        (
            b'{"type":"select_region","params":{"region":5}}',
            "invalid params: expected `str`, got `int` - at `$.region`",
        ),
        (
            b'{"type":"select_region","params":{"region":null}}',
            "invalid params: region must not be empty",
        ),
        (
            b'{"type":"select_region","params":{"REGION":5}}',
            "invalid params: expected `str`, got `int` - at `$.region`",
        ),
        (
            b'{"type":"select_region","params":{"region":["cn"]}}',
            "invalid params: expected `str`, got `array` - at `$.region`",
        ),
        (
            b'{"type":"select_region","params":{"region":true}}',
            "invalid params: expected `str`, got `bool` - at `$.region`",
        ),
        (
            b'{"type":"select_region","params":"cn"}',
            "invalid params: expected `object`, got `str`",
        ),
    ],
)
def test_bad_region_params_are_invalid_params(run: Starter, line: bytes, error: str) -> None:
    sim = run()
    answer = sim.send_line(line)
    assert answer == [{**event("select_region"), "error": error}]
    assert vm_and_gate(out_lines(sim)[-1]) == vm_and_gate(out_lines(sim)[0])
    assert [(v.line, v.error, v.state) for v in sim.violations] == [(line, error, "select_region")]
    assert sim.session.state == "select_region"
    # Nothing changed: a good region still starts the flow.
    assert sim.send("select_region", region="cn") == [event("init_flow")]


def test_scenario_regions_restrict_the_keys(run: Starter, tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, '[world.login]\nregions = ["cn", "global"]\n')
    sim = run(scenario=scenario)
    error = "invalid params: unknown region 'eu' (one of cn, global)"
    assert sim.send("select_region", region="eu") == [{**event("select_region"), "error": error}]
    assert sim.send("select_region", region="global") == [event("init_flow")]
    check_url(sim.wait_state("open_browser")["vm"]["authorize_url"], "global")

    other = run(scenario=scenario)
    other.send("select_region", region="__use_own_key__")
    assert other.last == event("done", username=USERNAME, wants_llm_provider_editor=True)


def test_browser_that_cannot_open_sets_browser_warn(run: Starter, tmp_path: Path) -> None:
    sim = run(scenario=scenario_file(tmp_path, "[world]\nbrowser_opens = false\n"))
    sim.send("select_region", region="cn")
    assert sim.vm["browser_warn"] == ""
    url = sim.wait_state("open_browser")["vm"]["authorize_url"]
    assert sim.last == event("open_browser", authorize_url=url, browser_warn=NO_BROWSER)
    waiting = sim.wait_state("waiting")
    assert waiting == event(
        "waiting", authorize_url=url, auth_timeout=DEFAULT_TIMEOUT_NS, browser_warn=NO_BROWSER
    )


# -- select_model ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            b'{"type":"select_model","params":{"model":"gpt-5"}}',
            "invalid params: unknown model 'gpt-5' (one of glm-4.6, glm-4.5-air)",
        ),
        (
            b'{"type":"select_model","params":{"model":""}}',
            "invalid params: unknown model '' (one of glm-4.6, glm-4.5-air)",
        ),
        (
            b'{"type":"select_model","params":{"model":"GLM-4.6"}}',
            "invalid params: unknown model 'GLM-4.6' (one of glm-4.6, glm-4.5-air)",
        ),
        (
            b'{"type":"select_model","params":{"model":46}}',
            "invalid params: expected `str`, got `int` - at `$.model`",
        ),
        (
            b'{"type":"select_model"}',
            "invalid params: unknown model '' (one of glm-4.6, glm-4.5-air)",
        ),
        (
            b'{"type":"select_model","params":["glm-4.6"]}',
            "invalid params: expected `object`, got `array`",
        ),
    ],
)
def test_bad_model_is_invalid_params(run: Starter, line: bytes, error: str) -> None:
    sim = run()
    drive_to(sim, "select_model")
    answer = sim.send_line(line)
    assert answer == [{**event("select_model", avail_models=MODELS), "error": error}]
    assert vm_and_gate(out_lines(sim)[-1]) == vm_and_gate(out_lines(sim)[-2])
    assert [(v.error, v.state) for v in sim.violations] == [(error, "select_model")]
    assert sim.send("select_model", model="glm-4.5-air") == [
        event("saving", selected_model="glm-4.5-air")
    ]


def test_scenario_models_are_offered(run: Starter, tmp_path: Path) -> None:
    sim = run(scenario=scenario_file(tmp_path, '[world.login]\nmodels = ["m-1"]\n'))
    drive_to(sim, "select_model")
    assert sim.last == event("select_model", avail_models=["m-1"])
    error = "invalid params: unknown model 'glm-4.6' (one of m-1)"
    assert sim.send("select_model", model="glm-4.6")[0]["error"] == error
    sim.send("select_model", model="m-1")
    assert sim.wait_done() == event("done", username=USERNAME, selected_model="m-1")


def test_scenario_username_is_shown_when_done(run: Starter, tmp_path: Path) -> None:
    sim = run(scenario=scenario_file(tmp_path, '[world.account]\nusername = "alice"\n'))
    drive_to(sim, "saving")
    assert sim.wait_done() == event("done", username="alice", selected_model="glm-4.6")


# -- auth_timeout and failures -----------------------------------------------------------


@pytest.mark.parametrize("speed", [1.0, 2.0])
def test_auth_timeout_running_out_ends_in_error(run: Starter, speed: float) -> None:
    sim = run(scenario="login-timeout", speed=speed)
    sim.send("select_region", region="cn")
    waiting = sim.wait_state("waiting")
    # The vm shows the world's timeout, unscaled; the timer is scaled by the speed.
    assert waiting["vm"]["auth_timeout"] == 3 * 10**9
    t = sim.now
    done = sim.wait_done()
    assert done == event("error", error="authorization timed out")
    assert sim.now - t == pytest.approx(3.0 * speed, abs=EPS)
    assert [e["vm"]["state"] for e in sim.events] == [
        "select_region",
        "init_flow",
        "open_browser",
        "waiting",
        "error",
    ]
    for ev in sim.events:
        check_presence(ev)


def test_auth_timeout_before_the_approval_wins(run: Starter, tmp_path: Path) -> None:
    text = "[world.login]\nauth_timeout = 0.5\n[timing]\nauthorize = { fixed = 2.0 }\n"
    sim = run(scenario=scenario_file(tmp_path, text))
    drive_to(sim, "waiting")
    assert sim.vm["auth_timeout"] == 500_000_000
    t = sim.now
    assert sim.wait_done() == event("error", error="authorization timed out")
    assert sim.now - t == pytest.approx(0.5, abs=EPS)


def test_approval_before_the_timeout_cancels_it(run: Starter, tmp_path: Path) -> None:
    text = "[world.login]\nauth_timeout = 2.5\n[timing]\nauthorize = { fixed = 2.0 }\n"
    sim = run(scenario=scenario_file(tmp_path, text))
    drive_to(sim, "waiting")
    t = sim.now
    assert sim.wait_state("select_model") == event("select_model", avail_models=MODELS)
    assert sim.now - t == pytest.approx(2.0, abs=EPS)
    assert sim.session.pending() == []
    assert sim.advance(10.0) == []


@pytest.mark.parametrize(
    ("failure", "target", "states", "message"),
    [
        (
            'point = "init_flow"',
            "init_flow",
            ["select_region", "init_flow", "error"],
            "start login flow: service unavailable",
        ),
        (
            'point = "authorization"',
            "waiting",
            ["select_region", "init_flow", "open_browser", "waiting", "error"],
            "authorization denied",
        ),
        (
            'point = "save"',
            "saving",
            FLOW[:-1] + ["error"],
            "save credentials: permission denied",
        ),
    ],
    ids=["init_flow", "authorization", "save"],
)
@pytest.mark.parametrize("custom_text", [False, True], ids=["default-text", "own-text"])
def test_failures_end_in_the_error_state(
    run: Starter,
    tmp_path: Path,
    failure: str,
    target: str,
    states: list[str],
    message: str,
    custom_text: bool,
) -> None:
    if custom_text:
        message = "boom: " + target
        failure += f'\nerror = "{message}"'
    sim = run(scenario=scenario_file(tmp_path, f"[[failures]]\n{failure}\n"))
    drive_to(sim, target)
    selected = {"selected_model": "glm-4.6"} if target == "saving" else {}
    assert sim.wait_done() == event("error", error=message, **selected)
    assert [e["vm"]["state"] for e in sim.events] == states
    for ev in sim.events:
        check_presence(ev)
    assert sim.session.pending() == []


# -- every ending ------------------------------------------------------------------------
#
# The final event shows how the login ended, and nothing of a flow still going: no
# authorize_url, auth_timeout or avail_models; a username only in done, and only of
# someone logged in.


def own_key(sim: SimSession) -> None:
    sim.send("select_region", region="__use_own_key__")


def whole_flow(sim: SimSession) -> None:
    drive_to(sim, "saving")


def to(state: str) -> Callable[[SimSession], None]:
    return lambda sim: drive_to(sim, state)


LOGIN_ENDINGS: dict[str, tuple[tuple[str, ...], str, Callable[[SimSession], None], str, str]] = {
    # name: (flags, scenario text, how to drive it, final state, username shown)
    "flow": ((), "", whole_flow, "done", USERNAME),
    "flow-nobody": ((), NOBODY, whole_flow, "done", USERNAME),
    "custom": (("--custom",), "", lambda sim: None, "done", USERNAME),
    "custom-nobody": (("--custom",), NOBODY, lambda sim: None, "done", ""),
    "own-key": ((), "", own_key, "done", USERNAME),
    "own-key-nobody": ((), NOBODY, own_key, "done", ""),
    "init-flow-fails": ((), '[[failures]]\npoint = "init_flow"\n', to("init_flow"), "error", ""),
    "denied": ((), '[[failures]]\npoint = "authorization"\n', to("waiting"), "error", ""),
    "timed-out": (
        (),
        '[[failures]]\npoint = "authorization"\ntimeout = true\n\n'
        "[world.login]\nauth_timeout = 1.0\n",
        to("waiting"),
        "error",
        "",
    ),
    "save-fails": ((), '[[failures]]\npoint = "save"\n', to("saving"), "error", ""),
}


@pytest.mark.parametrize("ending", list(LOGIN_ENDINGS))
def test_every_ending_shows_how_it_ended(run: Starter, tmp_path: Path, ending: str) -> None:
    flags, text, drive, final_state, username = LOGIN_ENDINGS[ending]
    sim = run(*flags, scenario=scenario_file(tmp_path, text))
    drive(sim)
    last = sim.last if sim.done else sim.wait_done()
    assert last["done"] is True and last["waiting_for"] == [] and last["error"] == ""
    the_vm = last["vm"]
    assert the_vm["state"] == final_state
    check_presence(last)  # no authorize_url, auth_timeout, avail_models; username in done
    if final_state == "done":
        assert the_vm["username"] == username
        assert the_vm["error"] == ""
    else:
        assert the_vm["error"]
    assert sim.session.pending() == []


# -- rejections in every state -----------------------------------------------------------

NON_TERMINAL = list(GATES)


REFUSED = [
    (state, command)
    for state in NON_TERMINAL
    for command in ("select_region", "select_model", "download", "_authorized", "_expired")
    if command not in GATES[state]
]


@pytest.mark.parametrize(("state", "command"), REFUSED)
def test_a_command_not_in_waiting_for_is_rejected(run: Starter, state: str, command: str) -> None:
    sim = run()
    drive_to(sim, state)
    before = sim.last
    timers = [(t.trigger, t.deadline) for t in sim.session.pending()]
    error = f'command "{command}" not allowed in state {state}'
    answer = sim.send(command, region="cn", model="glm-4.6")
    assert answer == [{**before, "error": error}]
    lines = out_lines(sim)
    assert vm_and_gate(lines[-1]) == vm_and_gate(lines[-2])
    assert [(v.error, v.state, v.waiting_for) for v in sim.violations] == [
        (error, state, tuple(GATES[state]))
    ]
    assert sim.session.state == state
    assert [(t.trigger, t.deadline) for t in sim.session.pending()] == timers


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"hello", "invalid JSON: invalid character (byte 0)"),
        (b'"quit"', "invalid JSON: expected `object`, got `str`"),
        (b'{"type":"Quit"}', 'command "Quit" not allowed in state select_region'),
        (b"{}", 'command "" not allowed in state select_region'),
        (b'{"type":5}', 'command "5" not allowed in state select_region'),
    ],
)
def test_bad_lines_in_select_region(run: Starter, line: bytes, error: str) -> None:
    sim = run()
    assert sim.send_line(line) == [{**event("select_region"), "error": error}]
    assert sim.violations[-1].error == error


# -- quit --------------------------------------------------------------------------------


@pytest.mark.parametrize("state", NON_TERMINAL)
def test_quit_in_every_non_terminal_state(run: Starter, state: str) -> None:
    sim = run()
    drive_to(sim, state)
    before = sim.last
    count = len(sim.events)
    answer = sim.send("quit")
    assert answer == [{**before, "waiting_for": [], "done": True, "error": ""}]
    assert answer[0]["vm"]["state"] == state
    lines = out_lines(sim)
    assert vm_bytes(lines[-1]) == vm_bytes(lines[-2])
    assert sim.done is True
    assert sim.session.pending() == []
    assert sim.violations == []
    # Nothing more: no timer fires, no line is answered.
    assert sim.advance(1000.0) == []
    assert sim.send("select_model", model="glm-4.6") == []
    assert len(sim.events) == count + 1
    assert sim.violations[-1].after_done is True


def test_end_of_stdin_is_not_quit(run: Starter) -> None:
    sim = run()
    sim.send("select_region", region="cn")
    assert sim.close_stdin() == []
    assert sim.done is False
    assert sim.wait_state("select_model")["vm"]["avail_models"] == MODELS
    assert sim.done is False


# -- determinism -------------------------------------------------------------------------


def transcript(seed: int) -> list[tuple[str, float, bytes]]:
    sim = start("login", seed=seed)
    try:
        sim.send("select_region", region="cn")
        sim.wait_state("select_model")
        sim.send("select_model", model="glm-4.5-air")
        sim.wait_done()
        return [(line.direction, line.time, line.data) for line in sim.transcript]
    finally:
        sim.close()


def test_same_seed_gives_identical_events_and_times() -> None:
    first, second = transcript(7), transcript(7)
    assert first == second
    assert len(first) == 2 + 7  # two commands in, seven events out
    assert b'"username":"octocat"' in first[-1][2]


def test_another_seed_draws_another_nonce_and_other_delays() -> None:
    seven, eight = transcript(7), transcript(8)
    assert [d for d, _, _ in seven] == [d for d, _, _ in eight]
    assert [t for _, t, _ in seven] != [t for _, t, _ in eight]
    nonce = re.compile(rb"state=([0-9a-f]{16})")
    assert nonce.findall(b"".join(data for _, _, data in seven)) != nonce.findall(
        b"".join(data for _, _, data in eight)
    )
