"""What the simulator writes keeps no API key: by name in every spelling, by value
wherever a known key occurs, in lines, decoded JSON, texts and broken lines."""

from __future__ import annotations

import json
import re
import threading

import pytest

from simulator.core.keynames import REDACTED
from simulator.core.secrets import MAX_LEARNED, MIN_LENGTH, Secrets, redact, redact_line

KEY = "sk-SECRET-0123"
R = REDACTED.encode()


def any_spelling(value: str) -> re.Pattern[bytes]:
    """Written here apart from the code under test: each character raw, or a ``\\u``
    escape in either case behind any number of backslashes, or a short escape."""
    parts = []
    for char in value:
        escape = f"{ord(char):04x}"
        hexes = "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in escape)
        alternatives = [re.escape(char), r"\\+u" + hexes]
        if char in '/"\\':
            alternatives.append(r"\\+" + re.escape(char))
        parts.append("(?:" + "|".join(alternatives) + ")")
    return re.compile("".join(parts).encode())


def leaks(data: bytes, value: str = KEY) -> bool:
    return any_spelling(value).search(data) is not None


# -- by name -------------------------------------------------------------------------------


def test_a_command_setting_the_key_is_redacted_and_the_rest_kept() -> None:
    line = b'{"type":"update_fields","params":{"fields":{"llm_api_key":"sk-live-1","x":"y"}}}'
    out = json.loads(redact_line(line))
    assert out["params"]["fields"] == {"llm_api_key": REDACTED, "x": "y"}
    assert b"sk-live-1" not in redact_line(line)


NAMES = [
    "llm_api_key",
    "LLM_API_KEY",
    "Llm_Api_Key",
    "api_key",
    "llm_\\u0061pi_key",
    "llm_\\u0041PI_KEY",
    "llm_api\\u005fkey",
    "llm_api\\u005Fkey",
    "\\u006c\\u006c\\u006d\\u005f\\u0061\\u0070\\u0069\\u005f\\u006b\\u0065\\u0079",
    "llm_api_\u212aey",  # the Kelvin sign Go folds into k
    "llm_api_\\u212Aey",
]


@pytest.mark.parametrize("name", NAMES)
def test_every_spelling_of_the_name_is_a_key(name: str) -> None:
    line = ('{"type":"update_fields","params":{"fields":{"' + name + '":"' + KEY + '"}}}').encode()
    secrets = Secrets()
    out = secrets.redact_line(line)
    assert not leaks(out)
    assert out == line.replace(KEY.encode(), R)  # every other byte as it came
    assert secrets.values == (KEY,)


@pytest.mark.parametrize(
    "value",
    [
        "sk-\\u0053ECRET-0123",
        "sk-\\u0053\\u0045CRET-0123",
        "\\u0073\\u006B-SECRET-0123",
        "sk\\u002dSECRET-0123",
    ],
)
def test_an_escaped_value_is_hidden_and_learned_decoded(value: str) -> None:
    line = ('{"fields":{"llm_api_key":"' + value + '"},"note":"' + KEY + '"}').encode()
    secrets = Secrets()
    out = secrets.redact_line(line)
    assert not leaks(out)
    assert json.loads(out) == {"fields": {"llm_api_key": REDACTED}, "note": REDACTED}
    assert secrets.values == (KEY,)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"update_fields","params":{"fields":{"llm_api_key":"sk-3"',
        b'{"fields":{"api_key" : "sk-\\"3\\"-x"}} trailing',
        b'"{\\"llm_api_key\\":\\"sk-3\\"}" ,',
        b"{'type':'update_fields','params':{'fields':{'llm_api_key':'sk-3'}}}",
        b"{'llm_api_key': 'sk-3'}",
        b'{"llm_\\u0061pi_key":sk-3}',
        b"https://llm.example/v1?api_key=sk-3&x=1",
        b'api_key: "sk-3"',
        b'{"LLM_API_KEY":"sk-3' + b"\xff" + b'"',
    ],
)
def test_a_line_that_is_not_json_is_redacted_from_its_text(line: bytes) -> None:
    out = redact_line(line)
    assert b"sk-" not in out
    assert R in out


def test_a_line_nested_too_deep_is_redacted_from_its_text() -> None:
    line = b'{"api_key":"sk-4","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert b"sk-4" not in redact_line(line)


def test_a_json_string_holding_json_hides_the_key_at_every_depth() -> None:
    inner = json.dumps({"llm_api_key": KEY})
    twice = json.dumps({"note": json.dumps({"line": inner})}).encode()
    secrets = Secrets()
    out = secrets.redact_line(twice)
    assert not leaks(out) and secrets.values == (KEY,)
    assert json.loads(json.loads(json.loads(out)["note"])["line"]) == {"llm_api_key": REDACTED}


def test_each_of_two_values_under_one_key_twice_is_hidden() -> None:
    line = b'{"llm_api_key":"sk-AAAA","llm_api_key":"sk-BBBB"}'
    secrets = Secrets()
    assert secrets.redact_line(line) == b'{"llm_api_key":"***","llm_api_key":"***"}'
    assert set(secrets.values) == {"sk-AAAA", "sk-BBBB"}


def test_the_config_field_of_the_key_hides_its_value_and_initial() -> None:
    vm = {
        "fields": [
            {"title_key": "t", "json_key": "llm_model", "value": "m", "initial": "m"},
            {"title_key": "t", "json_key": "llm_api_key", "value": "sk-2", "initial": "sk-1"},
        ]
    }
    out = redact(vm)
    assert out["fields"][0] == vm["fields"][0]
    assert out["fields"][1]["value"] == out["fields"][1]["initial"] == REDACTED
    assert vm["fields"][1]["value"] == "sk-2"  # a new object: the original is kept
    line = json.dumps({"vm": vm}).replace("llm_api_key", "LLM_API_KEY").encode()
    secrets = Secrets()
    assert b"sk-2" not in secrets.redact_line(line) and b"sk-1" not in secrets.redact_line(line)


def test_a_short_value_is_hidden_by_name_but_not_looked_for_elsewhere() -> None:
    line = b'{"vm":{"json_key":"llm_api_key","value":"abc","other":"abc"}}'
    secrets = Secrets()
    out = json.loads(secrets.redact_line(line))
    assert out == {"vm": {"json_key": "llm_api_key", "value": REDACTED, "other": "abc"}}
    assert secrets.values == ()
    assert len("abc") < MIN_LENGTH
    assert secrets.redact_line(b'{"state":"abc"}') == b'{"state":"abc"}'


def test_every_string_under_the_key_is_hidden() -> None:
    line = b'{"llm_api_key":["sk-in-a-list",{"x":"sk-in-an-object"}],"n":1}'
    out = Secrets().redact_line(line)
    assert json.loads(out) == {"llm_api_key": [REDACTED, {"x": REDACTED}], "n": 1}


@pytest.mark.parametrize(
    "line",
    [
        b'{"fields":{"llm_api_key":""}}',
        b'{"llm_api_key":null}',
        b'{"api_key_hint":"sk-not-a-key"}',
        b"llm_api_key: expected a string",
        b'{"x":"\\u0026","y":"\\/"}',
        b'{"type":"save"}',
    ],
)
def test_what_holds_no_key_comes_back_as_it_is(line: bytes) -> None:
    assert redact_line(line) is line
    assert Secrets([KEY]).redact_line(line) is line


def test_a_redacted_line_differs_from_the_wire_only_in_the_secret() -> None:
    line = '{"vm":{"a":"<&>\u2028 é","n":2,"f":0.5,"llm_api_key":"sk-5"},"done":false}'.encode()
    line = line.replace("<&>\u2028".encode(), b"\\u003c\\u0026\\u003e\\u2028")
    assert redact_line(line) == line.replace(b"sk-5", R)


# -- by value --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelled",
    [
        KEY,
        "sk-\\u0053ECRET-0123",
        "sk-\\u0053\\u0045\\u0043RET-0123",
        "\\u0073\\u006b\\u002d\\u0053\\u0045\\u0043\\u0052\\u0045\\u0054\\u002d0123",
        "\\u0073\\u006B-SECRET-0123",
        "sk-\\\\u0053ECRET-0123",  # escaped again, inside a JSON string holding JSON
    ],
)
@pytest.mark.parametrize(
    "around",
    [
        '{{"type":"x","note":"{}"}}',
        "{{'type': 'x', 'note': '{}'",
        'invalid params: "{}" is not a model',
        "GET /v1/models?token={}&x=1",
    ],
)
def test_a_known_key_is_hidden_wherever_and_however_it_occurs(spelled: str, around: str) -> None:
    line = around.format(spelled).encode()
    out = Secrets([KEY]).redact_line(line)
    assert not leaks(out)
    assert out == line.replace(spelled.encode(), R)


def test_a_known_key_with_a_slash_a_quote_and_an_emoji_is_hidden_in_its_escapes() -> None:
    key = 'sk/"x"\\-\U0001f511-end'
    secrets = Secrets([key])
    for spelled in (
        json.dumps(key),
        json.dumps(key, ensure_ascii=False),
        json.dumps(key).replace("/", "\\/"),
        json.dumps(key).replace("\\ud83d\\udd11", "\\uD83D\\uDD11"),
        json.dumps(json.dumps(key)),
    ):
        out = secrets.redact_line(b'{"note":' + spelled.encode() + b"}")
        assert key.encode() not in out and b"\\ud83d\\udd11" not in out.lower(), spelled
        assert R in out


def test_a_value_inside_another_is_replaced_after_it() -> None:
    secrets = Secrets(["sk-AAAA", "sk-AAAA-BBBB"])
    assert secrets.values == ("sk-AAAA-BBBB", "sk-AAAA")
    assert secrets.redact_line(b"a sk-AAAA-BBBB b sk-AAAA") == b"a *** b ***"


def test_what_is_not_looked_for() -> None:
    secrets = Secrets(["", "abc", REDACTED, "\ud800lone"])
    assert not secrets.values
    secrets.add("sk-ok-1")
    secrets.add("sk-ok-1")
    assert list(secrets.values) == ["sk-ok-1"]


def test_the_registries_of_one_scenario_share_what_they_look_for() -> None:
    first, second = Secrets([KEY]), Secrets([KEY])
    assert first._known is second._known  # thousands of sessions: one compiled pattern
    second.add("sk-other-1")
    assert first.values == (KEY,)


def test_text_and_decoded_json_are_redacted_alike() -> None:
    secrets = Secrets([KEY])
    assert secrets.redact_text(f"journal /tmp/{KEY}: full") == "journal /tmp/***: full"
    text = "plain, no key"
    assert secrets.redact_text(text) is text
    raw = b"\xff" + KEY.encode()
    assert secrets.redact_text(raw.decode("utf-8", "surrogateescape")) == "\udcff***"
    answer = {"vm": {"llm_api_key": "sk-zz"}, "lines": [f"sent {KEY}"], "n": 1, "ok": True}
    assert secrets.redact(answer) == {
        "vm": {"llm_api_key": REDACTED},
        "lines": ["sent ***"],
        "n": 1,
        "ok": True,
    }


def test_threads_adding_at_once_lose_no_key() -> None:
    secrets = Secrets()
    keys = [f"sk-thread-{i:04d}" for i in range(MAX_LEARNED)]
    start = threading.Barrier(8)

    def add(part: list[str]) -> None:
        start.wait()
        for key in part:
            secrets.learn(f'{{"llm_api_key":"{key}"}}'.encode())

    threads = [threading.Thread(target=add, args=(keys[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(secrets.values) == keys


def test_a_registry_learns_at_most_the_last_keys_lines_named_and_keeps_those_given() -> None:
    given = "sk-given-0000000000"
    secrets = Secrets([given])
    secrets.add("sk-added-0000000000")
    for n in range(MAX_LEARNED + 10):
        secrets.learn(b'{"params":{"fields":{"llm_api_key":"sk-learned-%04d"}}}' % n)
    values = set(secrets.values)
    assert {given, "sk-added-0000000000"} <= values
    assert len(values) == 2 + MAX_LEARNED
    assert "sk-learned-0000" not in values  # the oldest learned are forgotten
    assert f"sk-learned-{MAX_LEARNED + 9:04d}" in values
    assert secrets.redact_text(f"x {given} y") == "x *** y"
