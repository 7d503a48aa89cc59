"""Tests for simulator.core.command: a flag said once, beside the field it sets."""

from __future__ import annotations

from typing import Annotated

import pytest

from simulator.core.command import Examples, Flag, FlagField, flag_fields
from simulator.core.driver import Flags
from statecharts import COMMANDS, load_chart


def _port(text: str) -> int:
    return int(text)


class _Some(Flags, frozen=True):
    quick: Annotated[bool, Flag("-q", "--quick", help="go fast")] = False
    where: Annotated[str, Flag("--where", metavar="string", help="a place")] = "here"
    port: Annotated[int, Flag("--port", metavar="int", parse=_port, help="a port")] = 80
    unflagged: int = 3


def test_flag_fields_read_each_flag_with_its_fields_default_in_order() -> None:
    fields = flag_fields(_Some)
    assert [f.name for f in fields] == ["quick", "where", "port"]  # unflagged is no flag
    quick, where, port = fields
    assert quick == FlagField("quick", quick.flag, False, True)
    assert quick.flag.names == ("-q", "--quick") and quick.flag.help == "go fast"
    assert (where.default, where.switch, where.flag.metavar) == ("here", False, "string")
    assert port.flag.parse is _port and port.default == 80


def test_a_flag_is_frozen_and_keeps_what_it_was_given() -> None:
    flag = Flag("--draft", help="h", metavar="string", choices=("a", "b"))
    assert (flag.names, flag.choices, flag.parse) == (("--draft",), ("a", "b"), None)
    with pytest.raises(AttributeError):
        flag.help = "other"  # type: ignore[misc]


def test_the_base_flags_have_no_flag() -> None:
    assert flag_fields(Flags) == ()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_commands_flags_are_declared_once_with_help(command: str) -> None:
    fields = flag_fields(load_chart(command).flags_type)
    names = [name for f in fields for name in f.flag.names]
    assert len(names) == len(set(names)) and "--stdio" not in names
    assert all(f.flag.help for f in fields)


def test_examples_default_to_no_flags_and_no_scenario() -> None:
    examples = Examples()
    assert (examples.flags, dict(examples.scenarios), examples.flags_from_vm) == (((),), {}, None)
