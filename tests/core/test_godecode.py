"""Tests for simulator.core.godecode: Go's key folding, command members, params rewriting."""

from __future__ import annotations

import unicodedata
from typing import Any

import msgspec
import pytest

from simulator.core.godecode import (
    MISSING,
    NOT_QUICK,
    command_members,
    fold,
    normalise,
    plan_of,
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


@pytest.mark.parametrize(
    ("line", "members"),
    [
        ('{"type":"quit"}', ('"quit"', "")),
        ("{}", ("", "")),
        (' { "Type" : 5 , "params" : [1, 2] } ', ("5", "[1, 2]")),
        ('{"type":"a","TYPE":null}', ('"a"', "")),
        ('{"params":{"x":1},"Params":null}', ("", "null")),
        ('{"x":{"type":"no"},"type":"yes"}', ('"yes"', "")),
        ('{"t\\u0079pe":"q"}', ('"q"', "")),
        ('{"typ\u0130":"q"}', ("", "")),
    ],
)
def test_command_members_are_the_json_text_go_assigns(line: str, members: tuple[str, str]) -> None:
    assert command_members(line) == members


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
    assert normalise(raw, plan_of(Sample).plan) == rewritten


def test_a_type_without_a_known_zero_is_left_to_msgspec() -> None:
    class Odd(msgspec.Struct):
        stamp: msgspec.Raw

    assert normalise(b"{}", plan_of(Odd).plan) == b"{}"
    assert plan_of(Odd).plan.zero() == {}
    assert plan_of(Inner).plan.fields["n"].zero() == 0  # type: ignore[attr-defined]
    assert plan_of(Odd).plan.fields["stamp"].zero() is MISSING  # type: ignore[attr-defined]


def test_a_type_whose_structs_hold_structs_always_takes_gos_rules() -> None:
    # (none of zread's does): the quick way is for structs of plain fields
    assert plan_of(Sample).quick(b'{"word":"w","inner":{"n":1}}') is NOT_QUICK


@pytest.mark.parametrize(
    ("params_type", "raw", "quick"),
    [
        (dict[str, int], b'{"A":1,"a":2}', {"A": 1, "a": 2}),
        (dict[str, int], b'{"a":null}', NOT_QUICK),
        (list[int], b"[1,2]", [1, 2]),
    ],
)
def test_a_type_without_structs_is_read_by_msgspec(
    params_type: Any, raw: bytes, quick: Any
) -> None:
    assert plan_of(params_type).quick(raw) == quick


def test_a_struct_without_fields_takes_any_object_quickly() -> None:
    class Empty(msgspec.Struct):
        pass

    assert plan_of(Empty).quick(b'{"X":1,"\\u0058":null}') == Empty()
    assert plan_of(Empty).quick(b"[1]") is NOT_QUICK
    assert plan_of(Empty) is plan_of(Empty)


class Flat(msgspec.Struct):
    name: str
    count: int = 0
    table: dict[str, str] = msgspec.field(default_factory=dict)


class KeywordsOnly(msgspec.Struct, kw_only=True):
    name: str = ""


@pytest.mark.parametrize(
    ("raw", "quick"),
    [
        (b'{"name":"n"}', Flat("n")),
        (b'{"name":"N","count":2,"table":{"A":"B"}}', Flat("N", 2, {"A": "B"})),
        (b'{"n\\u0061me":"n"}', Flat("n")),  # an escape spelling the name exactly
        (b'{"name":"n","name":"m"}', Flat("m")),  # a string twice: the last, as in Go
        (b'{"Name":"n"}', NOT_QUICK),
        (b'{"name":"n","extra":1}', NOT_QUICK),
        (b'{"name":null}', NOT_QUICK),
        (b"{}", NOT_QUICK),
        (b'{"name":5}', NOT_QUICK),
        (b'{"name":"n","table":{},"table":{"a":"b"}}', NOT_QUICK),  # Go merges a map
    ],
)
def test_the_quick_way_takes_only_what_msgspec_reads_as_go(raw: bytes, quick: Any) -> None:
    value = plan_of(Flat).quick(raw)
    assert value == quick
    assert value is NOT_QUICK or type(value) is Flat  # the type itself, not a subclass


def test_the_quick_way_builds_a_keyword_only_struct() -> None:
    value = plan_of(KeywordsOnly).quick(b'{"name":"n"}')
    assert value == KeywordsOnly(name="n")
    assert type(value) is KeywordsOnly
