"""Tests for simulator.core.goassign: Go's key folding, and values rewritten as Go
assigns them."""

from __future__ import annotations

import unicodedata
from typing import Any

import msgspec
import pytest

from simulator.core.envelope import RejectedLine, decode_params
from simulator.core.goassign import (
    MISSING,
    StructPlan,
    fold,
    holds_struct,
    match,
    merges,
    normalise,
    plan_for,
)


@pytest.mark.parametrize(
    ("key", "folded"),
    [
        ("type", "type"),
        ("TYPE", "type"),
        ("tYpE", "type"),
        ("task_id", "task_id"),
        ("TASK_ID", "task_id"),
        ("\u212a", "k"),  # KELVIN SIGN
        ("\u017f", "s"),  # LATIN SMALL LETTER LONG S
        ("param\u017f", "params"),
        ("ta\u017f\u212a_id", "task_id"),
        ("\u0130", None),  # LATIN CAPITAL LETTER I WITH DOT ABOVE: not i
        ("\u0131", None),  # LATIN SMALL LETTER DOTLESS I: not i
        ("caf\u00e9", None),
        ("\u0430", None),  # CYRILLIC SMALL LETTER A: not a
        ("", ""),
        ("a-b_C1", "a-b_c1"),
    ],
)
def test_fold_is_gos_fold_for_ascii_names(key: str, folded: str | None) -> None:
    assert fold(key) == folded


def test_only_two_characters_outside_ascii_fold_into_ascii() -> None:
    # Go's sweep of every rune finds U+017F and U+212A alone. Python's case mappings also
    # take U+0130 and U+0131 to i and I, which Go's SimpleFold leaves alone ("has
    # lower/upper but no case fold", unicode's own tests): no other character may.
    into_ascii = set()
    for code in range(0x80, 0x110000):
        char = chr(code)
        if unicodedata.category(char) in ("Cs", "Cn"):
            continue
        if fold(char) is not None:
            into_ascii.add(char)
        for other in (char.lower(), char.upper(), char.casefold()):
            if len(other) == 1 and other.isascii() and other.isalpha():
                assert char in ("\u212a", "\u017f", "\u0130", "\u0131"), hex(code)
    assert into_ascii == {"\u212a", "\u017f"}


def test_an_exact_name_wins_over_a_folded_one() -> None:
    names = {"name": "name", "NAME": "NAME"}
    folded = {"name": "name"}  # the first declared of the two
    assert match(names, folded, "NAME") == "NAME"
    assert match(names, folded, "Name") == "name"
    assert match(names, folded, "na\u212ae") is None
    assert match(names, folded, "other") is None


class Inner(msgspec.Struct):
    n: int


class Sample(msgspec.Struct):
    word: str
    inner: Inner
    table: dict[str, str] = msgspec.field(default_factory=dict)
    seq: list[Inner] = msgspec.field(default_factory=list)
    loose: Any = None
    stamp: msgspec.Raw = msgspec.Raw(b"0")


@pytest.mark.parametrize(
    ("raw", "rewritten"),
    [
        (b"{}", b'{"word":"","inner":{"n":0}}'),
        (b'{"WORD":"w","Inner":{"N":2,"x":1}}', b'{"word":"w","inner":{"n":2}}'),
        (
            b'{"table":{"A":"1"},"TABLE":{"b":null}}',
            b'{"word":"","inner":{"n":0},"table":{"A":"1","b":""}}',
        ),
        (b'{"seq":[{},null]}', b'{"word":"","inner":{"n":0},"seq":[{"n":0},{"n":0}]}'),
        (b'{"loose":[1.50,{"a":1,"a":2}]}', b'{"word":"","inner":{"n":0},"loose":[1.50,{"a":2}]}'),
        (b'{"word":5}', b'{"word":5,"inner":{"n":0}}'),
        (b"[1]", b"[1]"),
        (b"null", b'{"word":"","inner":{"n":0}}'),
    ],
)
def test_normalise_writes_what_go_would_assign(raw: bytes, rewritten: bytes) -> None:
    assert normalise(raw, plan_for(Sample)) == rewritten


def test_a_type_without_a_known_zero_is_left_to_msgspec() -> None:
    class Odd(msgspec.Struct):
        stamp: msgspec.Raw

    assert normalise(b"{}", plan_for(Odd)) == b"{}"
    assert plan_for(Odd).zero() == {}
    assert plan_for(Inner).fields["n"].zero() == 0  # type: ignore[attr-defined]
    assert plan_for(Odd).fields["stamp"].zero() is MISSING  # type: ignore[attr-defined]


def test_what_a_plan_holds_and_merges() -> None:
    plan = plan_for(Sample)
    assert isinstance(plan, StructPlan) and holds_struct(plan)
    assert [name for name, field in plan.fields.items() if merges(field)] == ["table", "seq"]
    assert not holds_struct(plan_for(dict[str, int])) and merges(plan_for(list[int] | None))
    assert holds_struct(plan_for(list[Inner] | None))


DEEP = 900
"""Levels a line may nest under a field (the decoder goes to about 1000)."""


def test_a_value_nested_900_deep_is_rewritten_whole() -> None:
    deep = b"[" * DEEP + b'{"a":1,"b":2,"a":3}' + b"]" * DEEP
    rewritten = normalise(b'{"loose":' + deep + b',"Word":"w"}', plan_for(Sample))
    expected = b'{"word":"w","inner":{"n":0},"loose":' + deep.replace(b'"a":1,', b"") + b"}"
    expected = expected.replace(b'"b":2,"a":3', b'"a":3,"b":2')  # the first place, the last value
    assert rewritten == expected


class Act(msgspec.Struct):
    action: str = ""


class Fields(msgspec.Struct):
    fields: dict[str, str] = msgspec.field(default_factory=dict)


@pytest.mark.parametrize(
    ("params", "params_type", "reason"),
    [
        (b'{"Action":%s}', Act, "expected `str`, got `array` - at `$.action`"),
        (b'{"fields":{"x":%s}}', Fields, 'expected `str`, got `array` - at `$.fields["x"]`'),
    ],
)
def test_params_nested_900_deep_under_a_known_field_are_a_type_error(
    params: bytes, params_type: type, reason: str
) -> None:
    """Not "nested too deeply": the rewriting takes no stack frame per level."""
    with pytest.raises(RejectedLine) as caught:
        decode_params(params % (b"[" * DEEP + b"]" * DEEP), params_type)
    assert caught.value.text == f"invalid params: {reason}"
