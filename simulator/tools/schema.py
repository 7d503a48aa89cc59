"""JSON Schemas of the wire and of scenario files: ``zread-sim schema ...``.

Owns: the JSON Schemas (draft 2020-12) of one event line of a command
(:func:`event_schema`) and of one command line a client may send to it
(:func:`command_schema`), by the command's name, and of a TOML scenario file
(:func:`scenario_schema`) (all three built by :mod:`simulator.tools.schema_build`);
their files under ``docs/schema/`` (:func:`write_docs`); and the command line that
prints or writes them (:func:`main`)::

    zread-sim schema events generate
    zread-sim schema commands login
    zread-sim schema scenario
    python -m simulator.tools.schema --write docs/schema

Must not: write anything but the files :func:`write_docs` is asked for, nor describe a
byte format of its own: a schema follows the structs, never the other way round.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any, Final

from simulator.core.chart_specs import Chart
from simulator.errors import ConfigurationError
from simulator.tools import schema_build
from simulator.tools.arguments import raising
from simulator.tools.schema_build import scenario_schema
from statecharts import COMMANDS, load_chart

PROG: Final = "zread-sim schema"
REGENERATE: Final = "python -m simulator.tools.schema --write docs/schema"
"""The command that rewrites the published schemas, run from the repository's root."""


class SchemaError(ConfigurationError):
    """The user's mistake: an unknown command, a folder that cannot be written. A type
    the schemas cannot describe is a :class:`SimulatorBug`."""


def _chart(command: str) -> Chart:
    if command not in COMMANDS:
        raise SchemaError(f"unknown zread command {command!r} (one of: {', '.join(COMMANDS)})")
    return load_chart(command)


def event_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of one event line of ``zread <command> --stdio``
    (:func:`simulator.tools.schema_build.event_schema` says what it holds)."""
    return schema_build.event_schema(_chart(command))


def command_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of one command line a client may write to ``zread <command> --stdio``
    (:func:`simulator.tools.schema_build.command_schema` says what it holds)."""
    return schema_build.command_schema(_chart(command))


# -- publishing ---------------------------------------------------------------------------


def render(schema: Mapping[str, Any]) -> str:
    """A schema as its file holds it: JSON indented by two, keys in msgspec's order."""
    return json.dumps(schema, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def doc_files() -> dict[str, str]:
    """Every published schema file, by file name, with its text."""
    files = {}
    for command in COMMANDS:
        files[f"events-{command}.json"] = render(event_schema(command))
        files[f"commands-{command}.json"] = render(command_schema(command))
    files["scenario.json"] = render(scenario_schema())
    return files


def write_docs(directory: str | os.PathLike[str]) -> list[str]:
    """Write every schema file into ``directory`` (made if missing); the paths written."""
    written = []
    try:
        os.makedirs(directory, exist_ok=True)
        for name, text in doc_files().items():
            path = os.path.join(directory, name)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            written.append(path)
    except OSError as err:
        where = err.filename or directory
        raise SchemaError(f"cannot write {where}: {err.strerror}") from None
    return written


# -- the command line ---------------------------------------------------------------------


def _command(text: str) -> str:
    if text not in COMMANDS:
        raise argparse.ArgumentTypeError(
            f"unknown zread command {text!r} (one of: {', '.join(COMMANDS)})"
        )
    return text


def _parser() -> argparse.ArgumentParser:
    parser = raising(SchemaError)(
        prog=PROG,
        description="Print the JSON Schema (draft 2020-12) of zread's event lines, of its "
        "command lines, or of a scenario file; or write them all into a folder.",
    )
    parser.add_argument(
        "--write", metavar="DIR", help=f"write every schema into DIR (as: {REGENERATE})"
    )
    sub = parser.add_subparsers(dest="kind", metavar="{events,commands,scenario}")
    for kind, text in (
        ("events", "the schema of one event line of COMMAND"),
        ("commands", "the schema of one command line a client sends to COMMAND"),
    ):
        one = sub.add_parser(kind, help=text, description=text)
        one.add_argument("command", metavar="COMMAND", type=_command, help=", ".join(COMMANDS))
    sub.add_parser("scenario", help="the schema of a scenario file (TOML)")
    return parser


def _say(stream: Any, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.write(text)
        stream.flush()


def main(argv: list[str]) -> int:
    """``zread-sim schema events COMMAND | commands COMMAND | scenario | --write DIR``.

    Prints the schema on stdout and returns 0. A bad argument, or a folder that cannot
    be written, is one line on stderr (``zread-sim schema: <reason>``) and 2.
    """
    try:
        args = _parser().parse_args(argv)
        if (args.write is None) == (args.kind is None):
            raise SchemaError(
                "expected one of: events COMMAND, commands COMMAND, scenario, --write DIR"
            )
    except SchemaError as exc:
        _say(sys.stderr, f"{PROG}: {exc}\n")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if args.write is not None:
        try:
            written = write_docs(args.write)
        except SchemaError as exc:
            _say(sys.stderr, f"{PROG}: {exc}\n")
            return 2
        _say(sys.stdout, "".join(f"{path}\n" for path in written))
        return 0
    if args.kind == "events":
        schema = event_schema(args.command)
    elif args.kind == "commands":
        schema = command_schema(args.command)
    else:
        schema = scenario_schema()
    _say(sys.stdout, render(schema))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
