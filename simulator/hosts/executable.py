"""The ``zread`` executable: a two-line shell script that runs this interpreter's simulator.

Owns: writing that script (:func:`write_zread_executable`), for the pytest plugin's
``zread_bin`` fixture and for ``python -m simulator load --mode process``.

Must not: import pytest (a test extra) or anything heavier than the standard library,
nor touch PATH or the environment; putting the folder on PATH is the caller's.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

__all__ = ["write_zread_executable"]


def write_zread_executable(folder: Path) -> Path:
    """Write an executable ``zread`` in ``folder`` that runs this interpreter's simulator."""
    package_root = Path(__file__).resolve().parents[2]
    script = folder / "zread"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{package_root}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec "{sys.executable}" -m simulator "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script
