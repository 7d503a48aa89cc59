"""simulator.tools.replay: naming a cassette, and a cassette that cannot be played."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from simulator.tools.cassette import RecordError
from simulator.tools.replay import cassette_of, run_replay


def test_replay_colon_names_a_cassette() -> None:
    assert cassette_of("replay:run.json") == "run.json"
    assert cassette_of("replay:") == ""
    assert cassette_of("default") is None


@pytest.mark.parametrize("text", [None, "not json", '{"format": "other"}'])
def test_a_missing_or_unreadable_cassette_is_a_record_error(
    tmp_path: Path, text: str | None
) -> None:
    path = tmp_path / "run.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(RecordError, match=r"^replay: .*run\.json"):
        run_replay(str(path), io.BytesIO(), io.BytesIO())
    with pytest.raises(RecordError, match="name a cassette"):
        run_replay("", io.BytesIO(), io.BytesIO())
