"""Test cases from the charts, written out: ``zread-sim paths COMMAND``.

Owns: :func:`paths`, the cases of a command by name (found by
:mod:`simulator.tools.paths_search`, which says what a case is and how they are
found), the two forms they are written in (one JSON object per line, or a pytest
module that replays them with the ``zread_sim`` fixture: :func:`pytest_module`), and
``zread-sim paths COMMAND [--format jsonl|pytest] [--out FILE]`` (:func:`main`).
A transition no case takes is named on stderr, and the command exits 1.

Must not: write anything but its output; it runs sessions with no files (``home`` and
``project`` unset) and the browse server on a free loopback port.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import IO

from simulator.errors import ConfigurationError
from simulator.tools.arguments import raising
from simulator.tools.paths_search import Case, search

PROG = "zread-sim paths"


class PathsError(ConfigurationError):
    """An unknown command or format, or an output that cannot be written: one line."""


def paths(command: str) -> tuple[list[Case], list[str]]:
    """The cases of ``command``'s chart, shortest first, and the transitions none takes."""
    from statecharts import COMMANDS

    if command not in COMMANDS:
        raise PathsError(f"unknown command {command!r} (one of {', '.join(COMMANDS)})")
    return search(command)


# -- output ------------------------------------------------------------------------------

_PYTEST_HEAD = '''"""Paths through zread's {command} chart: together they take every transition.

Written by ``zread-sim paths {command} --format pytest``. Each case is a scenario, the
flags, and the steps a client takes: after the n-th event it sends a command (or, as
the control peer, answers the approval request). Replace the sending with your client
to check that it takes each path; the cases replay exactly in virtual time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

CASES: list[dict[str, Any]] = json.loads(
    r"""
{cases}
"""
)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_path(zread_sim: Any, tmp_path: Path, case: dict[str, Any]) -> None:
    scenario = case["scenario"]
    if case["scenario_toml"] is not None:
        scenario = tmp_path / f"{{case['scenario']}}.toml"
        scenario.write_text(case["scenario_toml"], encoding="utf-8")
    session = zread_sim.start(
        case["command"], *case["args"], scenario=str(scenario), seed=case["seed"],
        peer=case["peer"],
    )
    seen = 0
    for step in case["steps"]:
        while seen < step["after_event"]:
            event = session.wait_for(lambda _: True)
            seen += 1
        assert event["waiting_for"] == step["expect"]["waiting_for"]
        if "state" in step["expect"]:
            assert event["vm"]["state"] == step["expect"]["state"]
        if "approve" in step:
            session.answer_approval(step["approve"])
        else:
            session.send(step["send"]["type"], **step["send"]["params"])
    assert session.wait_done()["done"] is True
    taken = session.session.reached.transitions
    assert taken >= set(case["transitions"]), sorted(set(case["transitions"]) - taken)
'''


def pytest_module(command: str, cases: Sequence[Case]) -> str:
    """A pytest module that replays ``cases`` with the ``zread_sim`` fixture."""
    data = json.dumps([case.as_json() for case in cases], indent=1)
    return _PYTEST_HEAD.format(command=command, cases=data)


def _parser() -> argparse.ArgumentParser:
    parser = raising(PathsError)(
        prog=PROG,
        description="Test cases that together take every transition of a zread chart: "
        "one JSON object per line (scenario, flags, steps), or a pytest module.",
    )
    parser.add_argument("command", help="browse, generate, config, login, update or version")
    parser.add_argument("--format", choices=("jsonl", "pytest"), default="jsonl")
    parser.add_argument("--out", metavar="FILE", help="write there instead of stdout")
    return parser


def main(argv: list[str], out: IO[str] | None = None) -> int:
    """``zread-sim paths COMMAND [--format jsonl|pytest] [--out FILE]``: 0 when the
    cases take every transition, 1 when some are left (named on stderr), 2 on a bad
    argument."""
    try:
        args = _parser().parse_args(argv)
    except PathsError as refused:
        sys.stderr.write(f"{PROG}: {refused}\n")
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        cases, left = paths(args.command)
        if args.format == "pytest":
            text = pytest_module(args.command, cases)
        else:
            text = "".join(json.dumps(case.as_json()) + "\n" for case in cases)
        if args.out:
            try:
                with open(args.out, "w", encoding="utf-8") as file:
                    file.write(text)
            except OSError as err:
                raise PathsError(f"{args.out}: {err.strerror or err}") from None
        else:
            with contextlib.suppress(OSError, ValueError):
                (out or sys.stdout).write(text)
                (out or sys.stdout).flush()
    except PathsError as err:
        sys.stderr.write(f"{PROG}: {err}\n")
        return 2
    for key in left:
        sys.stderr.write(f"{PROG}: no case takes {key}\n")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
