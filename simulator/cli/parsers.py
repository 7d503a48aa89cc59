"""The parser of each topic of the command line: the program, a zread command, ``help``
or one of ``zread-sim``'s own commands.

Owns: :func:`topic_parser` (zread's flags from the command's module, a simulator
command's arguments from its table entry, the simulator options where they are taken),
:func:`parsed_arguments`, and the argparse classes that never print: an error is a
:class:`~simulator.cli.options.UsageError` (one line), and ``--help`` makes
:func:`parsed_arguments` return the topic whose help was asked for, which the program
answers with its own text.

Must not: print, or run anything.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from typing import Any, NoReturn

from simulator.cli.commands import SUBCOMMANDS
from simulator.cli.options import ENVIRONMENT, UsageError, add_simulator_options
from simulator.launch import add_zread_flags
from statecharts import COMMANDS


class _HelpRequested(Exception):
    """``-h``/``--help`` was given: print the help of ``topic`` ("" is the program's)."""

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.topic = topic


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, which formats no text here (the help is this module's), with
    a fixed width: argparse makes one per flag added (to check its metavar), and left
    to itself each asks the terminal for its width, importing shutil to do so."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80)


class TopicParser(argparse.ArgumentParser):
    """Raises instead of printing: an error is one line, help is this module's text."""

    def __init__(self, topic: str, name: str) -> None:
        super().__init__(
            prog=f"{name} {topic}".strip(),
            add_help=False,
            allow_abbrev=False,
            formatter_class=_Formatter,
        )
        self.topic = topic
        self.add_argument(
            "-h", "--help", action=_HelpAction, nargs=0, help=f"help for {topic or name}"
        )

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.topic}: {message}" if self.topic else message)


class _HelpAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> NoReturn:
        raise _HelpRequested(parser.topic if isinstance(parser, TopicParser) else "")


def takes_simulator_options(topic: str) -> bool:
    """The program, zread's commands and ``install`` take the simulator options."""
    spec = SUBCOMMANDS.get(topic)
    return topic != "help" and (spec is None or spec.bakes_options)


def topic_parser(topic: str, name: str, *, with_simulator_options: bool = True) -> TopicParser:
    """The parser of ``topic``: "" (the program), a zread command, or a simulator one."""
    parser = TopicParser(topic, name)
    if not topic:
        parser.add_argument("-v", "--version", action="store_true", help=f"version for {name}")
    elif topic in COMMANDS:
        add_zread_flags(parser, topic)
    elif topic == "help":
        parser.add_argument("about", nargs="?", default="")
    else:
        arguments = SUBCOMMANDS[topic].arguments
        if arguments is not None:
            arguments(parser)
    if with_simulator_options and takes_simulator_options(topic):
        add_simulator_options(parser)
    return parser


@functools.lru_cache(maxsize=64)
def _built(topic: str, name: str) -> TopicParser:
    """:func:`topic_parser`, built once a process (a parse changes nothing in it): a
    client's launches served in-process each parse a command line, and building its
    parser costs more than the session it starts."""
    return topic_parser(topic, name)


def parsed_arguments(topic: str, name: str, argv: list[str]) -> argparse.Namespace | str:
    """``argv`` parsed by the parser of ``topic``; with ``-h``/``--help`` among them, the
    topic whose help was asked for instead ("" for the program's).

    ``version --stdio``, the line a client runs to find out what it talks to, gets the
    namespace that parser returns for it without the parser being built (eleven
    actions, a formatter made for each, and argparse's message catalogue looked up on
    disk): ``--stdio``, and every other option left to its default, None for each
    simulator option (then its variable). A test holds the two equal.
    """
    if topic == "version" and argv[1:] == ["--stdio"]:
        return argparse.Namespace(help=None, stdio=True, **dict.fromkeys(ENVIRONMENT))
    try:
        return _built(topic, name).parse_args(argv[1:] if topic else argv)
    except _HelpRequested as requested:
        return requested.topic
