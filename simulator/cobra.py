"""Help texts in the layout of cobra, Go's usual command-line library, for every
command of the program: zread's, ``zread-sim``'s own and the tools'.

Owns (and imports nothing of the package, so the command line and the tools share it):
:func:`help_page` (``<long text>``, ``Usage:``, ``Available Commands:``,
``Flags:`` in pflag's columns), :func:`flag_usages` (pflag's FlagUsages: sorted by name,
``-h, --help`` as ``help for X``, defaults shown as pflag shows them) and
:class:`CobraHelp`, the mixin that gives an argparse parser this help.

zread, a Go program, prints cobra's layout, and clients probe ``zread <command>
--help`` for it; argparse's own (``usage:``, ``options:``, other columns) differs. The
flag lines are formatted from the argparse actions that parse the flags, so a help
cannot list a flag that is not taken. Written here by hand: no library formats
argparse actions in pflag's columns.

Must not: parse, print or exit; it makes text.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def _flag_rows(actions: Iterable[argparse.Action]) -> list[tuple[str, str, str]]:
    """(name, flag column, usage) of each flag, as pflag writes them."""
    rows = []
    for action in actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.help == argparse.SUPPRESS:  # a positional, or a hidden flag
            continue
        shorts = [o for o in action.option_strings if not o.startswith("--")]
        column = f"  {shorts[0]}, {longs[0]}" if shorts else f"      {longs[0]}"
        if action.nargs != 0:
            metavar = action.metavar if isinstance(action.metavar, str) else None
            column += f" {metavar or _TYPES.get(action.type, 'string')}"
        rows.append((longs[0].lstrip("-"), column, _usage(action)))
    return sorted(rows)


_TYPES: dict[object, str] = {int: "int", float: "float"}
"""pflag's names of the value types argparse converts to."""


def _usage(action: argparse.Action) -> str:
    usage = action.help if isinstance(action.help, str) else ""
    if "%" in usage:  # argparse's help strings: %(default)s, %%
        usage = usage % {name: value for name, value in vars(action).items()}
    if action.choices and action.nargs != 0 and not usage:
        usage = "one of " + ", ".join(map(str, action.choices))
    default = action.default
    said = "default" in usage  # the help says it in its own words
    if action.nargs != 0 and not said and default not in (None, "", 0, [], argparse.SUPPRESS):
        usage += f' (default "{default}")' if isinstance(default, str) else f" (default {default})"
    return usage.strip()


def flag_usages(actions: Iterable[argparse.Action]) -> list[str]:
    """pflag's FlagUsages: sorted by name, the usages three spaces after the widest."""
    rows = _flag_rows(actions)
    width = max((len(column) for _, column, _ in rows), default=0)
    return [f"{column:<{width}}   {usage}".rstrip() for _, column, usage in rows]


def command_lines(commands: Mapping[str, str]) -> list[str]:
    """The ``Available Commands:`` lines: names padded as cobra pads them, sorted."""
    padding = max(11, *map(len, commands))
    return [f"  {name:<{padding}} {summary}" for name, summary in sorted(commands.items())]


def help_page(
    long: str,
    usage: str,
    *,
    sections: Sequence[tuple[str, list[str]]] = (),
    footer: str = "",
) -> str:
    """A whole help text: the long text, ``Usage:``, then each (heading, lines)."""
    lines = [long, "", "Usage:", f"  {usage}"]
    for heading, body in sections:
        if body:
            lines += ["", heading, *body]
    if footer:
        lines += ["", footer]
    return "\n".join(lines) + "\n"


class CobraHelp(argparse.ArgumentParser):
    """An argparse parser whose ``--help`` is in cobra's layout: its ``description``,
    ``Usage:`` with its positional arguments, its subcommands, ``Flags:``, with
    ``-h, --help`` as ``help for X``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._name_help()

    def _name_help(self) -> None:
        for action in self._actions:
            if "--help" in action.option_strings:
                action.help = f"help for {self.prog.split()[-1]}"

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if "--help" in action.option_strings:  # a tool's own -h/--help switch
            self._name_help()
        return action

    def format_help(self) -> str:
        positionals = [a for a in self._actions if not a.option_strings]
        commands: dict[str, str] = {}
        words = []
        for action in positionals:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    commands[choice.dest] = choice.help or ""
                words.append("COMMAND")
            else:
                words.append(_word(action))
        usage = " ".join([self.prog, *words, "[flags]"])
        sections: list[tuple[str, list[str]]] = []
        if commands:
            sections.append(("Available Commands:", command_lines(commands)))
        sections.append(("Flags:", flag_usages(self._actions)))
        long = (self.description or "").strip() or f"{self.prog}."
        return help_page(long, usage, sections=sections, footer=(self.epilog or "").strip())


def _word(action: argparse.Action) -> str:
    """A positional argument as the usage line names it: ``FILE``, ``[NAME]``, ``FILE...``."""
    name = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.nargs == "?":
        return f"[{name}]"
    if action.nargs in ("*", "+", argparse.REMAINDER):
        return f"{name}..."
    return name
