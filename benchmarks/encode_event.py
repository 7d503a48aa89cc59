"""Encoding one generate event whose vm holds 50 page tasks. Target: <= 10 us (warm).

The vm is generate's (``GenerateVM``, running, 50 done-or-running tasks, every title
with ``<`` and ``>``: the escaping path, the slower one); an event is
``encode_event(vm_pieces(vm), ("quit", "cancel"), False, "")``, the two calls the
session makes (in a tree from before ``vm_pieces``, ``encode_vm``, which it made then).
No event encodes an object already encoded unchanged:

- **warm**: one vm, and before each event one task is changed through
  ``tasks.edit(task_id)`` (the next task each time, its state and retry count moved
  on), as a run changes one task per event. Every line differs from the one before.
  The cost of the edits alone is timed in the same way and taken off.
- **cold**: ``--fresh`` vms built beforehand, each with its own titles, states and
  counts, and each encoded once: the first event of a vm never encoded.

Times are ``time.perf_counter_ns`` around a loop of many events (``--events`` warm,
``--fresh`` cold) divided by their number; ``--rounds`` rounds, interleaved, and the
median round is reported.

    python benchmarks/encode_event.py [--events 20000] [--fresh 5000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from typing import get_args

from simulator.core.eventbytes import encode_event

try:
    from simulator.core.eventbytes import vm_pieces as encode_vm
except ImportError:  # a tree from before it (--against by PYTHONPATH)
    from simulator.core.eventbytes import encode_vm  # type: ignore[assignment]
from statecharts.generate import (
    Catalog,
    GenerateVM,
    Pages,
    SelectAction,
    Task,
    TaskList,
    TaskState,
)

WAITING_FOR = ("quit", "cancel")
TASKS = 50
TARGET_US = 10.0
STATES: tuple[TaskState, ...] = ("running", "done", "retry_pending", "done")
NEXT: dict[str, TaskState] = {
    "pending": "running",
    "running": "done",
    "done": "retry_pending",
    "retry_pending": "running",
}
assert set(STATES) | set(NEXT.values()) <= set(get_args(TaskState))


def change(task: Task) -> None:
    """A task moved on, as an event of a run moves one: its state and retry count."""
    task.state = NEXT[task.state]
    task.retry_count = (task.retry_count + 1) % 3


def new_vm(k: int) -> GenerateVM:
    """The ``k``-th distinct vm: titles, states and retry counts depend on ``k``."""
    tasks = [
        Task(
            i,
            f"Page {i} <Title {k}>",
            f"page-{i}-{k}",
            state=STATES[(i + k) % len(STATES)],
            retry_count=(i * k) % 3,
            max_retries=2,
        )
        for i in range(1, TASKS + 1)
    ]
    return GenerateVM(
        state="running",
        max_retries=2,
        select_action=SelectAction(scenario="empty", next_action="generate"),
        catalog=Catalog(status="done", tool_name="write_catalog"),
        pages=Pages(tasks=TaskList(tasks), done=k % TASKS, total=TASKS),
    )


def warm_round(vm: GenerateVM, events: int, first: int) -> tuple[float, float]:
    """(ns per event with its edit, ns per edit alone), ``events`` distinct events."""
    tasks = vm.pages.tasks
    begin = time.perf_counter_ns()
    for k in range(first, first + events):
        change(tasks.edit(k % TASKS + 1))
        encode_event(encode_vm(vm), WAITING_FOR, False, "")
    with_edit = (time.perf_counter_ns() - begin) / events
    spare = new_vm(-1)  # the same edits, no encoding: a separate vm, never encoded
    spare_tasks = spare.pages.tasks
    begin = time.perf_counter_ns()
    for k in range(first, first + events):
        change(spare_tasks.edit(k % TASKS + 1))
    edit = (time.perf_counter_ns() - begin) / events
    return with_edit, edit


def cold_round(fresh: int, first: int) -> float:
    """ns per event, each the first encoding of a vm built beforehand."""
    vms = [new_vm(first + k) for k in range(fresh)]
    begin = time.perf_counter_ns()
    for vm in vms:
        encode_event(encode_vm(vm), WAITING_FOR, False, "")
    return (time.perf_counter_ns() - begin) / fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000, help="warm events per round")
    parser.add_argument("--fresh", type=int, default=5000, help="cold vms per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    vm = new_vm(0)
    lines = []
    for k in range(3 * TASKS):  # check: every warm event differs from the one before
        change(vm.pages.tasks.edit(k % TASKS + 1))
        lines.append(encode_event(encode_vm(vm), WAITING_FOR, False, ""))
    assert all(a != b for a, b in itertools.pairwise(lines))
    size = statistics.median(len(line) for line in lines)

    warm: list[float] = []
    edits: list[float] = []
    cold: list[float] = []
    for r in range(args.rounds):
        with_edit, edit = warm_round(vm, args.events, 3 * TASKS + r * args.events)
        warm.append(with_edit - edit)
        edits.append(edit)
        cold.append(cold_round(args.fresh, 1 + r * args.fresh))
    warm_us = statistics.median(warm) / 1e3
    cold_us = statistics.median(cold) / 1e3
    print(
        f"generate event of ~{size:.0f} bytes, {TASKS} tasks, titles escaped; "
        f"{args.rounds} rounds, medians"
    )
    print(
        f"warm (one task changed per event, {args.events} events a round): "
        f"{warm_us:6.2f} us per event (rounds {min(warm) / 1e3:.2f} to {max(warm) / 1e3:.2f}; "
        f"the edit itself, {statistics.median(edits) / 1e3:.2f} us, taken off)"
    )
    print(
        f"cold (a fresh vm never encoded, {args.fresh} a round):      "
        f"{cold_us:6.2f} us per event (rounds {min(cold) / 1e3:.2f} to {max(cold) / 1e3:.2f})"
    )
    verdict = "met" if warm_us <= TARGET_US else "MISSED"
    print(f"target (warm) <= {TARGET_US:g} us: {verdict}; cold: a figure")


if __name__ == "__main__":
    main()
