"""The simulator's own options, beside zread's flags on any command, and the variables
that steer a plain ``zread``: ``ZREAD_SIM_SCENARIO``, ``ZREAD_SIM_SEED``,
``ZREAD_SIM_SPEED``, ``ZREAD_SIM_HOME``, ``ZREAD_SIM_PROJECT``, ``ZREAD_SIM_FILES``,
``ZREAD_SIM_CONTROL``, ``ZREAD_SIM_FRAME``, ``ZREAD_SIM_JOURNAL``, ``ZREAD_SIM_EOF``. A
flag beats its variable.

Owns: :func:`add_simulator_options` (each option defaults to None, then to its
variable), :data:`ENVIRONMENT`, :func:`apply_environment`, :func:`baked` (the options
``zread-sim install`` writes into a script as variables) and :class:`UsageError`.

Must not: read the environment itself (it is given a mapping), or run anything.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from simulator.errors import ConfigurationError
from simulator.launch import integer, number


class UsageError(ConfigurationError):
    """A bad flag, variable or scenario: one line on stderr, exit 2."""


_speed = number(0.0)
_seed = integer


_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")


def _switch(text: str) -> bool:
    if text.lower() in _YES:
        return True
    if text.lower() in _NO:
        return False
    raise argparse.ArgumentTypeError(f"expected 1 or 0 (true/false), got {text!r}")


EOF_CHOICES = ("wait", "quit")
"""What the end of stdin does: ``wait`` (zread's: nothing; it says so on stderr once it
waits for an answer), or ``quit`` (then it quits, for scripts)."""


def _eof(text: str) -> str:
    if text.lower() in EOF_CHOICES:
        return text.lower()
    raise argparse.ArgumentTypeError(f"expected wait or quit, got {text!r}")


ENVIRONMENT: dict[str, tuple[str, str, Any]] = {
    "scenario": ("ZREAD_SIM_SCENARIO", "default", str),
    "seed": ("ZREAD_SIM_SEED", "0", _seed),
    "speed": ("ZREAD_SIM_SPEED", "1", _speed),
    "home": ("ZREAD_SIM_HOME", "", str),
    "project": ("ZREAD_SIM_PROJECT", "", str),
    "files": ("ZREAD_SIM_FILES", "1", _switch),
    "control": ("ZREAD_SIM_CONTROL", "", str),
    "frame": ("ZREAD_SIM_FRAME", "0", _switch),
    "journal": ("ZREAD_SIM_JOURNAL", "", str),
    "eof": ("ZREAD_SIM_EOF", "wait", _eof),
}
"""option -> (variable, default, parser): what an option falls back to when not given."""


def apply_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    for option, (variable, default, parse) in ENVIRONMENT.items():
        if getattr(args, option, None) is not None:
            continue
        text = environ.get(variable, default)
        try:
            setattr(args, option, parse(text))
        except argparse.ArgumentTypeError as error:
            raise UsageError(f"{variable}: {error}") from None


def add_simulator_options(parser: argparse.ArgumentParser) -> None:
    """The simulator's own options; each defaults to None, then to its variable."""
    parser.add_argument(
        "--scenario",
        metavar="NAME|PATH",
        default=None,
        help="a built-in scenario or a TOML file (ZREAD_SIM_SCENARIO; default: default)",
    )
    parser.add_argument(
        "--seed",
        metavar="N",
        type=_seed,
        help="seed of every random draw (ZREAD_SIM_SEED; default: 0)",
    )
    parser.add_argument(
        "--speed",
        metavar="X",
        type=_speed,
        help="multiplies every delay; 0 = no delay (ZREAD_SIM_SPEED; default: 1)",
    )
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=None,
        help="the folder that plays HOME: ~/.zread/ is DIR/.zread/ (ZREAD_SIM_HOME)",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        default=None,
        help="the project whose .zread/ is used (ZREAD_SIM_PROJECT; default: the working "
        "directory)",
    )
    parser.add_argument(
        "--no-files",
        dest="files",
        action="store_const",
        const=False,
        default=None,
        help="keep the whole world in memory and write no file (ZREAD_SIM_FILES=0)",
    )
    parser.add_argument(
        "--control",
        metavar="stdio|unix:PATH",
        default=None,
        help="open the admin API on stdio or a Unix socket (ZREAD_SIM_CONTROL; default: off)",
    )
    parser.add_argument(
        "--frame",
        action="store_const",
        const=True,
        default=None,
        help="write events as clijson chunks, the last one also framed (ZREAD_SIM_FRAME=1)",
    )
    parser.add_argument(
        "--journal",
        metavar="FILE",
        default=None,
        help="append a JSON line per line read, event and exit to FILE (ZREAD_SIM_JOURNAL)",
    )
    parser.add_argument(
        "--eof",
        metavar="wait|quit",
        type=_eof,
        default=None,
        help="what the end of stdin does once zread waits for an answer: wait, as zread "
        "does, or quit, for scripts (ZREAD_SIM_EOF; default: wait)",
    )


def baked(args: argparse.Namespace) -> dict[str, str]:
    """The variables ``install`` writes into the script: the options given, as text that
    means the same from any working directory (paths made absolute)."""
    baked: dict[str, str] = {}
    for option, (variable, _, _) in ENVIRONMENT.items():
        value = getattr(args, option)
        if value is None:
            continue
        if option == "scenario":
            from simulator.scenario import load_scenario

            load_scenario(value)  # an unknown scenario fails now, not in every run
            if value.endswith(".toml") or "/" in value or os.sep in value:  # a file, not a name
                value = os.path.abspath(value)
        elif option in ("home", "project", "journal") and value:
            value = os.path.abspath(value)
        elif option == "control" and value.startswith("unix:") and value != "unix:":
            value = "unix:" + os.path.abspath(value[len("unix:") :])
        elif option == "speed":
            value = repr(value)
        elif isinstance(value, bool):
            value = "1" if value else "0"
        baked[variable] = str(value)
    return baked
