"""``--scenario replay:CASSETTE``: a recorded run played back through the process runner.

Owns: :func:`run_replay`, which reads the cassette (:func:`~simulator.tools.cassette.read_cassette`;
a missing or unreadable one is a :class:`~simulator.tools.cassette.RecordError`, one
line on stderr and exit 2), plays it as a :class:`~simulator.core.replay.ReplaySession`
on the plain selector runner, writes each divergence's line on stderr, and exits with
the recorded exit code when the recording was played to its end.

``replay:`` is vcrpy's ``none`` record mode: a replay never records, and never runs
the real program. The drop-in's ``ZREAD_SIM_RECORD_MODE`` (``once``, ``all``, ``none``,
in :mod:`simulator.cli`) chooses between recording and replaying.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from simulator.core.replay import ReplaySession
from simulator.tools.cassette import RecordError, read_cassette

PREFIX = "replay:"
"""What ``--scenario`` starts with to name a cassette."""


def cassette_of(scenario: str) -> str | None:
    """The cassette path ``--scenario replay:PATH`` names, or None for a scenario."""
    return scenario[len(PREFIX) :] if scenario.startswith(PREFIX) else None


def run_replay(
    path: str,
    stdin: BinaryIO,
    stdout: BinaryIO,
    *,
    speed: float = 1.0,
    frame: bool = False,
    program: str = "zread-sim",
) -> int:
    """Play the cassette at ``path`` on ``stdin`` and ``stdout``; the exit code."""
    from simulator.runners.stdio import ProcessRunner, write_line

    if not path:
        raise RecordError("replay: name a cassette: --scenario replay:PATH")
    try:
        cassette = read_cassette(Path(path))
    except RecordError as error:
        raise RecordError(f"replay: {error}") from None
    replay = ReplaySession(
        cassette, speed=speed, on_divergence=lambda line: write_line(2, line), program=program
    )
    code = ProcessRunner(replay, stdin, stdout, frame=frame).run()  # no transport faults
    recorded = replay.exit_code
    return recorded if code == 0 and recorded is not None else code
