"""Tests for statecharts.config, in process and in virtual time.

config has no state machine in zread: one editing gate
(``["update_fields","save","reload_llm","quit"]``), shown as ``editing`` in error texts,
that ends with ``save`` or ``quit``. The vm has nine fields in the reference's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.virtual import SimSession, start
from statecharts import load_chart

WAITING_FOR = ["update_fields", "save", "reload_llm", "quit"]
TITLE_KEYS = [
    "config.language",
    "config.doc_language",
    "config.llm",
    "config.max_concurrent",
    "config.max_retries",
    "config.llm_provider",
    "config.llm_base_url",
    "config.llm_model",
    "config.llm_api_key",
]
JSON_KEYS = [
    "language",
    "doc_language",
    "",
    "max_concurrent",
    "max_retries",
    "llm_provider",
    "llm_base_url",
    "llm_model",
    "llm_api_key",
]
INITIAL = {
    "language": "en",
    "doc_language": "en",
    "max_concurrent": "4",
    "max_retries": "2",
    "llm_provider": "zhipu",
    "llm_base_url": "https://open.bigmodel.cn/api/paas/v4",
    "llm_model": "glm-4.6",
    "llm_api_key": "sk-sim-0000000000000000",
}
PROVIDER_DISPLAY = "zhipu / glm-4.6"
LLM_KEYS = ["llm_provider", "llm_base_url", "llm_model", "llm_api_key"]

Starter = Callable[..., SimSession]


@pytest.fixture
def run() -> Iterator[Starter]:
    """Start ``zread config --stdio`` sessions in virtual time; closed at the end."""
    opened: list[SimSession] = []

    def _start(*args: str, **kwargs: Any) -> SimSession:
        sim = start("config", *args, **kwargs)
        opened.append(sim)
        return sim

    yield _start
    for sim in opened:
        sim.close()


def expected_vm(
    values: dict[str, str] | None = None,
    *,
    initial: dict[str, str] | None = None,
    display: str = PROVIDER_DISPLAY,
    dirty: bool = False,
    saved: bool = False,
    error: str = "",
) -> dict[str, Any]:
    """The whole config vm, key order included, for these values."""
    start_values = {**INITIAL, **(initial or {})}
    now_values = {**start_values, **(values or {})}
    fields = []
    for title_key, json_key in zip(TITLE_KEYS, JSON_KEYS, strict=True):
        first = start_values[json_key] if json_key else display
        value = now_values[json_key] if json_key else display
        fields.append(
            {"title_key": title_key, "json_key": json_key, "initial": first, "value": value}
        )
    return {"fields": fields, "dirty": dirty, "saved": saved, "error": error}


def values_of(vm: dict[str, Any]) -> dict[str, str]:
    return {f["json_key"]: f["value"] for f in vm["fields"] if f["json_key"]}


def out_lines(sim: SimSession) -> list[bytes]:
    return [line.data for line in sim.transcript if line.direction == "out"]


def vm_and_gate(line: bytes) -> bytes:
    """The ``vm`` and ``waiting_for`` bytes of an event line."""
    return line[: line.index(b',"done":')]


def scenario_file(tmp_path: Path, text: str, name: str = "custom") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text('extends = "default"\n' + text, encoding="utf-8")
    return str(path)


def assert_rejected(sim: SimSession, answer: list[dict[str, Any]], error: str) -> None:
    """One event: the previous vm and waiting_for byte for byte, the error, not done."""
    assert len(answer) == 1
    event = answer[0]
    assert event["error"] == error
    assert event["done"] is False
    lines = out_lines(sim)
    assert vm_and_gate(lines[-1]) == vm_and_gate(lines[-2])
    assert sim.events[-2]["vm"] == event["vm"]
    assert event["waiting_for"] == WAITING_FOR
    assert sim.violations[-1].error == error
    assert sim.violations[-1].state == "editing"
    assert sim.session.state == "editing"


# -- the chart ---------------------------------------------------------------------------


def test_chart_has_one_editing_gate_and_a_terminal_save() -> None:
    chart = load_chart("config")
    shown = {name: spec for name, spec in chart.states.items() if name != chart.initial}
    assert {spec.vm_state for spec in shown.values()} == {"editing"}
    gates = [spec for spec in shown.values() if not spec.terminal]
    assert [list(spec.waiting_for) for spec in gates] == [WAITING_FOR]
    terminals = [spec for spec in shown.values() if spec.terminal]
    assert len(terminals) == 1
    assert terminals[0].waiting_for == ()
    assert all(spec.timers == () for spec in chart.states.values())
    assert set(chart.commands) == {"update_fields", "save", "reload_llm"}


# -- the first event ---------------------------------------------------------------------


def test_first_event_shows_the_nine_fields_in_order(run: Starter) -> None:
    sim = run()
    assert len(sim.events) == 1
    event = sim.last
    assert event == {"vm": expected_vm(), "waiting_for": WAITING_FOR, "done": False, "error": ""}
    assert list(event["vm"]) == ["fields", "dirty", "saved", "error"]
    assert [list(field) for field in event["vm"]["fields"]] == [
        ["title_key", "json_key", "initial", "value"]
    ] * 9
    assert sim.session.state == "editing"
    assert sim.session.pending() == []
    assert sim.now == 0.0
    assert sim.violations == []


def test_first_event_shows_the_world_config(run: Starter, tmp_path: Path) -> None:
    text = (
        "[world.config]\n"
        'language = "zh"\n'
        "max_concurrent = 2\n"
        "max_retries = 0\n"
        'llm_provider = "openai"\n'
        'llm_model = "gpt-4o"\n'
    )
    sim = run(scenario=scenario_file(tmp_path, text))
    world = {
        "language": "zh",
        "max_concurrent": "2",
        "max_retries": "0",
        "llm_provider": "openai",
        "llm_model": "gpt-4o",
    }
    assert sim.vm == expected_vm(initial=world, display="openai / gpt-4o")


def test_the_session_waits_for_the_client(run: Starter) -> None:
    sim = run()
    assert sim.advance(3600.0) == []
    assert sim.now == 3600.0
    assert len(sim.events) == 1
    assert sim.waiting_for == WAITING_FOR


# -- update_fields -----------------------------------------------------------------------

EDITS = [
    ("language", "zh"),
    ("doc_language", "ja"),
    ("max_concurrent", "8"),
    ("max_retries", "5"),
    ("llm_provider", "openai"),
    ("llm_base_url", "https://api.openai.com/v1"),
    ("llm_model", "gpt-4o"),
    ("llm_api_key", "sk-new"),
]


@pytest.mark.parametrize(("key", "value"), EDITS)
def test_update_fields_changes_only_the_listed_key(run: Starter, key: str, value: str) -> None:
    sim = run()
    answer = sim.send("update_fields", fields={key: value})
    assert answer == [
        {
            "vm": expected_vm({key: value}, dirty=True),
            "waiting_for": WAITING_FOR,
            "done": False,
            "error": "",
        }
    ]
    assert sim.violations == []
    assert sim.session.state == "editing"


def test_update_fields_applies_several_keys_and_dirty_follows_the_values(run: Starter) -> None:
    sim = run()
    sim.send("update_fields", fields={"language": "zh"})
    edited = {"language": "zh", "doc_language": "ja", "max_concurrent": "8", "llm_model": "x"}
    sim.send("update_fields", fields={k: v for k, v in edited.items() if k != "language"})
    assert sim.vm == expected_vm(edited, dirty=True)

    # Restoring some values keeps dirty; restoring all of them clears it.
    sim.send("update_fields", fields={"language": "en", "doc_language": "en"})
    assert sim.vm == expected_vm({"max_concurrent": "8", "llm_model": "x"}, dirty=True)
    sim.send("update_fields", fields={"max_concurrent": "4", "llm_model": "glm-4.6"})
    assert sim.vm == expected_vm()
    lines = out_lines(sim)
    assert vm_and_gate(lines[-1]) == vm_and_gate(lines[0])
    assert len(sim.events) == 5
    assert sim.violations == []


def test_an_empty_update_or_an_unchanged_value_changes_nothing(run: Starter) -> None:
    sim = run()
    assert sim.send("update_fields", fields={})[0]["vm"] == expected_vm()
    assert sim.send("update_fields", fields={"language": "en"})[0]["vm"] == expected_vm()
    assert sim.violations == []


def test_update_fields_ignores_unknown_params_keys(run: Starter) -> None:
    sim = run()
    sim.send("update_fields", fields={"language": "de"}, extra=[1, 2])
    assert sim.last["error"] == ""
    assert sim.vm == expected_vm({"language": "de"}, dirty=True)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_concurrent", "1"),
        ("max_concurrent", "64"),
        ("max_retries", "0"),
        ("max_retries", "10"),
    ],
)
def test_integer_bounds_are_accepted(run: Starter, key: str, value: str) -> None:
    sim = run()
    sim.send("update_fields", fields={key: value})
    assert sim.last["error"] == ""
    assert sim.vm == expected_vm({key: value}, dirty=True)


@pytest.mark.parametrize(
    ("value", "shown", "dirty"),
    [
        ("+8", "8", True),
        ("08", "8", True),
        ("04", "4", False),
        pytest.param("0" * 4400 + "8", "8", True, id="more-than-4300-digits"),
    ],
)
def test_integer_values_are_shown_as_integers(
    run: Starter, value: str, shown: str, dirty: bool
) -> None:
    sim = run()
    sim.send("update_fields", fields={"max_concurrent": value})
    assert sim.last["error"] == ""
    assert sim.vm == expected_vm({"max_concurrent": shown}, dirty=dirty)


def test_values_are_echoed_escaped_as_go_escapes_them(run: Starter) -> None:
    value = '<b>&\u2028 é 日本 "q" \\'
    sim = run()
    sim.send("update_fields", fields={"llm_model": value})
    assert values_of(sim.vm)["llm_model"] == value
    raw = out_lines(sim)[-1]
    assert '"value":"\\u003cb\\u003e\\u0026\\u2028 é 日本 \\"q\\" \\\\"'.encode() in raw


BAD_FIELDS = [
    pytest.param(
        {"language": "fr", "nope": "x"},
        "invalid params: field 'nope' is not a config field",
        id="unknown-key",
    ),
    pytest.param(
        {"language": "fr", "": "x"}, "invalid params: field '' is read-only", id="read-only"
    ),
    pytest.param(
        {"language": "fr", "title_key": "x"},
        "invalid params: field 'title_key' is not a config field",
        id="not-a-json-key",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": "0"},
        "invalid params: max_concurrent must be an integer 1-64, got '0'",
        id="max-concurrent-0",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": "65"},
        "invalid params: max_concurrent must be an integer 1-64, got '65'",
        id="max-concurrent-65",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": "abc"},
        "invalid params: max_concurrent must be an integer 1-64, got 'abc'",
        id="max-concurrent-abc",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": ""},
        "invalid params: max_concurrent must be an integer 1-64, got ''",
        id="max-concurrent-empty",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": "4.0"},
        "invalid params: max_concurrent must be an integer 1-64, got '4.0'",
        id="max-concurrent-float",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": " 4"},
        "invalid params: max_concurrent must be an integer 1-64, got ' 4'",
        id="max-concurrent-space",
    ),
    pytest.param(
        {"language": "fr", "max_retries": "11"},
        "invalid params: max_retries must be an integer 0-10, got '11'",
        id="max-retries-11",
    ),
    pytest.param(
        {"language": "fr", "max_retries": "-1"},
        "invalid params: max_retries must be an integer 0-10, got '-1'",
        id="max-retries-minus-1",
    ),
    pytest.param(
        {"language": "fr", "max_retries": "1" * 4301},
        f"invalid params: max_retries must be an integer 0-10, got '{'1' * 4301}'",
        id="max-retries-4301-digits",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": "-" + "9" * 5000},
        f"invalid params: max_concurrent must be an integer 1-64, got '-{'9' * 5000}'",
        id="max-concurrent-5000-digits",
    ),
    pytest.param(
        {"language": "fr", "max_concurrent": 5},
        'invalid params: expected `str`, got `int` - at `$.fields["max_concurrent"]`',
        id="non-string-int",
    ),
    pytest.param(
        {"language": "fr", "llm_model": ["a"]},
        'invalid params: expected `str`, got `array` - at `$.fields["llm_model"]`',
        id="non-string-array",
    ),
]


@pytest.mark.parametrize(("fields", "error"), BAD_FIELDS)
def test_update_fields_is_all_or_nothing(run: Starter, fields: dict[str, Any], error: str) -> None:
    sim = run()
    # Dirty first: the rejection must keep that vm, not the initial one.
    sim.send("update_fields", fields={"llm_provider": "openai"})
    before = sim.vm
    assert_rejected(sim, sim.send("update_fields", fields=fields), error)
    assert sim.vm == before
    assert len(sim.violations) == 1
    # Nothing of the rejected update was applied ("language": "fr" included).
    sim.send("update_fields", fields={"doc_language": "de"})
    assert sim.vm == expected_vm({"llm_provider": "openai", "doc_language": "de"}, dirty=True)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            b'{"type":"update_fields","params":{"fields":"language=zh"}}',
            "invalid params: expected `object`, got `str` - at `$.fields`",
        ),
        (
            b'{"type":"update_fields","params":{"fields":["language"]}}',
            "invalid params: expected `object`, got `array` - at `$.fields`",
        ),
        (
            b'{"type":"update_fields","params":[1,2]}',
            "invalid params: expected `object`, got `array`",
        ),
        (b'{"type":"update_fields","params":"x"}', "invalid params: expected `object`, got `str`"),
        (b'{"type":"save","params":5}', "invalid params: expected `object`, got `int`"),
        (b'{"type":"reload_llm","params":[]}', "invalid params: expected `object`, got `array`"),
    ],
)
def test_params_of_the_wrong_shape_are_invalid_params(
    run: Starter, line: bytes, error: str
) -> None:
    sim = run()
    assert_rejected(sim, sim.send_line(line), error)
    assert sim.vm == expected_vm()
    assert [entry.line for entry in sim.violations] == [line]


@pytest.mark.parametrize(
    ("line", "edited"),
    [
        (b'{"type":"update_fields"}', {}),
        (b'{"type":"update_fields","params":{}}', {}),
        (b'{"type":"update_fields","params":{"fields":null}}', {}),
        (
            b'{"type":"update_fields","params":{"fields":{"doc_language":null}}}',
            {"doc_language": ""},
        ),
        (b'{"Type":"update_fields","PARAMS":{"Fields":{"language":"zh"}}}', {"language": "zh"}),
    ],
)
def test_params_are_decoded_as_go_decodes_them(
    run: Starter, line: bytes, edited: dict[str, str]
) -> None:
    # Keys name fields case-insensitively; null or a left-out field is its zero value.
    sim = run()
    answer = sim.send_line(line)
    assert answer == [
        {
            "vm": expected_vm(edited, dirty=bool(edited)),
            "waiting_for": WAITING_FOR,
            "done": False,
            "error": "",
        }
    ]
    assert sim.violations == []


def test_the_keys_of_fields_are_not_folded(run: Starter) -> None:
    # fields is a map: Go keeps its keys as sent, so LANGUAGE is not language.
    sim = run()
    line = b'{"type":"update_fields","params":{"fields":{"LANGUAGE":"zh"}}}'
    assert_rejected(
        sim, sim.send_line(line), "invalid params: field 'LANGUAGE' is not a config field"
    )
    assert sim.vm == expected_vm()


# -- rejected commands -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"type":"download"}', 'command "download" not allowed in state editing'),
        (b'{"type":"select_region"}', 'command "select_region" not allowed in state editing'),
        (b'{"type":"restart"}', 'command "restart" not allowed in state editing'),
        (b'{"type":"Save"}', 'command "Save" not allowed in state editing'),
        (b'{"type":"_start"}', 'command "_start" not allowed in state editing'),
        (b'{"params":{}}', 'command "" not allowed in state editing'),
        (b'{"type":null}', 'command "" not allowed in state editing'),
        (b'{"type":5}', 'command "5" not allowed in state editing'),
    ],
)
def test_a_command_not_in_waiting_for_is_rejected(run: Starter, line: bytes, error: str) -> None:
    sim = run()
    sim.send("update_fields", fields={"language": "zh"})
    before = sim.vm
    assert_rejected(sim, sim.send_line(line), error)
    assert sim.vm == before
    entry = sim.violations[-1]
    assert (entry.line, entry.waiting_for, entry.after_done) == (line, tuple(WAITING_FOR), False)
    # The session goes on as if the line had not been sent.
    sim.send("save")
    assert sim.last["done"] is True
    assert values_of(sim.vm) == {**INITIAL, "language": "zh"}


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"hello", "invalid JSON: invalid character (byte 0)"),
        (b"[]", "invalid JSON: expected `object`, got `array`"),
    ],
)
def test_a_line_that_is_not_an_object_is_invalid_json(
    run: Starter, line: bytes, error: str
) -> None:
    sim = run()
    assert_rejected(sim, sim.send_line(line), error)


DEEP = 100_000


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"type":"save","params":' + b"[" * DEEP + b"]" * DEEP + b"}", id="save"),
        pytest.param(
            b'{"type":"update_fields","params":{"fields":{"language":'
            + b"[" * DEEP
            + b"]" * DEEP
            + b"}}}",
            id="update-fields",
        ),
        pytest.param(b'{"type":"quit","x":' + b'{"a":' * DEEP + b"}" * DEEP + b"}", id="quit"),
    ],
)
def test_a_line_nested_too_deeply_is_invalid_json(run: Starter, line: bytes) -> None:
    sim = run()
    sim.send("update_fields", fields={"language": "zh"})
    assert_rejected(sim, sim.send_line(line), "invalid JSON: nested too deeply")
    sim.send("save")
    assert sim.last["done"] is True
    assert values_of(sim.vm) == {**INITIAL, "language": "zh"}


def test_blank_lines_get_no_answer(run: Starter) -> None:
    sim = run()
    assert sim.send_line(b"") == []
    assert sim.send_line(b"  \t ") == []
    assert len(sim.events) == 1
    assert sim.violations == []


# -- reload_llm --------------------------------------------------------------------------


def test_reload_llm_with_complete_settings_changes_nothing(run: Starter) -> None:
    sim = run()
    answer = sim.send("reload_llm")
    assert answer == [{"vm": expected_vm(), "waiting_for": WAITING_FOR, "done": False, "error": ""}]
    lines = out_lines(sim)
    assert vm_and_gate(lines[-1]) == vm_and_gate(lines[0])
    assert sim.violations == []


@pytest.mark.parametrize("key", LLM_KEYS)
@pytest.mark.parametrize("empty", ["", "   "])
def test_reload_llm_reports_an_empty_llm_field(run: Starter, key: str, empty: str) -> None:
    sim = run()
    sim.send("update_fields", fields={key: empty})
    assert sim.vm["error"] == ""  # update_fields itself does not check
    answer = sim.send("reload_llm")
    message = f"LLM settings incomplete: {key} empty"
    assert answer == [
        {
            "vm": expected_vm({key: empty}, dirty=True, error=message),
            "waiting_for": WAITING_FOR,
            "done": False,
            "error": "",
        }
    ]
    assert sim.violations == []
    # Filled again, the next reload clears vm.error.
    sim.send("update_fields", fields={key: INITIAL[key]})
    assert sim.vm["error"] == message  # kept until the next reload_llm
    sim.send("reload_llm")
    assert sim.vm == expected_vm()


def test_reload_llm_lists_every_empty_llm_field_in_field_order(run: Starter) -> None:
    sim = run()
    sim.send("update_fields", fields={"llm_api_key": "", "llm_provider": "", "llm_model": ""})
    sim.send("reload_llm")
    assert sim.vm["error"] == "LLM settings incomplete: llm_provider, llm_model, llm_api_key empty"


def test_reload_llm_ignores_non_llm_fields(run: Starter) -> None:
    sim = run()
    sim.send("update_fields", fields={"language": "", "doc_language": ""})
    sim.send("reload_llm")
    assert sim.vm == expected_vm({"language": "", "doc_language": ""}, dirty=True)


def test_reload_llm_checks_the_world_config(run: Starter, tmp_path: Path) -> None:
    sim = run(scenario=scenario_file(tmp_path, '[world.config]\nllm_api_key = ""\n'))
    assert sim.vm == expected_vm(initial={"llm_api_key": ""})
    sim.send("reload_llm")
    assert sim.vm == expected_vm(
        initial={"llm_api_key": ""}, error="LLM settings incomplete: llm_api_key empty"
    )


# -- save and quit -----------------------------------------------------------------------


def test_save_sets_saved_and_ends(run: Starter) -> None:
    sim = run()
    sim.send("update_fields", fields={"language": "zh", "max_retries": "5"})
    answer = sim.send("save")
    edited = {"language": "zh", "max_retries": "5"}
    assert answer == [
        {
            "vm": expected_vm(edited, dirty=True, saved=True),
            "waiting_for": [],
            "done": True,
            "error": "",
        }
    ]
    assert sim.done is True
    assert sim.session.pending() == []
    assert sim.violations == []


def test_save_without_edits_is_saved_and_not_dirty(run: Starter) -> None:
    sim = run()
    sim.send("save", ignored=1)
    assert sim.last == {
        "vm": expected_vm(saved=True),
        "waiting_for": [],
        "done": True,
        "error": "",
    }


def test_nothing_answers_after_save(run: Starter) -> None:
    sim = run()
    sim.send("save")
    assert sim.send("update_fields", fields={"language": "zh"}) == []
    assert sim.send("quit") == []
    assert sim.close_stdin() == []
    assert sim.advance(60.0) == []
    assert len(sim.events) == 2
    assert [(entry.after_done, entry.state) for entry in sim.violations] == [
        (True, "editing"),
        (True, "editing"),
    ]


def test_save_persists_for_the_next_session(run: Starter, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = run(home=home)
    first.send("update_fields", fields={"language": "zh", "max_retries": "5"})
    first.send("save")
    first.close()
    second = run(home=home)
    assert second.vm == expected_vm(initial={"language": "zh", "max_retries": "5"})


def test_quit_ends_without_saving(run: Starter, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    sim = run(home=home)
    sim.send("update_fields", fields={"llm_api_key": "sk-new"})
    before = out_lines(sim)[-1]
    answer = sim.send("quit")
    assert answer == [
        {
            "vm": expected_vm({"llm_api_key": "sk-new"}, dirty=True),
            "waiting_for": [],
            "done": True,
            "error": "",
        }
    ]
    after = out_lines(sim)[-1]
    assert after[: after.index(b',"waiting_for":')] == before[: before.index(b',"waiting_for":')]
    assert sim.done is True
    assert sim.violations == []
    sim.close()
    assert run(home=home).vm == expected_vm()


def test_quit_as_the_first_command_ends_with_the_first_vm(run: Starter) -> None:
    sim = run()
    sim.send("quit", anything=True)
    assert sim.events == [
        {"vm": expected_vm(), "waiting_for": WAITING_FOR, "done": False, "error": ""},
        {"vm": expected_vm(), "waiting_for": [], "done": True, "error": ""},
    ]


# -- determinism -------------------------------------------------------------------------


def script(sim: SimSession) -> list[bytes]:
    sim.send("update_fields", fields={"language": "zh", "llm_api_key": ""})
    sim.send("reload_llm")
    sim.send("download")
    sim.send("update_fields", fields={"max_concurrent": "99"})
    sim.send("save")
    return [line.data for line in sim.transcript]


@pytest.mark.parametrize("seed", [0, 7])
def test_same_seed_same_events(run: Starter, seed: int) -> None:
    first, second = run(seed=seed), run(seed=seed)
    assert script(first) == script(second)
    assert first.events == second.events
    assert [event["error"] for event in first.events] == [
        "",
        "",
        "",
        'command "download" not allowed in state editing',
        "invalid params: max_concurrent must be an integer 1-64, got '99'",
        "",
    ]
    assert first.events[2]["vm"]["error"] == "LLM settings incomplete: llm_api_key empty"
