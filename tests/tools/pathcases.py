"""What the tests of finding and writing test cases share: each command's cases, found
once per process."""

from __future__ import annotations

import functools

from simulator.tools.paths_search import Case, search


@functools.cache
def cases_of(command: str) -> tuple[Case, ...]:
    cases, left = search(command)
    assert left == [], f"{command}: no case takes {left}"
    return tuple(cases)
