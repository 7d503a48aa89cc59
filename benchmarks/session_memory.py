"""Memory of one live generate session, all of them live at once, mid-run.

Builds N ``generate -y`` sessions (bare :class:`~simulator.core.session.Session`s, a
50-page scenario), runs each in virtual time until half its pages are done, and keeps
every one: the moment a load test holds them all. Reported per session: what Python
allocated for them (tracemalloc, the allocations themselves, not the allocator's pages)
and the RSS they added (``VmRSS`` before and after, the garbage collected first). Both
are taken with all N live, so no figure is divided by sessions that are gone: the
load test's own figure (``capacity.py``) divides the RSS at its peak by the sessions
live then, which the allocator's unreturned pages inflate.

    python benchmarks/session_memory.py [--sessions 10000] [--pages 50]

Target: <= 26 KB per live session.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc

from _common import pages_scenario, verdict

from simulator.launch import build_session
from simulator.scenario import load_scenario
from simulator.tools.load import memory

TARGET_KB = 26.0


def rss_kb() -> int:
    """This process's RSS in kB (the load tool's reading: /proc, else psutil)."""
    value = memory.rss_kb()
    if value is None:
        raise SystemExit("session_memory.py: this system tells no RSS (no /proc, no psutil)")
    return value


def mid_run(scenario: object, seed: int, pages: int) -> object:
    session = build_session("generate", ("-y",), scenario=scenario, seed=seed)  # type: ignore[arg-type]
    session.start()
    while session.driver.vm.pages.done < pages // 2:
        deadline = session.next_deadline()
        assert deadline is not None
        session.advance(deadline, limit=1)
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        scenario = load_scenario(pages_scenario(folder, args.pages))
    mid_run(scenario, -1, args.pages)  # imports, charts and caches made before measuring
    gc.collect()
    before = rss_kb()
    live = [mid_run(scenario, seed, args.pages) for seed in range(args.sessions)]
    gc.collect()
    added = (rss_kb() - before) / len(live)
    del live
    gc.collect()
    # Apart, as tracemalloc's own records would count in the RSS above.
    tracemalloc.start()
    live = [mid_run(scenario, seed, args.pages) for seed in range(args.sessions)]
    traced = tracemalloc.get_traced_memory()[0] / 1024 / len(live)
    tracemalloc.stop()
    print(f"{len(live):,} generate -y sessions, {args.pages} pages, each half done, all live")
    print(f"RSS added: {added:.1f} KB per session")
    print(f"allocated: {traced:.1f} KB per session (tracemalloc: without the allocator's slack)")
    print(f"<= {TARGET_KB:g} KB per live session (RSS): {verdict(added <= TARGET_KB)}")


if __name__ == "__main__":
    main()
