"""``login --stdio`` end to end, and the shared rejected-input and lifecycle rules.

Most tests run at speed 0 (every timer fires at once, in order). To look at a state
that only lasts while a timer runs, a scenario file in tmp_path gives that step a long
delay and every other step none, and the test runs at speed 1.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.samples import ZREAD_DEFAULT

from .helpers import MAX_LINE, NOBODY_ANSWERS, Proc, encode, vm_bytes, write_scenario

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
CONDITIONAL = {
    # field: the vm states it is present in (FIDELITY 5: authorize_url from open_browser
    # through waiting; the reference: auth_timeout in waiting, avail_models in
    # select_model, username in done).
    "authorize_url": {"open_browser", "waiting"},
    "auth_timeout": {"waiting"},
    "avail_models": {"select_model"},
    "username": {"done"},
}
MODELS = ["glm-4.6", "glm-4.5-air"]
REGION = {"type": "select_region", "params": {"region": "cn"}}
WAITING_FOR = {
    "select_region": ["select_region", "quit"],
    "init_flow": [],
    "open_browser": [],
    "waiting": [],
    "select_model": ["select_model", "quit"],
    "saving": [],
}


def model(name: str) -> dict[str, Any]:
    return {"type": "select_model", "params": {"model": name}}


def check_vm(event: dict[str, Any]) -> dict[str, Any]:
    """The presence rules and key order of the login vm, for the vm's own state."""
    vm = event["vm"]
    state = vm["state"]
    expected = [k for k in VM_KEYS if k not in CONDITIONAL or state in CONDITIONAL[k]]
    assert list(vm) == expected, (state, list(vm))
    assert isinstance(vm["browser_warn"], str)
    assert isinstance(vm["selected_model"], str)
    assert isinstance(vm["error"], str)
    assert isinstance(vm["wants_llm_provider_editor"], bool)
    if not event["done"]:
        assert event["waiting_for"] == WAITING_FOR[state], event
    return vm


def check_url(url: str, region: str) -> dict[str, list[str]]:
    parts = urlsplit(url)
    assert parts.scheme == "https"
    assert parts.netloc
    query = parse_qs(parts.query, strict_parsing=True)
    assert len(query) >= 2
    assert query.get("region") == [region]
    return query


# -- the default flow -----------------------------------------------------------------


@pytest.mark.parametrize("chosen", MODELS)
def test_default_flow_every_state_in_order(chosen: str) -> None:
    with Proc("login") as p:
        first = p.read_event()
        vm = check_vm(first)
        assert vm["state"] == "select_region"
        assert first["waiting_for"] == ["select_region", "quit"]
        assert vm["error"] == "" and vm["wants_llm_provider_editor"] is False

        p.send(REGION)
        init = p.read_event()
        assert check_vm(init)["state"] == "init_flow"
        assert init["waiting_for"] == [] and init["done"] is False

        opened = p.read_event()
        vm = check_vm(opened)
        assert vm["state"] == "open_browser"
        assert opened["waiting_for"] == []
        query = check_url(vm["authorize_url"], "cn")
        assert query["state"][0]
        # Go escapes & as \u0026 inside JSON strings.
        assert b"\\u0026" in p.last_raw
        assert b"&" not in p.last_raw

        waiting = p.read_event()
        vm = check_vm(waiting)
        assert vm["state"] == "waiting"
        assert vm["authorize_url"] == opened["vm"]["authorize_url"]
        assert type(vm["auth_timeout"]) is int
        assert vm["auth_timeout"] == 300 * 10**9  # the default world: 300 s in ns
        assert b'"auth_timeout":300000000000,' in p.last_raw
        assert b"&" not in p.last_raw

        select = p.read_event()
        vm = check_vm(select)
        assert vm["state"] == "select_model"
        assert vm["avail_models"] == MODELS
        assert vm["selected_model"] == ""
        assert select["waiting_for"] == ["select_model", "quit"]

        p.reject(model("gpt-5"), prefix="invalid params: ")
        assert "gpt-5" in p.events[-1]["error"]
        p.reject(model(""), prefix="invalid params: ")
        p.reject(model("GLM-4.6"), prefix="invalid params: ")
        p.reject({"type": "select_model", "params": {"model": 46}}, prefix="invalid params: ")
        p.reject({"type": "select_model"}, prefix="invalid params: ")
        p.reject(REGION, 'command "select_region" not allowed in state select_model')

        p.send(model(chosen))
        saving = p.read_event()
        vm = check_vm(saving)
        assert vm["state"] == "saving"
        assert vm["selected_model"] == chosen
        assert saving["waiting_for"] == []

        done = p.read_event()
        vm = check_vm(done)
        assert vm["state"] == "done"
        assert done["done"] is True and done["waiting_for"] == [] and done["error"] == ""
        assert vm["username"] == "octocat"
        assert vm["selected_model"] == chosen
        assert vm["error"] == ""
        assert vm["wants_llm_provider_editor"] is False
        assert len(p.events) == 7 + 6  # seven states + six rejections
        p.finish()


def test_any_non_empty_region_is_accepted_and_extra_params_ignored() -> None:
    with Proc("login") as p:
        p.read_event()
        p.send({"type": "select_region", "params": {"region": "eu <&> west", "extra": [1]}})
        assert p.read_event()["vm"]["state"] == "init_flow"
        opened = p.read_event()
        check_url(opened["vm"]["authorize_url"], "eu <&> west")
        assert b"&" not in p.last_raw and b"<" not in p.last_raw and b">" not in p.last_raw
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"region": ""}, id="empty"),
        pytest.param({}, id="missing"),
        pytest.param({"region": 5}, id="number"),
        pytest.param({"region": None}, id="null"),
        pytest.param({"region": ["cn"]}, id="array"),
    ],
)
def test_bad_region_is_invalid_params(rejecting: Proc, params: dict[str, Any]) -> None:
    # The shared session at its first gate (see ``rejecting``): it takes a good region
    # after all of these, and that is checked when the module is done with it.
    p = rejecting
    p.reject({"type": "select_region", "params": params}, prefix="invalid params: ")
    assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])


def test_custom_flag_ends_at_once_for_the_llm_editor() -> None:
    with Proc("login", "--custom") as p:
        event = p.read_event()
        assert event["done"] is True
        assert event["waiting_for"] == []
        assert event["error"] == ""
        vm = check_vm(event)
        assert vm["wants_llm_provider_editor"] is True
        assert vm["state"] == "done"
        p.finish()


def test_use_own_key_region_ends_for_the_llm_editor() -> None:
    with Proc("login") as p:
        p.read_event()
        p.send({"type": "select_region", "params": {"region": "__use_own_key__"}})
        event = p.read_event()
        assert event["done"] is True
        assert event["waiting_for"] == []
        assert event["error"] == ""
        vm = check_vm(event)
        assert vm["state"] == "done"
        assert vm["wants_llm_provider_editor"] is True
        p.finish()


@pytest.mark.parametrize("how", ["--custom", "__use_own_key__"])
def test_own_key_with_nobody_logged_in_names_no_user(how: str) -> None:
    # A ~/.zread with no login.json and a config.yaml whose key is empty (zread's
    # defaults), where the scenario has a key: nobody is logged in.
    (Path.home() / ".zread").mkdir()
    (Path.home() / ".zread" / "config.yaml").write_bytes(ZREAD_DEFAULT)
    with Proc("login", *([how] if how == "--custom" else []), files=True) as p:
        event = p.read_event()
        if how != "--custom":
            p.send({"type": "select_region", "params": {"region": how}})
            event = p.read_event()
        assert event["done"] is True
        vm = check_vm(event)
        assert vm["wants_llm_provider_editor"] is True
        assert vm["username"] == ""
        p.finish()


def test_scenario_regions_restrict_the_keys(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path,
        "regions",
        '[world]\nbrowser_opens = false\n[world.login]\nregions = ["cn", "global"]\n',
    )
    with Proc("login", scenario=scenario) as p:
        p.read_event()
        p.reject({"type": "select_region", "params": {"region": "eu"}}, prefix="invalid params: ")
        p.send({"type": "select_region", "params": {"region": "global"}})
        assert p.read_event()["vm"]["state"] == "init_flow"
        opened = p.read_event()
        assert opened["vm"]["browser_warn"]  # the browser could not be opened
        check_url(opened["vm"]["authorize_url"], "global")
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()
    with Proc("login", scenario=scenario) as p:
        p.read_event()
        p.send({"type": "select_region", "params": {"region": "__use_own_key__"}})
        assert p.read_event()["vm"]["wants_llm_provider_editor"] is True
        p.finish()


# -- states held open by a long delay ------------------------------------------------

ZERO = {"init_flow": 0, "open_browser": 0, "authorize": 0, "save_login": 0}


def holding(tmp_path: Path, step: str) -> str:
    timing = {**ZERO, step: 600}
    lines = ["[timing]"] + [f"{k} = {{ uniform = [{v}, {v}] }}" for k, v in timing.items()]
    return write_scenario(tmp_path, f"hold-{step}", "\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("state", "step", "script"),
    [
        ("init_flow", "init_flow", [REGION]),
        ("open_browser", "open_browser", [REGION]),
        ("waiting", "authorize", [REGION]),
        ("saving", "save_login", [REGION, model("glm-4.6")]),
    ],
)
def test_internal_states_wait_with_an_empty_gate(
    tmp_path: Path, state: str, step: str, script: list[dict[str, Any]]
) -> None:
    with Proc("login", speed=1, scenario=holding(tmp_path, step)) as p:
        p.drive_until(script, lambda e: e["vm"]["state"] == state)
        held = p.events[-1]
        assert held["waiting_for"] == []
        assert held["done"] is False
        check_vm(held)
        p.reject(REGION, f'command "select_region" not allowed in state {state}')
        p.reject(model("glm-4.6"), f'command "select_model" not allowed in state {state}')
        p.reject({"type": "_authorized"}, f'command "_authorized" not allowed in state {state}')
        p.send({"type": "quit"})
        done = p.read_event()
        assert done["done"] is True
        assert done["waiting_for"] == []
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        assert done["vm"]["state"] == state
        p.finish()


@pytest.mark.parametrize("speed", [0, 0.2])
def test_login_timeout_scenario_ends_in_error(speed: float) -> None:
    with Proc("login", speed=speed, scenario="login-timeout") as p:
        p.drive([REGION], timeout=10)
        states = [e["vm"]["state"] for e in p.events]
        assert states == ["select_region", "init_flow", "open_browser", "waiting", "error"]
        for event in p.events:
            check_vm(event)
        assert p.events[3]["vm"]["auth_timeout"] == 3 * 10**9
        last = p.events[-1]
        assert last["done"] is True
        assert last["waiting_for"] == []
        assert last["error"] == ""
        assert "timed out" in last["vm"]["error"]
        p.finish()


@pytest.mark.parametrize(
    ("failure", "script", "states"),
    [
        (
            'point = "init_flow"\nerror = "boom: init"',
            [REGION],
            ["select_region", "init_flow", "error"],
        ),
        (
            'point = "authorization"\nerror = "boom: denied"',
            [REGION],
            ["select_region", "init_flow", "open_browser", "waiting", "error"],
        ),
        (
            'point = "save"\nerror = "boom: save"',
            [REGION, model("glm-4.6")],
            ["select_region", "init_flow", "open_browser", "waiting", "select_model", "saving"]
            + ["error"],
        ),
    ],
    ids=["init_flow", "authorization", "save"],
)
def test_failures_end_in_the_error_state(
    tmp_path: Path, failure: str, script: list[dict[str, Any]], states: list[str]
) -> None:
    scenario = write_scenario(tmp_path, "fail", f"[[failures]]\n{failure}\n")
    with Proc("login", scenario=scenario) as p:
        p.drive(script)
        assert [e["vm"]["state"] for e in p.events] == states
        for event in p.events:
            check_vm(event)
        last = p.events[-1]
        assert last["done"] is True and last["waiting_for"] == [] and last["error"] == ""
        assert last["vm"]["error"].startswith("boom: ")
        p.finish()


# -- rejected input (FIDELITY 3), in select_region ----------------------------------


def not_allowed(command_type: str) -> str:
    return f'command "{command_type}" not allowed in state select_region'


REJECTED = [
    pytest.param(b"hello", None, "invalid JSON: ", id="not-json"),
    pytest.param(b'{"type":"select_region"', None, "invalid JSON: ", id="truncated"),
    pytest.param(b'{"type":"quit"}}', None, "invalid JSON: ", id="trailing-garbage"),
    pytest.param(b'["select_region"]', None, "invalid JSON: ", id="json-array"),
    pytest.param(b'"quit"', None, "invalid JSON: ", id="json-string"),
    pytest.param(b"42", None, "invalid JSON: ", id="json-number"),
    pytest.param(b"null", None, "invalid JSON: ", id="json-null"),
    pytest.param(b'{"type":"\xff\xfe"}', None, "invalid JSON: ", id="invalid-utf8"),
    pytest.param(
        b'{"type":"select_region","params":{"region":"\xc3"}}',
        None,
        "invalid JSON: ",
        id="invalid-utf8-in-params",
    ),
    pytest.param(b'{"params":{"region":"cn"}}', not_allowed(""), "", id="type-missing"),
    pytest.param(b"{}", not_allowed(""), "", id="empty-object"),
    pytest.param(b'{"type":"Quit"}', not_allowed("Quit"), "", id="unknown-type-case"),
    pytest.param(b'{"type":"frobnicate"}', not_allowed("frobnicate"), "", id="unknown-type"),
    pytest.param(b'{"type":"_start"}', not_allowed("_start"), "", id="internal-start"),
    pytest.param(b'{"type":"_flow_ready"}', not_allowed("_flow_ready"), "", id="internal"),
    pytest.param(encode(model("glm-4.6")), not_allowed("select_model"), "", id="not-waiting"),
    pytest.param(b'{"type":"download"}', not_allowed("download"), "", id="other-command"),
    pytest.param(
        b'{"type":"select_region","params":"cn"}', None, "invalid params: ", id="params-string"
    ),
    pytest.param(
        b'{"type":"select_region","params":["cn"]}', None, "invalid params: ", id="params-array"
    ),
    pytest.param(
        b'{"type":"select_region","params":7}', None, "invalid params: ", id="params-number"
    ),
    pytest.param(
        b'{"type":"select_region","params":{"region":true}}',
        None,
        "invalid params: ",
        id="params-field-type",
    ),
]


@pytest.fixture(scope="module")
def rejecting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    """One login process at its first gate, shared by the rejected-line cases below: a
    rejected line changes nothing, so each case finds the session as the first event
    left it (which each case checks). When the module is done with it, the session
    still takes a region, and a quit ends it as ever."""
    home = tmp_path_factory.mktemp("rejecting")
    with Proc("login", env={"HOME": str(home)}) as p:
        p.read_event()
        yield p
        p.send(REGION)
        assert p.read_event()["vm"]["state"] == "init_flow"
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


@pytest.mark.parametrize(("line", "error", "prefix"), REJECTED)
def test_rejected_line_gets_exactly_one_event(
    rejecting: Proc, line: bytes, error: str | None, prefix: str
) -> None:
    p = rejecting
    p.reject(line, error, prefix=prefix)
    # The next line is answered next: the rejected line had one event, no more.
    p.reject(b'{"type":"sentinel"}', not_allowed("sentinel"))
    assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])


@pytest.mark.parametrize("line", [b'{"type":5}', b'{"type":["quit"]}', b'{"type":{"a":1}}'])
def test_type_not_a_string_is_not_allowed(rejecting: Proc, line: bytes) -> None:
    p = rejecting
    error = p.reject(line)
    assert error.startswith('command "')
    assert error.endswith('" not allowed in state select_region')
    p.reject(b'{"type":"sentinel"}', not_allowed("sentinel"))
    assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])


def test_oversized_line_is_rejected_and_skipped() -> None:
    head = b'{"type":"select_region","params":{"region":"'
    line = head + b"a" * (MAX_LINE + 100 - len(head) - 3) + b'"}}'
    assert len(line) == MAX_LINE + 100
    with Proc("login") as p:
        p.read_event()
        p.reject(line, f"invalid JSON: line exceeds {MAX_LINE} bytes")
        p.reject(b'{"type":"sentinel"}', not_allowed("sentinel"))
        p.send(REGION)
        assert p.read_event()["vm"]["state"] == "init_flow"
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_line_one_byte_over_the_limit_is_rejected() -> None:
    head = b'{"type":"select_region","params":{"region":"cn","pad":"'
    tail = b'"}}'
    line = head + b"x" * (MAX_LINE + 1 - len(head) - len(tail)) + tail
    assert len(line) == MAX_LINE + 1
    with Proc("login") as p:
        p.read_event()
        p.reject(line, f"invalid JSON: line exceeds {MAX_LINE} bytes")
        p.reject(b'{"type":"sentinel"}', not_allowed("sentinel"))
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_line_of_exactly_one_mib_is_accepted() -> None:
    head = b'{"type":"select_region","params":{"region":"cn","pad":"'
    tail = b'"}}'
    line = head + b"x" * (MAX_LINE - len(head) - len(tail)) + tail
    assert len(line) == MAX_LINE
    with Proc("login") as p:
        p.read_event()
        p.send(line)
        assert p.read_event()["vm"]["state"] == "init_flow"
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_blank_lines_are_ignored() -> None:
    with Proc("login") as p:
        p.read_event()
        p.write(b"\n   \n\t\n\r\n")
        # The next event answers the sentinel: the blank lines had none.
        p.reject(b'{"type":"sentinel"}', not_allowed("sentinel"))
        assert len(p.events) == 2
        p.write(encode(REGION) + b"\r\n")  # CRLF: the \r is whitespace
        assert p.read_event()["vm"]["state"] == "init_flow"
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_many_rejections_in_one_write_each_get_one_event() -> None:
    bad = [b"nope", b"[]", b'{"type":"_x"}', b'{"type":"select_region","params":1}']
    with Proc("login") as p:
        p.read_event()
        p.write(b"\n".join(bad) + b"\n")
        for _ in bad:
            event = p.read_event()
            assert event["error"]
            assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])
        p.reject(b'{"type":"sentinel"}', not_allowed("sentinel"))
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


# -- lifecycle --------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_behaves_as_quit(signum: int) -> None:
    with Proc("login") as p:
        p.read_event()
        p.popen.send_signal(signum)
        done = p.read_event()
        assert done["done"] is True
        assert done["waiting_for"] == []
        assert done["vm"]["state"] == "select_region"
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[0])
        p.finish()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_while_a_timer_runs_behaves_as_quit(tmp_path: Path, signum: int) -> None:
    with Proc("login", speed=1, scenario=holding(tmp_path, "authorize")) as p:
        p.drive_until([REGION], lambda e: e["vm"]["state"] == "waiting")
        p.popen.send_signal(signum)
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["state"] == "waiting"
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        p.finish()


def test_end_of_stdin_is_not_quit_the_process_waits_at_its_gate() -> None:
    with Proc("login") as p:
        p.read_event()
        p.close_stdin()
        assert "waiting for select_region, quit" in p.wait_stderr(NOBODY_ANSWERS)
        p.assert_waiting()
        p.terminate()  # SIGTERM still quits
        done = p.read_event()
        assert done["done"] is True
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[0])
        p.finish()


def test_end_of_stdin_mid_flow_lets_the_timers_run_to_the_next_gate() -> None:
    with Proc("login", speed=0.2) as p:
        p.read_event()
        p.send(REGION)
        p.close_stdin()  # init_flow, open_browser, waiting, then select_model: a gate
        gate = p.read_until(lambda e: e["vm"]["state"] == "select_model", timeout=10)
        assert gate["waiting_for"] == ["select_model", "quit"]
        p.wait_stderr(NOBODY_ANSWERS)
        assert p.stderr_so_far().count(NOBODY_ANSWERS) == 1
        p.assert_waiting()
        p.terminate()
        done = p.read_event()
        assert done["done"] is True and done["vm"]["state"] == "select_model"
        p.finish()


def test_reader_closing_stdout_ends_the_process_quietly(tmp_path: Path) -> None:
    with Proc("login", speed=1, scenario=holding(tmp_path, "authorize")) as p:
        p.read_event()
        p.close_stdout()
        p.send(REGION)  # the next events have nowhere to go
        p.wait(5)
        assert "Traceback" not in p.stderr


# -- determinism ------------------------------------------------------------------------


def test_same_inputs_give_byte_identical_stdout() -> None:
    script = [REGION, model("glm-4.5-air")]
    runs = []
    for _ in range(2):
        with Proc("login", seed=7) as p:
            runs.append(b"".join(p.drive(script)))
            p.finish()
    assert runs[0] == runs[1]
    assert b'"username":"octocat"' in runs[0]
