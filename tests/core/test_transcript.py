"""simulator.core.transcript: what a session keeps of its lines is bounded in count and
in bytes, counts everything, keeps the first violations and the latest, and hands every
entry to its listener before anything is dropped."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from simulator.core.transcript import (
    FIRST_VIOLATIONS,
    KEPT_BYTES,
    RECENT_LINES,
    RECENT_VIOLATIONS,
    Transcript,
)


@dataclass(frozen=True)
class Entry:
    line: bytes
    error: str = ""


def numbered(n: int, *, error: bool = False, size: int = 0) -> Entry:
    text = f"{n}".encode()
    return Entry(text.ljust(size, b" "), "refused" if error else "")


def test_an_empty_transcript_keeps_nothing() -> None:
    transcript: Transcript[Entry] = Transcript()
    assert (transcript.total, transcript.total_violations) == (0, 0)
    assert transcript.recent == [] and transcript.violations == []
    assert transcript.omitted_violations == 0


def test_a_few_lines_are_all_kept_in_order() -> None:
    transcript: Transcript[Entry] = Transcript()
    entries = [numbered(n, error=n % 2 == 1) for n in range(7)]
    for entry in entries:
        transcript.add(entry)
    assert transcript.recent == entries
    assert transcript.violations == entries[1::2]
    assert (transcript.total, transcript.total_violations) == (7, 3)


def test_the_most_recent_lines_are_kept_and_all_counted() -> None:
    transcript: Transcript[Entry] = Transcript()
    for n in range(RECENT_LINES * 3 + 7):
        transcript.add(numbered(n))
    assert transcript.total == RECENT_LINES * 3 + 7
    kept = transcript.recent
    assert len(kept) == RECENT_LINES
    assert [int(e.line) for e in kept] == list(range(RECENT_LINES * 2 + 7, RECENT_LINES * 3 + 7))
    assert transcript.violations == [] and transcript.total_violations == 0


def test_the_first_violations_stay_and_the_latest_follow() -> None:
    transcript: Transcript[Entry] = Transcript()
    total = FIRST_VIOLATIONS + RECENT_VIOLATIONS + 500
    for n in range(total):
        transcript.add(numbered(n, error=True))
        transcript.add(numbered(-n))  # accepted lines between them change nothing
    kept = [int(e.line) for e in transcript.violations]
    assert kept == [*range(FIRST_VIOLATIONS), *range(total - RECENT_VIOLATIONS, total)]
    assert transcript.total_violations == total
    assert transcript.omitted_violations == total - FIRST_VIOLATIONS - RECENT_VIOLATIONS
    assert transcript.total == 2 * total


def test_the_listener_gets_every_entry_as_it_comes() -> None:
    transcript: Transcript[Entry] = Transcript()
    heard: list[Entry] = []
    transcript.listener = heard.append
    entries = [numbered(n, error=n % 3 == 0) for n in range(RECENT_LINES + 250)]
    for index, entry in enumerate(entries):
        transcript.add(entry)
        assert heard[-1] is entry and len(heard) == index + 1
    assert heard == entries


def test_long_lines_are_kept_within_the_byte_bound_the_newest_always() -> None:
    transcript: Transcript[Entry] = Transcript()
    big = KEPT_BYTES // 4 + 1
    for n in range(10):
        transcript.add(numbered(n, size=big))
    kept = transcript.recent
    assert [int(e.line) for e in kept] == [7, 8, 9]  # 4 would be over the bound
    assert sum(len(e.line) for e in kept) <= KEPT_BYTES
    huge = numbered(99, size=KEPT_BYTES * 2)
    transcript.add(huge)
    assert transcript.recent == [huge]  # alone, but kept
    transcript.add(numbered(100))
    assert [int(e.line) for e in transcript.recent] == [100]


@pytest.mark.parametrize(
    ("size", "kept"),
    [
        (KEPT_BYTES // 3 + 1, [0, 1, 13, 14]),  # two fit in each bound
        (KEPT_BYTES + 1, [0, 14]),  # the first and the newest, alone in theirs
    ],
)
def test_violations_are_kept_within_the_byte_bound(size: int, kept: list[int]) -> None:
    transcript: Transcript[Entry] = Transcript()
    for n in range(15):
        transcript.add(numbered(n, error=True, size=size))
    assert [int(e.line) for e in transcript.violations] == kept
    assert transcript.total_violations == 15
    assert transcript.omitted_violations == 15 - len(kept)
