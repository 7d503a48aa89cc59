"""Tests for simulator.cli.session: a parsed command line run as the process, over real
files for stdin and stdout, with its journal."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from simulator.cli.options import UsageError
from simulator.cli.session import run


def arguments(command: str, **options: object) -> argparse.Namespace:
    args = argparse.Namespace(
        command=command,
        stdio=True,
        scenario="default",
        seed=0,
        speed=0.0,
        home="",
        project="",
        files=False,
        control="",
        frame=False,
        journal="",
        eof="wait",
        program="zread-sim",
        invocation=["zread-sim", command, "--stdio"],
    )
    for key, value in options.items():
        setattr(args, key, value)
    return args


def test_a_session_runs_on_the_streams_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "in").write_bytes(b"")
    with (tmp_path / "in").open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        assert run(arguments("version"), stdin, stdout, {}) == 0
    events = [json.loads(line) for line in (tmp_path / "out").read_bytes().splitlines()]
    assert len(events) == 1 and events[0]["done"] is True


def test_a_journal_gets_the_run(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    (tmp_path / "in").write_bytes(b"")
    with (tmp_path / "in").open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        assert run(arguments("version", journal=str(journal)), stdin, stdout, {}) == 0
    kinds = [json.loads(line)["kind"] for line in journal.read_text().splitlines()]
    assert kinds[0] == "start" and "event" in kinds and kinds[-1] == "exit"


@pytest.mark.parametrize("option", ["control", "journal"])
def test_a_replay_takes_neither_control_nor_journal(tmp_path: Path, option: str) -> None:
    args = arguments("version", scenario=f"replay:{tmp_path / 'c.json'}", **{option: "x"})
    (tmp_path / "in").write_bytes(b"")
    with (
        (tmp_path / "in").open("rb") as stdin,
        (tmp_path / "out").open("wb") as stdout,
        pytest.raises(UsageError, match="cannot be used with --scenario replay:CASSETTE"),
    ):
        run(args, stdin, stdout, {})
    assert (tmp_path / "out").read_bytes() == b""
