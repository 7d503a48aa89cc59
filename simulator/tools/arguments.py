"""The argument parser of every ``zread-sim`` tool: argparse, with errors as exceptions.

Owns: :func:`raising`, the ``argparse.ArgumentParser`` class whose ``error`` raises the
tool's own error (a :class:`~simulator.errors.ConfigurationError`) with argparse's
message, instead of printing the usage and exiting: each tool says it in one line,
``zread-sim TOOL: <message>``, and exits 2. ``--help`` still prints and exits 0, in
cobra's layout as every help of the program (:mod:`simulator.cobra`).

Must not: print anything, or know any tool's arguments.
"""

from __future__ import annotations

import functools
from typing import NoReturn

from simulator.cobra import CobraHelp


@functools.cache
def raising(error: type[Exception]) -> type[CobraHelp]:
    """The parser class whose errors raise ``error(message)``: one class per error, so
    ``add_subparsers(parser_class=raising(E))`` makes subcommands that raise it too."""

    class Parser(CobraHelp):
        def error(self, message: str) -> NoReturn:
            raise error(message)

    Parser.__name__ = Parser.__qualname__ = f"ParserRaising{error.__name__}"
    return Parser
