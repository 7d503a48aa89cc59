"""Domain failures: which attempt at which point fails, decided from the seed.

Owns: :class:`Failure`, one ``[[failures]]`` entry of a scenario, and
:class:`FailurePlan`, which answers a driver's question "does this attempt fail?" and
keeps, for the admin API, each entry's id (``failure-1``, ``failure-2``, ... in the
order they were added, the scenario's first), how often it fired, and the removal of
one or of all of them.

A failure names a ``point`` (where), optionally a ``target`` (which page), and which
attempts fail: the listed ``attempts``, else the ``first`` N, else all of them; then
``probability`` thins them out with a seeded draw of that very attempt, so the outcome
does not depend on the order attempts happen in (a change of timing changes nothing).
The first matching entry wins.

Must not: read the clock or do I/O; it draws only from the RNG it is given.
"""

# No `from __future__ import annotations` here: msgspec resolves these Structs'
# annotations when a scenario is first loaded, and each one left a string costs a
# compile and an eval at start-up.
import random
from array import array
from typing import Any

import msgspec


class Failure(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """One way the simulated world goes wrong."""

    point: str
    """Where: a failure point some command's chart declares (its ``failures``); the
    session is refused a scenario naming a point no command has."""
    error: str = ""
    target: int = 0
    attempts: list[int] = msgspec.field(default_factory=list)
    first: int = 0
    probability: float = 1.0
    at_percent: float = 0.0
    timeout: bool = False

    def __post_init__(self) -> None:
        if not self.point:
            raise ValueError("point must name a failure point")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.first < 0 or self.target < 0 or any(a < 1 for a in self.attempts):
            raise ValueError("first and target must be >= 0, attempts >= 1")
        if not 0.0 <= self.at_percent <= 100.0:
            raise ValueError("at_percent must be between 0 and 100")

    def selects(self, target: int, attempt: int) -> bool:
        """True when this entry covers ``attempt`` at ``target``, before probability."""
        if self.target and self.target != target:
            return False
        if self.attempts:
            return attempt in self.attempts
        if self.first:
            return attempt <= self.first
        return True


class FailurePlan:
    """The failures of one session, with the RNG their probabilities draw from."""

    def __init__(self, failures: list[Failure], rng: random.Random | str) -> None:
        """``rng`` is a Random, or the seed of one made when a probability first draws
        (most sessions draw nothing: seeding one costs ~11 us a session)."""
        # Each entry keeps the number it was added with (its id is that number + 1): its
        # draws do not move when another entry is injected ahead of it or removed.
        self._by_point: dict[str, list[tuple[int, Failure]]] = {}
        self._added = 0
        for failure in failures:
            self._by_point.setdefault(failure.point, []).append((self._added, failure))
            self._added += 1
        self._scenario = self._added
        self._fired: dict[int, int] = {}
        self._highest: dict[str, array[int]] = {}
        """The highest attempt asked so far at each point, by target (0: none; a target is
        a page's id): an array of a point's targets is ~4 bytes a page, where a dict of
        (point, target) keys was ~30 (a load test keeps thousands of sessions)."""
        self._rng = rng
        self._key_drawn: int | None = None

    @property
    def _key(self) -> int:
        if self._key_drawn is None:
            rng = self._rng if isinstance(self._rng, random.Random) else random.Random(self._rng)
            self._key_drawn = rng.getrandbits(64)
        return self._key_drawn

    def add(self, failure: Failure) -> str:
        """Put ``failure`` ahead of the others at its point; its id."""
        self._by_point.setdefault(failure.point, []).insert(0, (self._added, failure))
        self._added += 1
        return f"failure-{self._added}"

    def check(self, point: str, *, target: int = 0, attempt: int = 1) -> Failure | None:
        """The failure that makes this attempt fail, or None."""
        asked = self._highest.get(point)
        if asked is None:
            asked = self._highest[point] = array("I")
        if target >= len(asked):  # grown to twice the targets at least: a page at a time
            more = max(target + 1, 2 * len(asked)) - len(asked)
            asked.frombytes(bytes(asked.itemsize * more))  # 0: not asked
        if target >= 0 and attempt > asked[target]:
            asked[target] = min(attempt, 0xFFFFFFFF)
        for index, failure in self._by_point.get(point, ()):
            if not failure.selects(target, attempt):
                continue
            if (
                failure.probability >= 1.0
                or self._draw(point, target, attempt, index) < failure.probability
            ):
                self._fired[index] = self._fired.get(index, 0) + 1
                return failure
        return None

    def entries(self) -> list[dict[str, Any]]:
        """Every entry still in the plan, in the order of their ids, as plain data: ``id``,
        ``kind`` (its point), ``source``, ``where`` (what it matches), ``left`` (attempts
        still to fail under ``first``, when that is one number) and ``fired``."""
        found = sorted(e for entries in self._by_point.values() for e in entries)
        return [self._entry(index, failure) for index, failure in found]

    def remove(self, entry_id: str) -> bool:
        """Remove the entry whose id is ``entry_id``; whether there was one."""
        for point, entries in self._by_point.items():
            kept = [e for e in entries if f"failure-{e[0] + 1}" != entry_id]
            if len(kept) < len(entries):
                self._by_point[point] = kept
                return True
        return False

    def clear(self) -> None:
        """Remove every entry, the scenario's included: from now on no attempt fails."""
        self._by_point = {}

    def _entry(self, index: int, failure: Failure) -> dict[str, Any]:
        where: dict[str, Any] = {"point": failure.point}
        if failure.target:
            where["target"] = failure.target
        if failure.attempts:
            where["attempts"] = list(failure.attempts)
        elif failure.first:
            where["first"] = failure.first
        if failure.probability < 1.0:
            where["probability"] = failure.probability
        left: dict[str, int] = {}
        if failure.first and not failure.attempts:
            highest = self._highest_at(failure.point, failure.target)
            if highest is not None:
                left["first"] = max(0, failure.first - highest)
        return {
            "id": f"failure-{index + 1}",
            "kind": failure.point,
            "source": "scenario" if index < self._scenario else "injected",
            "where": where,
            "left": left,
            "fired": self._fired.get(index, 0),
        }

    def _highest_at(self, point: str, target: int) -> int | None:
        """The highest attempt asked at ``point`` for ``target`` (0: any), when that is
        one number: an entry of every target counts each target's attempts apart, so it
        has one only while a single target was asked."""
        highest = self._highest.get(point, ())
        if target:
            return highest[target] if target < len(highest) else 0
        asked = [n for n in highest if n]
        return asked[0] if len(asked) == 1 else (0 if not asked else None)

    def _draw(self, point: str, target: int, attempt: int, index: int) -> float:
        # One draw per (point, target, attempt, entry), not the next number of a stream:
        # whether page 3's second attempt fails does not depend on which page ended first.
        return random.Random(f"{self._key}:{point}:{target}:{attempt}:{index}").random()
