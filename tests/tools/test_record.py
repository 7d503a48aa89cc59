"""simulator.tools.record: the command line's ``check`` and ``record`` (exit codes, the
report's place, refusals in one line with nothing written) and the drop-in's variables.

The recording itself, over real pipes, is in tests/e2e/test_record_e2e.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.tools.cassette import dumps, read_cassette
from simulator.tools.conformance import check_cassette
from simulator.tools.record import main, record_as_dropin
from tests.tools.recording import VERSION_EVENT, cassette


def test_check_reads_a_cassette_and_exits_0_1_or_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        dumps(cassette([{"t": 0.01, "dir": "out", "n": 1, "line": VERSION_EVENT.decode()}]))
    )
    assert main(["check", str(good)]) == 0
    assert capsys.readouterr().out.endswith("checked against the version chart: clean\n")
    assert check_cassette(read_cassette(good)).clean

    bad = tmp_path / "bad.json"
    entry = {"t": 0.01, "dir": "out", "n": 1, "line_b64": "bm90IGpzb24="}  # "not json"
    bad.write_text(json.dumps(cassette([entry])))
    assert main(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "stdout line 1 (t=0.010s): zread did write a line that is not JSON" in out
    assert out.endswith(": not json\n2 deviations\n") or "2 deviations" in out

    for text in ("{", json.dumps({"format": "other"}), json.dumps(cassette([{"dir": "x"}]))):
        broken = tmp_path / "broken.json"
        broken.write_text(text)
        assert main(["check", str(broken)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("zread-sim check: ") and err.count("\n") == 1
    assert main(["check", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_record_refuses_bad_input_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "c.json"
    cases = [
        (["record", "--out", str(out), "--"], "no program given"),
        (["record", "--out", str(out), "--redact", "(", "--", "true"], "not a regular expression"),
        (["record", "--out", str(tmp_path / "no" / "c.json"), "--", "true"], "no such directory"),
        (["record", "--out", str(tmp_path), "--", "true"], "is a directory"),
        (["record", "--out", str(out), "--", str(tmp_path / "nothing-here")], "cannot run"),
        (["record", "--", "true"], "--out"),
        (["frobnicate"], "invalid choice"),
    ]
    for argv, says in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_dropin_needs_both_variables(capsys: pytest.CaptureFixture[str]) -> None:
    assert record_as_dropin(["version", "--stdio"], {"ZREAD_SIM_RECORD": "x.json"}) == 2
    assert "ZREAD_SIM_REAL" in capsys.readouterr().err
    assert record_as_dropin(["version"], {}) == 2
    assert "ZREAD_SIM_RECORD is not set" in capsys.readouterr().err
