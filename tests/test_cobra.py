"""Tests for simulator.cobra: help texts in cobra's layout, from argparse's actions."""

from __future__ import annotations

import argparse

from simulator.cobra import CobraHelp, command_lines, flag_usages, help_page


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-y", "--yes", action="store_true", help="do it")
    parser.add_argument("--port", metavar="int", type=int, default=9681, help="a port")
    parser.add_argument("--name", default="ada", help="a name")
    parser.add_argument("--format", choices=("a", "b"), default="a")
    parser.add_argument("--quiet", help=argparse.SUPPRESS)
    parser.add_argument("file")
    return parser


def test_flags_are_pflags_columns_sorted_by_name_with_defaults_hidden_ones_left_out() -> None:
    assert flag_usages(_parser()._actions) == [
        '      --format string   one of a, b (default "a")',
        '      --name string     a name (default "ada")',
        "      --port int        a port (default 9681)",
        "  -y, --yes             do it",
    ]


def test_commands_are_padded_as_cobra_pads_them_and_sorted() -> None:
    assert command_lines({"version": "Print", "a-very-long-name": "x"}) == [
        "  a-very-long-name x",
        "  version          Print",
    ]
    assert command_lines({"go": "Go"}) == ["  go          Go"]


def test_a_page_has_its_text_usage_sections_and_footer() -> None:
    page = help_page("Long.", "prog [flags]", sections=[("Flags:", ["  -x"]), ("Empty:", [])])
    assert page == "Long.\n\nUsage:\n  prog [flags]\n\nFlags:\n  -x\n"
    assert help_page("L.", "p", footer="More.").endswith("\n\nMore.\n")


def test_an_argparse_parser_gets_cobras_help() -> None:
    class Parser(CobraHelp):
        pass

    parser = Parser(prog="zread-sim tool", description="Does a thing.")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("more", nargs="*")
    parser.add_argument("--out", metavar="FILE", help="where")
    sub = Parser(prog="zread-sim two", description="Two.")
    commands = sub.add_subparsers(dest="kind")
    commands.add_parser("one", help="the first")
    assert parser.format_help() == (
        "Does a thing.\n\nUsage:\n  zread-sim tool FILE MORE... [flags]\n\nFlags:\n"
        "  -h, --help       help for tool\n      --out FILE   where\n"
    )
    assert "Available Commands:\n  one         the first\n" in sub.format_help()
    assert "Usage:\n  zread-sim two COMMAND [flags]\n" in sub.format_help()
