"""Tests for simulator.core.godecode: command members, the quick way, the plans kept."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from simulator.core import goassign
from simulator.core.goassign import MISSING, Plan, fold, normalise
from simulator.core.godecode import NOT_QUICK, command_members, plan_of
from tests.core.test_goassign import Sample  # the one sample type of both modules


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


def test_the_rules_are_goassigns_and_a_plan_is_made_once_per_type() -> None:
    assert (MISSING, Plan, fold, normalise) == (
        goassign.MISSING,
        goassign.Plan,
        goassign.fold,
        goassign.normalise,
    )
    plan = plan_of(Sample)
    assert plan is plan_of(Sample)
    assert normalise(b'{"WORD":"w"}', plan.plan) == normalise(
        b'{"WORD":"w"}', goassign.plan_for(Sample)
    )
