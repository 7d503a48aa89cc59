"""Tests for simulator.tools.arguments: a tool's parser raises the tool's error."""

from __future__ import annotations

import pytest

from simulator.errors import ConfigurationError
from simulator.tools.arguments import raising


class ToolError(ConfigurationError):
    pass


def test_a_refused_argument_raises_the_tool_s_error_with_argparse_s_message() -> None:
    parser = raising(ToolError)(prog="zread-sim tool")
    parser.add_argument("--count", type=int)
    with pytest.raises(ToolError, match="argument --count: invalid int value: 'x'"):
        parser.parse_args(["--count", "x"])
    with pytest.raises(ToolError, match="unrecognized arguments: --nope"):
        parser.parse_args(["--nope"])
    assert parser.parse_args(["--count", "3"]).count == 3


def test_subcommands_raise_it_too_and_help_still_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = raising(ToolError)(prog="zread-sim tool")
    sub = parser.add_subparsers(dest="what", required=True, parser_class=raising(ToolError))
    sub.add_parser("one").add_argument("n", type=int)
    with pytest.raises(ToolError, match="argument n: invalid int value"):
        parser.parse_args(["one", "x"])
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--help"])
    assert exit_.value.code == 0 and "zread-sim tool" in capsys.readouterr().out


def test_one_class_per_error() -> None:
    assert raising(ToolError) is raising(ToolError)
    assert raising(ToolError) is not raising(ValueError)
