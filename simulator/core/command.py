"""What a command module declares besides its chart: its flags and its examples.

Owns: :class:`Flag`, the declaration of one zread flag, written beside the field of the
command's :class:`~simulator.core.driver.Flags` subclass it sets
(``yes: Annotated[bool, Flag("-y", "--yes", help=...)] = False``), so a flag is said
once: its type and default are the field's, its names, value type and help the
:class:`Flag`'s; :func:`flag_fields`, which reads them back; :class:`Examples`, the
flags and extra scenarios ``zread-sim paths`` tries for the command; and :data:`Answer`,
the type of a command module's ``answer`` at its gates (the reference client's).

A flag's ``parse`` turns the text given into the value, raising ValueError with a
message in the simulator's words; the command line shows that message.

Must not: import argparse or anything above the core; it declares, the command line
(``simulator.launch``) parses.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

Answer = tuple[str, dict[str, Any]] | None
"""What a command module's ``answer(waiting, vm, memory)`` returns: the command a
sensible client sends now (its type and params), or None when its gates ask for
nothing. ``memory`` is one client's notebook across the events of its run."""


class Flag:
    """One zread flag: its names (``"-y", "--yes"``), the value type zread's help
    shows (``string``, ``int``; none for a switch), its help line, the values it takes
    and the parser of its text. Frozen once made.

    (The classes here are plain, not dataclasses: every command's module makes them
    at import, and ``dataclasses`` would cost each start-up its own import.)
    """

    __slots__ = ("choices", "help", "metavar", "names", "parse")
    names: tuple[str, ...]
    help: str
    metavar: str
    choices: tuple[str, ...]
    parse: Callable[[str], Any] | None

    def __init__(
        self,
        *names: str,
        help: str,
        metavar: str = "",
        choices: tuple[str, ...] = (),
        parse: Callable[[str], Any] | None = None,
    ) -> None:
        for slot, value in zip(self.__slots__, (choices, help, metavar, names, parse), strict=True):
            object.__setattr__(self, slot, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Flag is frozen: {name} cannot be set")

    def __repr__(self) -> str:
        return f"Flag({', '.join(map(repr, self.names))}, help={self.help!r})"


class FlagField(NamedTuple):
    """A field of a command's flags type with the :class:`Flag` that sets it."""

    name: str
    flag: Flag
    default: Any
    switch: bool
    """True for a ``bool`` field: the flag takes no value."""


@functools.cache
def flag_fields(flags_type: type) -> tuple[FlagField, ...]:
    """The fields of ``flags_type`` that a :class:`Flag` sets, in declaration order."""
    hints = typing.get_type_hints(flags_type, include_extras=True)
    fields: list[FlagField] = []
    defaults = dict(
        zip(
            getattr(flags_type, "__struct_fields__", ()),
            getattr(flags_type, "__struct_defaults__", ()),
            strict=True,
        )
    )
    for name, hint in hints.items():
        flag = next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Flag)), None)
        if flag is None:
            continue
        base = typing.get_args(hint)[0]
        fields.append(FlagField(name, flag, defaults.get(name), base is bool))
    return tuple(fields)


class Examples(NamedTuple):
    """What ``zread-sim paths`` tries for a command, besides the built-in scenarios.

    ``flags``: the sets of zread flags tried (each with every scenario). ``scenarios``:
    extra scenarios by name, as TOML text extending ``default``. ``flags_from_vm``:
    more flags made from the first event's vm of a run with the first set of flags
    (browse asks for the version it lists), tried when it returns some.
    """

    flags: tuple[tuple[str, ...], ...] = ((),)
    scenarios: Mapping[str, str] = {}
    flags_from_vm: Callable[[dict[str, Any]], tuple[str, ...] | None] | None = None
