"""``config --stdio`` end to end: nine fields, update_fields all or nothing, reload, save."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from simulator.pipes import spawn

from .helpers import NOBODY_ANSWERS, Proc, assert_rejected, vm_bytes

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


def update(fields: Any) -> dict[str, Any]:
    return {"type": "update_fields", "params": {"fields": fields}}


def values(event: dict[str, Any]) -> dict[str, str]:
    return {f["json_key"]: f["value"] for f in event["vm"]["fields"] if f["json_key"]}


def initials(event: dict[str, Any]) -> dict[str, str]:
    return {f["json_key"]: f["initial"] for f in event["vm"]["fields"] if f["json_key"]}


def test_first_event_has_the_nine_fields_in_order() -> None:
    with Proc("config") as p:
        event = p.read_event()
        assert event["waiting_for"] == WAITING_FOR
        assert event["done"] is False
        assert event["error"] == ""
        vm = event["vm"]
        assert list(vm) == ["fields", "dirty", "saved", "error"]
        assert "state" not in vm
        assert len(vm["fields"]) == 9
        for field in vm["fields"]:
            assert list(field) == ["title_key", "json_key", "initial", "value"]
            assert field["initial"] == field["value"]
            assert all(isinstance(v, str) for v in field.values())
        assert [f["title_key"] for f in vm["fields"]] == TITLE_KEYS
        assert [f["json_key"] for f in vm["fields"]] == JSON_KEYS
        assert vm["fields"][2]["json_key"] == ""
        assert vm["fields"][2]["value"]  # the read-only LLM provider display
        assert values(event) == INITIAL
        assert vm["dirty"] is False
        assert vm["saved"] is False
        assert vm["error"] == ""
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_update_fields_changes_only_listed_keys_and_dirty_follows() -> None:
    with Proc("config") as p:
        p.read_event()
        p.send(update({"language": "zh"}))
        changed = p.read_event()
        assert changed["error"] == ""
        assert changed["waiting_for"] == WAITING_FOR
        assert changed["done"] is False
        assert values(changed) == {**INITIAL, "language": "zh"}
        assert initials(changed) == INITIAL
        assert changed["vm"]["dirty"] is True
        assert changed["vm"]["saved"] is False

        p.send(update({"doc_language": "ja", "max_concurrent": "8", "llm_model": "glm-4.5"}))
        both = p.read_event()
        assert both["error"] == ""
        assert values(both) == {
            **INITIAL,
            "language": "zh",
            "doc_language": "ja",
            "max_concurrent": "8",
            "llm_model": "glm-4.5",
        }
        assert both["vm"]["dirty"] is True

        # Restoring some of the values keeps dirty; restoring all of them clears it.
        p.send(update({"language": "en", "doc_language": "en"}))
        assert p.read_event()["vm"]["dirty"] is True
        p.send(update({"max_concurrent": "4", "llm_model": "glm-4.6"}))
        restored = p.read_event()
        assert values(restored) == INITIAL
        assert restored["vm"]["dirty"] is False
        assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])

        # An empty update and setting a value to what it already is change nothing.
        p.send(update({}))
        p.read_event()
        assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])
        p.send(update({"language": "en"}))
        assert p.read_event()["vm"]["dirty"] is False
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_echoed_values_are_escaped_as_go_escapes_them() -> None:
    value = '<b>&\u2028\u2029 é 日本 \U0001f600 \x00\x1f\x7f "q" \\'
    with Proc("config") as p:
        p.read_event()
        p.send(update({"llm_model": value}))
        event = p.read_event()  # read_event also checks the whole line against go_json
        assert values(event)["llm_model"] == value
        expected = (
            '"value":"\\u003cb\\u003e\\u0026\\u2028\\u2029 é 日本 \U0001f600 '
            '\\u0000\\u001f\x7f \\"q\\" \\\\"'
        ).encode()
        assert expected in p.last_raw
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


BAD_UPDATES = [
    pytest.param({"language": "fr", "nope": "x"}, "nope", id="unknown-key"),
    pytest.param({"language": "fr", "": "x"}, "", id="read-only-key"),
    pytest.param({"language": "fr", "max_concurrent": 5}, None, id="non-string-int"),
    pytest.param({"language": "fr", "llm_model": ["a"]}, None, id="non-string-array"),
    pytest.param({"language": "fr", "max_concurrent": "0"}, "max_concurrent", id="mc-0"),
    pytest.param({"language": "fr", "max_concurrent": "65"}, "max_concurrent", id="mc-65"),
    pytest.param({"language": "fr", "max_concurrent": "abc"}, "max_concurrent", id="mc-abc"),
    pytest.param({"language": "fr", "max_concurrent": ""}, "max_concurrent", id="mc-empty"),
    pytest.param({"language": "fr", "max_concurrent": "4.0"}, "max_concurrent", id="mc-float"),
    pytest.param({"language": "fr", "max_retries": "11"}, "max_retries", id="mr-11"),
    pytest.param({"language": "fr", "max_retries": "-1"}, "max_retries", id="mr-minus-1"),
    pytest.param({"language": "fr", "max_retries": "1" * 4301}, "max_retries", id="mr-4301"),
    pytest.param({"max_retries": "3", "llm_api_key": "k", "title_key": "x"}, None, id="bad-last"),
]


EDITED = {**INITIAL, "llm_provider": "openai", "language": "de"}


@pytest.fixture(scope="module")
def editing() -> Iterator[Proc]:
    """One config process made dirty (provider openai, language de), shared by the
    rejected updates below: each leaves the values as they were, so every case starts
    from the same vm. When the module is done with it, it quits cleanly with them."""
    with Proc("config") as p:
        p.read_event()
        # Dirty first: a rejected line must keep that vm byte for byte.
        p.send(update({"llm_provider": "openai"}))
        assert p.read_event()["vm"]["dirty"] is True
        p.send(update({"language": "de"}))
        assert values(p.read_event()) == EDITED
        yield p
        p.send({"type": "quit"})
        done = p.read_until_done()
        assert values(done) == EDITED and done["vm"]["saved"] is False
        p.finish()


@pytest.mark.parametrize(("fields", "mentions"), BAD_UPDATES)
def test_update_fields_is_all_or_nothing(
    editing: Proc, fields: dict[str, Any], mentions: str | None
) -> None:
    p = editing
    before = p.events[-1]
    assert before["vm"]["dirty"] is True and values(before) == EDITED
    error = p.reject(update(fields), prefix="invalid params: ")
    if mentions:
        assert mentions in error
    # Nothing changed: a good update still starts from the pre-rejection values.
    p.send(update({"language": "de"}))
    after = p.read_event()
    assert after["error"] == "", after
    assert values(after) == EDITED


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"fields": "language=zh"}, id="fields-string"),
        pytest.param({"fields": ["language", "zh"]}, id="fields-array"),
        pytest.param([1, 2], id="params-array"),
        pytest.param("x", id="params-string"),
    ],
)
def test_update_fields_params_of_the_wrong_shape(params: Any) -> None:
    with Proc("config") as p:
        p.read_event()
        p.reject({"type": "update_fields", "params": params}, prefix="invalid params: ")
        p.send({"type": "save", "params": {"ignored": 1}})  # unknown params keys ignored
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["saved"] is True
        assert values(done) == INITIAL
        p.finish()


def test_commands_are_decoded_as_go_decodes_them() -> None:
    # Keys name fields case-insensitively, the last one wins, null is the zero value,
    # and the keys of a map (fields) are kept as sent.
    with Proc("config") as p:
        first = p.read_event()
        p.send(b'{"TYPE":"update_fields","Params":{"Fields":{"language":"zh"}}}')
        assert values(p.read_event()) == {**INITIAL, "language": "zh"}
        p.send(b'{"type":"update_fields","params":{"fields":null}}')
        unchanged = p.read_event()
        assert unchanged["error"] == ""
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        p.send(b'{"type":"update_fields","params":{"fields":{"doc_language":null}}}')
        assert values(p.read_event()) == {**INITIAL, "language": "zh", "doc_language": ""}
        p.reject(b'{"type":null}', 'command "" not allowed in state editing')
        p.reject(
            b'{"type":"update_fields","params":{"fields":{"Language":"de"}}}',
            "invalid params: field 'Language' is not a config field",
        )
        p.send(b'{"type":"save","Type":"quit"}')
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["saved"] is False  # quit, the last type, not save
        assert first["done"] is False
        p.finish()


def test_an_integer_of_more_than_4300_digits_is_invalid_params() -> None:
    with Proc("config") as p:
        p.read_event()
        value = "1" * 4301
        p.reject(
            update({"max_retries": value}),
            f"invalid params: max_retries must be an integer 0-10, got '{value}'",
        )
        p.send(update({"max_concurrent": "0" * 5000 + "8"}))  # leading zeros: still 8
        assert values(p.read_event())["max_concurrent"] == "8"
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


DEEP_SAVE = b'{"type":"save","params":' + b"[" * 1000 + b"]" * 1000 + b"}"
DEEP_FIELDS = (
    b'{"type":"update_fields","params":{"fields":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
)


@pytest.mark.parametrize("line", [DEEP_SAVE, DEEP_FIELDS], ids=["save", "update-fields"])
def test_a_line_nested_too_deeply_is_invalid_json(line: bytes) -> None:
    with Proc("config") as p:
        p.read_event()
        p.reject(line, "invalid JSON: nested too deeply")
        p.send({"type": "save"})
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["saved"] is True
        p.finish()


@pytest.mark.parametrize("line", [DEEP_SAVE, DEEP_FIELDS], ids=["save", "update-fields"])
def test_a_line_nested_too_deeply_is_invalid_json_through_spawn(line: bytes) -> None:
    with spawn("config", speed=0) as process:
        first = process.stdout.readline()
        process.stdin.write(line + b"\n")
        process.stdin.flush()
        rejected = process.stdout.readline()
        assert_rejected(first, rejected, "invalid JSON: nested too deeply")
        process.stdin.write(b'{"type":"quit"}\n')
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["done"] is True
        assert process.wait(10) == 0


def test_boundary_values_are_accepted() -> None:
    with Proc("config") as p:
        p.read_event()
        for key, value in [
            ("max_concurrent", "64"),
            ("max_concurrent", "1"),
            ("max_retries", "0"),
            ("max_retries", "10"),
        ]:
            p.send(update({key: value}))
            event = p.read_event()
            assert event["error"] == "", event
            assert values(event)[key] == value
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_command_not_allowed_names_state_editing() -> None:
    with Proc("config") as p:
        p.read_event()
        p.reject({"type": "download"}, 'command "download" not allowed in state editing')
        p.reject({"type": "_start"}, 'command "_start" not allowed in state editing')
        p.reject({"params": {}}, 'command "" not allowed in state editing')
        assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


@pytest.fixture(scope="module")
def reloading() -> Iterator[Proc]:
    """One config process shared by the reload_llm cases below: each empties a field
    and fills it again, so each ends where it began, the vm of the first event (which
    each asserts). When the module is done with it, it quits cleanly."""
    with Proc("config") as p:
        p.read_event()
        yield p
        p.send({"type": "quit"})
        done = p.read_until_done()
        assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0]), done
        p.finish()


@pytest.mark.parametrize("key", ["llm_provider", "llm_base_url", "llm_model", "llm_api_key"])
def test_reload_llm_reports_an_empty_llm_field_and_clears_when_filled(
    reloading: Proc, key: str
) -> None:
    p = reloading
    first = p.events[0]
    assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0]), "each case starts where it began"
    p.send({"type": "reload_llm"})
    ok = p.read_event()
    assert ok["vm"]["error"] == ""
    assert ok["error"] == ""
    assert vm_bytes(p.last_raw) == vm_bytes(p.raw[0])
    assert ok["waiting_for"] == WAITING_FOR

    p.send(update({key: ""}))
    emptied = p.read_event()
    assert emptied["error"] == ""
    assert emptied["vm"]["dirty"] is True
    p.send({"type": "reload_llm"})
    broken = p.read_event()
    assert broken["error"] == "", "reload_llm is accepted; the problem is in vm.error"
    assert broken["done"] is False
    assert broken["waiting_for"] == WAITING_FOR
    assert key in broken["vm"]["error"]
    assert values(broken)[key] == ""

    p.send(update({key: values(first)[key]}))
    p.read_event()
    p.send({"type": "reload_llm"})
    fixed = p.read_event()
    assert fixed["vm"]["error"] == ""
    assert fixed["vm"]["dirty"] is False


def test_reload_llm_ignores_non_llm_fields() -> None:
    with Proc("config") as p:
        p.read_event()
        p.send(update({"language": "", "doc_language": ""}))
        p.read_event()
        p.send({"type": "reload_llm"})
        assert p.read_event()["vm"]["error"] == ""
        p.send({"type": "quit"})
        p.read_until_done()
        p.finish()


def test_save_sets_saved_and_ends() -> None:
    with Proc("config") as p:
        p.read_event()
        p.send(update({"language": "zh", "max_retries": "5"}))
        edited = p.read_event()
        # save, then more lines in the same write: nothing may answer them.
        p.write(b'{"type":"save","params":{}}\n{"type":"update_fields"}\n{"type":"quit"}\n')
        done = p.read_event()
        assert done["done"] is True
        assert done["waiting_for"] == []
        assert done["error"] == ""
        assert done["vm"]["saved"] is True
        assert done["vm"]["dirty"] is True
        assert values(done) == values(edited)
        assert len(p.events) == 3
        p.finish()


def test_quit_ends_with_the_vm_as_it_stood() -> None:
    with Proc("config") as p:
        p.read_event()
        p.send(update({"llm_api_key": "sk-new"}))
        p.read_event()
        p.send({"type": "quit", "params": {}})
        done = p.read_event()
        assert done["done"] is True
        assert done["waiting_for"] == []
        assert done["error"] == ""
        assert done["vm"]["saved"] is False
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        p.finish()


def test_end_of_stdin_is_not_quit_and_saves_nothing() -> None:
    with Proc("config") as p:
        p.read_event()
        p.send(update({"language": "fr"}))
        p.read_event()
        p.close_stdin()
        p.wait_stderr(NOBODY_ANSWERS)
        p.assert_waiting()
        p.terminate()
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["saved"] is False
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        p.finish()


def test_unterminated_last_line_is_still_a_command() -> None:
    with Proc("config") as p:
        p.read_event()
        p.write(b'{"type":"save"}')
        p.close_stdin()
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["saved"] is True
        p.finish()


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
def test_signal_behaves_as_quit(signum: int) -> None:
    with Proc("config") as p:
        p.read_event()
        p.send(update({"language": "it"}))
        p.read_event()
        p.popen.send_signal(signum)
        done = p.read_event()
        assert done["done"] is True
        assert done["vm"]["saved"] is False
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        p.finish()


def test_reader_closing_stdout_ends_the_process_quietly() -> None:
    with Proc("config") as p:
        p.read_event()
        p.close_stdout()
        p.send(update({"language": "fr"}))
        p.wait(5)
        assert "Traceback" not in p.stderr
