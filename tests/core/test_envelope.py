"""Tests for simulator.core.envelope: command decoding as Go decodes (event bytes:
test_eventbytes.py)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from simulator.core.envelope import (
    Command,
    RejectedLine,
    decode_command,
    decode_params,
    not_allowed,
)
from simulator.core.goassign import normalise
from simulator.core.godecode import plan_of
from statecharts import COMMANDS, load_chart


class Params(msgspec.Struct):
    name: str
    sizes: list[int] = msgspec.field(default_factory=list)


def rejected(line: bytes) -> str:
    with pytest.raises(RejectedLine) as info:
        decode_command(line)
    return info.value.text


# -- decode_command ---------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"nope",
        b"{",
        b'{"type":"quit"',
        b'{"type":"quit"} trailing',
        b"[]",
        b'[{"type":"quit"}]',
        b"42",
        b"-1.5",
        b'"quit"',
        b"true",
        b"null",
    ],
)
def test_not_a_json_object_is_invalid_json(line: bytes) -> None:
    text = rejected(line)
    assert text.startswith("invalid JSON: ")
    assert len(text) > len("invalid JSON: ")


@pytest.mark.parametrize(
    "line",
    [b"\xff", b'{"type":"qu\xffit"}', b'{"type":"quit","params":{"a":"\xc3"}}', b"\xed\xa0\x80"],
)
def test_invalid_utf8_is_invalid_json(line: bytes) -> None:
    assert rejected(line).startswith("invalid JSON: ")


DEEP = 100_000
"""Far deeper than the decoder can go on any stack (the recursion limit is about 1000)."""


def nested(depth: int = DEEP) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"type":"save","params":' + nested() + b"}", id="in-params"),
        pytest.param(b'{"type":' + nested() + b"}", id="in-type"),
        pytest.param(b'{"type":"save","x":' + nested() + b"}", id="in-an-unknown-key"),
        pytest.param(b'{"a":' * DEEP + b"1" + b"}" * DEEP, id="objects"),
        pytest.param(b'{"type":"save","params":' + b"[" * DEEP, id="unterminated"),
    ],
)
def test_nesting_too_deep_is_invalid_json(line: bytes) -> None:
    assert rejected(line) == "invalid JSON: nested too deeply"


def test_invalid_utf8_reason_mentions_utf8() -> None:
    assert "UTF-8" in rejected(b'{"type":"\xfe"}')


def test_rejected_line_text_is_the_message() -> None:
    with pytest.raises(RejectedLine) as info:
        decode_command(b"[1]")
    assert str(info.value) == info.value.text


def test_plain_command() -> None:
    command = decode_command(b'{"type":"download"}')
    assert command == Command("download", b"{}")


def test_type_missing_is_empty() -> None:
    assert decode_command(b"{}").type == ""
    assert decode_command(b'{"params":{"a":1}}').type == ""


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"type":7}', "7"),
        (b'{"type":true}', "true"),
        (b'{"type":[1,2]}', "[1,2]"),
        (b'{"type":{"a":1}}', '{"a":1}'),
        (b'{"type":-0.5}', "-0.5"),
    ],
)
def test_type_not_a_string_comes_back_as_its_json_text(line: bytes, expected: str) -> None:
    assert decode_command(line).type == expected


def test_type_string_escapes_are_decoded() -> None:
    assert decode_command(b'{"type":"\\u0071uit"}').type == "quit"
    assert decode_command(b'{"type":"\\ud83d\\ude00"}').type == "\U0001f600"


@pytest.mark.parametrize("line", [b'{"type":"x"}', b'{"type":"x","params":null}'])
def test_params_omitted_or_null_is_empty_object(line: bytes) -> None:
    assert msgspec.json.decode(decode_command(line).params) == {}


def test_params_are_passed_through_raw() -> None:
    command = decode_command(b'{"type":"x","params":{"name":"a","sizes":[1, 2]}}')
    assert msgspec.json.decode(command.params) == {"name": "a", "sizes": [1, 2]}


def test_params_not_an_object_is_left_to_decode_params() -> None:
    command = decode_command(b'{"type":"x","params":[1]}')
    with pytest.raises(RejectedLine) as info:
        decode_params(command.params, Params)
    assert info.value.text.startswith("invalid params: ")


def test_unknown_top_level_keys_are_ignored() -> None:
    assert decode_command(b'{"id":9,"type":"quit","extra":[1]}').type == "quit"


def test_surrounding_whitespace_is_accepted() -> None:
    assert decode_command(b' \t{"type":"quit"}\r').type == "quit"


# -- decode_params ----------------------------------------------------------------


def test_decode_params_valid_and_unknown_keys_ignored() -> None:
    params = decode_params(b'{"name":"n","sizes":[1,2],"colour":"red"}', Params)
    assert params == Params("n", [1, 2])


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (b'{"name":5}', "$.name"),
        (b'{"name":"n","sizes":"x"}', "$.sizes"),
        (b'{"name":"n","sizes":[1,"x"]}', "$.sizes[1]"),
    ],
)
def test_decode_params_wrong_type_names_the_path(raw: bytes, path: str) -> None:
    with pytest.raises(RejectedLine) as info:
        decode_params(raw, Params)
    assert info.value.text.startswith("invalid params: ")
    assert path in info.value.text


class MapParams(msgspec.Struct):
    fields: dict[str, str]
    rows: list[dict[str, int]] = []


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"fields":{"a":"x","max_retries":5}}', '$.fields["max_retries"]'),
        (b'{"fields":{"llm.model":true}}', '$.fields["llm.model"]'),
        (b'{"fields":{"<&>":1}}', '$.fields["\\u003c\\u0026\\u003e"]'),
        (b'{"fields":{},"rows":[{"a":1},{"b":1,"c":"x"}]}', '$.rows[1]["c"]'),
    ],
)
def test_decode_params_names_the_key_of_a_map_value(raw: bytes, where: str) -> None:
    with pytest.raises(RejectedLine) as info:
        decode_params(raw, MapParams)
    assert info.value.text.endswith(f" - at `{where}`")
    assert "[...]" not in info.value.text


@pytest.mark.parametrize(
    ("line", "value"),
    [
        (b'{"type":"q","x":"\\ud800"}', "\ufffd"),
        (b'{"type":"q\\udfff"}', "q\ufffd"),
        (b'{"type":"\\ud83d\\ude00"}', "\U0001f600"),
        (b'{"type":"\\\\ud800"}', "\\ud800"),
        (b'{"type":"\\ud800\\u0041"}', "\ufffdA"),
    ],
)
def test_an_escaped_lone_surrogate_is_u_fffd_as_go_reads_it(line: bytes, value: str) -> None:
    command = decode_command(line)
    if "x" in line.decode():
        assert command.type == "q"
    else:
        assert command.type == value


def test_a_lone_surrogate_in_a_line_that_is_bad_anyway_gives_the_other_reason() -> None:
    with pytest.raises(RejectedLine) as info:
        decode_command(b'{"type":"\\ud800",}')
    assert info.value.text.startswith("invalid JSON: ")
    assert "truncated" not in info.value.text


@pytest.mark.parametrize("raw", [b"[1]", b"3", b'"s"', b"true"])
def test_decode_params_not_an_object(raw: bytes) -> None:
    with pytest.raises(RejectedLine) as info:
        decode_params(raw, Params)
    assert info.value.text.startswith("invalid params: expected `object`, got ")


@pytest.mark.parametrize("raw", [b"null1", b'{"Name":', b'{"name":"\\ud800"', b"\xff"])
def test_decode_params_not_json_is_invalid_json(raw: bytes) -> None:
    # decode_command hands on only params that are JSON; a caller that does not learns why.
    with pytest.raises(RejectedLine) as info:
        decode_params(raw, Params)
    assert info.value.text.startswith("invalid JSON: ")


def test_a_missing_field_is_its_zero_value_as_go_leaves_it() -> None:
    assert decode_params(b'{"sizes":[]}', Params) == Params("", [])
    assert decode_params(b"{}", Params) == Params("", [])


class Loose(msgspec.Struct):
    name: str
    data: Any = None


@pytest.mark.parametrize(
    ("raw", "params_type"),
    [
        pytest.param(b'{"name":"n","colour":' + nested() + b"}", Params, id="an-unknown-key"),
        pytest.param(b'{"name":"n","data":' + nested() + b"}", Loose, id="an-any-field"),
        pytest.param(b'{"a":' * DEEP + b"1" + b"}" * DEEP, dict[str, Any], id="a-dict"),
    ],
)
def test_decode_params_nesting_too_deep_is_invalid_json(raw: bytes, params_type: Any) -> None:
    # decode_params runs on a deeper stack than decode_command: params that got past
    # decode_command can still be too deep here, and must say the same.
    with pytest.raises(RejectedLine) as info:
        decode_params(raw, params_type)
    assert info.value.text == "invalid JSON: nested too deeply"


# -- not_allowed ------------------------------------------------------------------


def test_not_allowed_text() -> None:
    assert not_allowed("fly", "editing") == 'command "fly" not allowed in state editing'
    assert not_allowed("", "waiting") == 'command "" not allowed in state waiting'


# -- Go's decoder: the table of docs/fidelity.md section 3 --------------------------------

FIDELITY = Path(__file__).resolve().parents[2] / "docs" / "fidelity.md"
TABLE_HEADER = "| line | type | params, decoded, or the error | |"


class NoParams(msgspec.Struct):
    """What the session decodes the params of a command without any into."""


def params_type_of(command_type: str) -> Any:
    """The params struct of ``command_type`` in the chart that has it; NoParams if none."""
    for command in COMMANDS:
        spec = load_chart(command).commands.get(command_type)
        if spec is not None:
            return spec.params or NoParams
    return NoParams


def code_span(cell: str) -> str:
    """The text of a markdown code span: `x`, or ``x `` when it holds backticks."""
    cell = cell.strip()
    if cell.startswith("``"):
        return cell.removeprefix("`` ").removeprefix("``").removesuffix(" ``").strip()
    assert cell.startswith("`") and cell.endswith("`"), cell
    return cell[1:-1]


def go_table() -> list[tuple[str, str, str]]:
    """(line, type as JSON, params as JSON or the error) of each row of the table."""
    lines = FIDELITY.read_text(encoding="utf-8").splitlines()
    start = lines.index(TABLE_HEADER) + 2
    rows = []
    for row in itertools.takewhile(lambda text: text.startswith("| "), lines[start:]):
        cells = row.strip().strip("|").split(" | ")
        rows.append((code_span(cells[0]), code_span(cells[1]), code_span(cells[2])))
    return rows


GO_TABLE = go_table()


def test_the_go_table_is_there_and_covers_every_rule() -> None:
    lines = [line for line, _, _ in GO_TABLE]
    assert len(lines) >= 25
    assert any("\u212a" in line for line in lines) and any("\u017f" in line for line in lines)
    assert any("\\u" in line for line in lines) and any("null" in line for line in lines)
    assert any(result.startswith("invalid params: ") for _, _, result in GO_TABLE)


@pytest.mark.parametrize(("line", "type_json", "result"), GO_TABLE, ids=[r[0] for r in GO_TABLE])
def test_every_row_of_the_go_table(line: str, type_json: str, result: str) -> None:
    command = decode_command(line.encode())
    assert command.type == json.loads(type_json)
    params_type = params_type_of(command.type)
    if result.startswith("invalid params: "):
        with pytest.raises(RejectedLine) as info:
            decode_params(command.params, params_type)
        assert info.value.text == result
    else:
        assert msgspec.json.encode(decode_params(command.params, params_type)) == result.encode()


# -- Go's decoder: what zread's structs do not show ----------------------------------------


class Inner(msgspec.Struct):
    a: int = 0
    b: str = ""


class Rich(msgspec.Struct):
    name: str
    sizes: list[int] = msgspec.field(default_factory=list)
    inner: Inner = msgspec.field(default_factory=Inner)
    maybe: Inner | None = None
    anything: Any = None
    tags: dict[str, list[int]] = msgspec.field(default_factory=dict)
    items: list[Inner] = msgspec.field(default_factory=list)
    ok: bool = False
    ratio: float = 0.0
    kind: str = ""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(b'{"name":null}', Rich(""), id="a null string is empty"),
        pytest.param(b'{"ok":null,"ratio":null}', Rich(""), id="null bool and float are zero"),
        pytest.param(b'{"sizes":null}', Rich(""), id="a null list is empty"),
        pytest.param(b'{"sizes":[1,2],"sizes":null}', Rich(""), id="null empties a list"),
        pytest.param(b'{"sizes":[1,null]}', Rich("", [1, 0]), id="a null element is zero"),
        pytest.param(b'{"sizes":[1,2],"sizes":[null]}', Rich("", [1]), id="reused element"),
        pytest.param(b'{"inner":null}', Rich(""), id="a null object is a zero struct"),
        pytest.param(
            b'{"inner":{"a":1},"inner":null}', Rich("", inner=Inner(1)), id="null leaves a struct"
        ),
        pytest.param(
            b'{"inner":{"a":1},"INNER":{"b":"x"}}',
            Rich("", inner=Inner(1, "x")),
            id="a struct is merged into",
        ),
        pytest.param(b'{"maybe":{"A":2}}', Rich("", maybe=Inner(2)), id="an optional struct"),
        pytest.param(b'{"maybe":{"a":2},"maybe":null}', Rich(""), id="null clears a pointer"),
        pytest.param(
            b'{"anything":{"K":1,"k":2}}', Rich("", anything={"K": 1, "k": 2}), id="any: exact"
        ),
        pytest.param(b'{"anything":1,"Anything":null}', Rich(""), id="null clears an any"),
        pytest.param(
            b'{"tags":{"x":null,"X":[1]}}', Rich("", tags={"x": [], "X": [1]}), id="map keys"
        ),
        pytest.param(
            b'{"items":[{"a":1}],"items":[{"b":"y"},{"A":3}]}',
            Rich("", items=[Inner(1, "y"), Inner(3)]),
            id="list elements are decoded into",
        ),
        pytest.param('{"\u212aind":"x"}'.encode(), Rich("", kind="x"), id="kelvin sign"),
        pytest.param(b'{"\\u212aIND":"x"}', Rich("", kind="x"), id="escaped kelvin sign"),
        pytest.param('{"nam\u0117":"x"}'.encode(), Rich(""), id="other letters do not fold"),
        pytest.param(
            b'{"Anything":123456789012345678901234567890,"RATIO":25e-1}',
            Rich("", anything=123456789012345678901234567890, ratio=2.5),
            id="numbers as sent",
        ),
    ],
)
def test_go_zero_values_and_merging(raw: bytes, expected: Rich) -> None:
    assert decode_params(raw, Rich) == expected


class Twins(msgspec.Struct):
    """Two fields that differ only in case, as no struct of zread's has."""

    title: str = ""
    TITLE: str = ""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"title":"t"}', Twins("t", "")),
        (b'{"TITLE":"T"}', Twins("", "T")),
        (b'{"Title":"x"}', Twins("x", "")),  # folded: the first declared
        (b'{"title":"exact","tItLe":"folded"}', Twins("folded", "")),
        (b'{"TITLE":"T","Title":"x","title":"t"}', Twins("t", "T")),
    ],
)
def test_an_exact_name_wins_and_a_fold_takes_the_first_field(raw: bytes, expected: Twins) -> None:
    assert decode_params(raw, Twins) == expected


@pytest.mark.parametrize(
    ("line", "command"),
    [
        (b'{"PaRaMs":{"a":1},"TyPe":"x"}', Command("x", b'{"a":1}')),
        (b'{"type":"x","params":{"a":1},"Params":null}', Command("x", b"{}")),
        (b'{"type":"x","params":{"a":1},"PARAMS":[2]}', Command("x", b"[2]")),
        (b'{"type":"x","Type":7}', Command("7", b"{}")),
        (b'{"Type":[1, 2]}', Command("[1, 2]", b"{}")),
        (b'{"type":"quit","type":"save"}', Command("save", b"{}")),
        (b'{"type":"a","type":null,"type":null}', Command("a", b"{}")),
        (b'{"Type":null}', Command("", b"{}")),
        (b'{"TYPE":"\\u0071uit","x":"\\ud800"}', Command("quit", b"{}")),
        (b' {"tYpE" : "save" , "Params" : { } } ', Command("save", b"{ }")),
        (b'{"\\u0054ype":"quit"}', Command("quit", b"{}")),
        ('{"type":"x","p\u0430rams":{"a":1}}'.encode(), Command("x", b"{}")),  # Cyrillic a
        (b'{"types":"x","param":{}}', Command("", b"{}")),
    ],
)
def test_command_keys_as_go_assigns_them(line: bytes, command: Command) -> None:
    assert decode_command(line) == command


@pytest.mark.parametrize(
    "line",
    [
        b'{"Type":"quit"',
        b'{"Type":"quit",}',
        b'{"Type":"quit"} x',
        b'{"Type":' + nested() + b"}",
        b'{"Type":"\\ud800",}',
    ],
)
def test_a_line_with_other_keys_is_still_refused_when_it_is_not_json(line: bytes) -> None:
    text = rejected(line)
    assert text.startswith("invalid JSON: ")
    assert PYTHON_PHRASES.search(text) is None, text


PYTHON_PHRASES = re.compile(
    r"Traceback|Error\b|Expecting|line \d+ column|char \d+|int\(\)|sys\.|"
    r"set_int_max_str_digits|object has no|NoneType|not subscriptable|codec"
)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"Task_ID":' + b"9" * 5000 + b"}",
        b'{"task_id":-' + b"9" * 5000 + b".5}",
        b'{"TASK_ID":1e999999}',
        b'{"task_id":"\\ud800"}',
        b'{"Task_id":[' * 3000 + b"]" * 3000 + b"}",
        b'{"task_id":{"a":null}}',
        b'{"task_id":true,"task_id":null}',
    ],
)
def test_a_refused_params_speaks_the_simulators_words(raw: bytes) -> None:
    class Retry(msgspec.Struct):
        task_id: int

    with pytest.raises(RejectedLine) as info:
        decode_params(raw, Retry)
    text = info.value.text
    assert text.startswith(("invalid params: ", "invalid JSON: ")), text
    assert PYTHON_PHRASES.search(text) is None, text
    assert "task_id" in text or text.startswith("invalid JSON: "), text


class Plain(msgspec.Struct):
    """A struct of fields that hold no struct, as every params struct of zread's."""

    name: str
    sizes: list[int] = msgspec.field(default_factory=list)
    anything: Any = None
    tags: dict[str, list[int]] = msgspec.field(default_factory=dict)
    ok: bool = False
    ratio: float = 0.0
    kind: str = ""


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name":"n","sizes":[1,2]}',
        b'{"name":"N","ok":true,"ratio":0.5,"kind":"K"}',
        b'{"name":"\\"q\\"","tags":{"a":[1],"A":[]}}',
        '{"name":"\u4e2d\u6587","anything":{"a":2}}'.encode(),
        b'{"name":"name","name":"again","anything":{"x":[1,{"y":null}]}}',
        b'{"name":"n","anything":null}',
    ],
)
def test_the_quick_way_and_gos_rules_agree_on_exact_keys(raw: bytes) -> None:
    # Params spelled exactly take msgspec's way alone; Go's rules by hand give the same.
    plan = plan_of(Plain)
    quick = plan.quick(raw)
    assert type(quick) is Plain
    assert quick == plan.decoder.decode(normalise(raw, plan.plan)) == decode_params(raw, Plain)


@pytest.mark.parametrize(
    "params",
    [b'{"fields":{"language":1e999}}', b'{"Fields":{"x":[-1e400]}}', b'{"fields":{"a":1e999}}'],
)
def test_a_number_out_of_range_under_a_map_key_is_a_rejected_line(params: bytes) -> None:
    from statecharts.config import UpdateFields

    with pytest.raises(RejectedLine, match=r"^invalid params: .* - at `\$\.fields\[\.\.\.\]`$"):
        decode_params(params, UpdateFields)


# -- the face of the event bytes ------------------------------------------------------
