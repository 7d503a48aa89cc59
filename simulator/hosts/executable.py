"""The ``zread`` executable: a small script that runs this interpreter's simulator as zread.

Owns: writing that script (:func:`write_zread_executable`), for ``zread-sim install``,
the pytest plugin's ``zread_bin`` fixture and ``python -m simulator load --mode process``.

The script is Python behind a two-line ``/bin/sh`` trampoline (the form pip's own
launchers use when an interpreter path is too long or has spaces for a ``#!`` line):
``sh`` re-runs the file with this interpreter, for which those lines are one string.
Python then sees the script's own path as ``argv[0]``, so the simulator names itself
``zread`` in its help and its errors. The script needs no variable from its caller:
the interpreter and the package's folder are written into it, so it works when a client
hands its child nothing but HOME and PATH.

Baked-in defaults are ``ZREAD_SIM_*`` variables the script sets with
``os.environ.setdefault`` before the simulator reads its environment: a variable set
when the script runs wins over a baked value, and a flag on the command line wins over
both (as it wins over any variable).

Must not: import pytest (a test extra) or anything heavier than the standard library,
nor touch PATH or the caller's environment; putting the folder on PATH is the caller's.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from collections.abc import Mapping
from pathlib import Path


def script_text(defaults: Mapping[str, str] | None = None) -> str:
    """The text of the ``zread`` script, with ``defaults`` (variable -> value) baked in."""
    package_root = str(Path(__file__).resolve().parents[2])
    baked = dict(defaults or {})
    for name in baked:
        if not name.startswith("ZREAD_SIM_"):
            raise ValueError(f"not a simulator variable: {name!r}")
    interpreter = _sh_word(sys.executable)
    if "'''" in interpreter:
        raise ValueError(f"cannot launch an interpreter whose path has ''': {sys.executable!r}")
    lines = [
        "#!/bin/sh",
        f"'''exec' {interpreter} \"$0\" \"$@\"",
        "' '''",
        "# zread, as zread-sim stands in for it (written by `zread-sim install`).",
        "# The defaults below apply unless the variable is set when this runs; a flag",
        "# on the command line beats both.",
        "import os",
        "import sys",
        "",
        f"for _name, _value in {baked!r}.items():",
        "    os.environ.setdefault(_name, _value)",
        f"sys.path.insert(0, {package_root!r})",
        "from simulator.__main__ import main",
        "",
        "raise SystemExit(main())",
        "",
    ]
    return "\n".join(lines)


def _sh_word(path: str) -> str:
    """``path`` as one ``sh`` word that Python also reads inside its string literal: each
    backslash is written ``\\\\`` outside the quotes, which ``sh`` reads as one backslash
    and Python as a valid escape (a quoted ``\\N`` or ``\\x`` would be a SyntaxError)."""
    return "\\\\".join(shlex.quote(part) for part in path.split("\\"))


def write_zread_executable(folder: Path, defaults: Mapping[str, str] | None = None) -> Path:
    """Write an executable ``zread`` in ``folder`` that runs this interpreter's simulator.

    ``defaults`` maps ``ZREAD_SIM_*`` variables to the values the script uses when the
    variable is not set at run time. An existing ``zread`` is replaced at once (the new
    file is written beside it and renamed over it), so a process starting it meanwhile
    runs either the old script or the new one, never half of one.
    """
    script = folder / "zread"
    partial = folder / f".zread.{os.getpid()}.tmp"
    partial.write_text(script_text(defaults), encoding="utf-8")
    partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(partial, script)
    return script
