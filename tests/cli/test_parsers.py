"""Tests for simulator.cli.parsers: each topic's parser, errors raised, help requested."""

from __future__ import annotations

import pytest

from simulator.cli.options import ENVIRONMENT, UsageError
from simulator.cli.parsers import (
    parsed_arguments,
    takes_simulator_options,
    topic_parser,
)
from statecharts import COMMANDS


@pytest.mark.parametrize("name", ["zread", "zread-sim"])
def test_version_stdio_is_parsed_as_its_parser_parses_it(name: str) -> None:
    """``version --stdio`` skips building its parser: what it gets is what that parser
    returns for it, every option there with the same value, in the same order."""
    argv = ["version", "--stdio"]
    expected = vars(topic_parser("version", name).parse_args(argv[1:]))
    assert vars(parsed_arguments("version", name, argv)) == expected
    assert list(vars(parsed_arguments("version", name, argv))) == list(expected)


def test_which_topics_take_the_simulator_options() -> None:
    assert takes_simulator_options("") and takes_simulator_options("install")
    assert all(takes_simulator_options(command) for command in COMMANDS)
    for topic in ("help", "journal", "scenarios", "load", "paths"):
        assert not takes_simulator_options(topic)
    options = {f"--{o}" for o in ENVIRONMENT if o != "files"} | {"--no-files"}
    generate = {o for a in topic_parser("generate", "zread")._actions for o in a.option_strings}
    assert options <= generate and {"-y", "--draft", "--stdio"} <= generate
    journal = {o for a in topic_parser("journal", "zread-sim")._actions for o in a.option_strings}
    assert journal == {"-h", "--help", "--summary", "--json"}


def test_an_error_is_a_usage_error_naming_the_topic() -> None:
    with pytest.raises(UsageError, match=r"^generate: unrecognized arguments: --nope$"):
        parsed_arguments("generate", "zread", ["generate", "--nope"])
    with pytest.raises(UsageError, match=r"^unrecognized arguments: --nope$"):
        parsed_arguments("", "zread", ["--nope"])


@pytest.mark.parametrize("topic", ["", "generate", "journal"])
def test_help_is_requested_not_printed(topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [topic, "--help"] if topic else ["-h"]
    assert parsed_arguments(topic, "zread-sim", argv) == topic
    assert parsed_arguments("install", "zread-sim", ["install", "-h"]) == "install"  # no DIR
    assert capsys.readouterr() == ("", "")
