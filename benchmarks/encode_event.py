"""Encoding one event whose vm holds 50 page tasks. Target: <= 10 us.

Two figures: every task encoded (a fresh task list, the worst case), and the usual
event, where one task changed since the previous one (generate re-encodes only it).

    python benchmarks/encode_event.py
"""

from __future__ import annotations

import timeit

from simulator.core.envelope import encode_event, encode_vm
from statecharts.generate import GenerateVM, Pages, Task, TaskList

WAITING_FOR = ("quit", "cancel")
NUMBER = 20000


def tasks() -> list[Task]:
    return [
        Task(i, f"Page {i} <Title>", f"page-{i}", state="done", max_retries=2) for i in range(1, 51)
    ]


def best(statement: object) -> float:
    return min(timeit.repeat(statement, number=NUMBER, repeat=5)) / NUMBER * 1e6  # type: ignore[arg-type]


def main() -> None:
    vm = GenerateVM(state="running", max_retries=2, pages=Pages(done=50, total=50))
    plain = tasks()

    def every_task() -> bytes:
        vm.pages.tasks = TaskList(plain)
        return encode_event(encode_vm(vm), WAITING_FOR, False, "")

    def one_task() -> bytes:
        vm.pages.tasks.edit(25).retry_count = 0
        return encode_event(encode_vm(vm), WAITING_FOR, False, "")

    line = every_task()
    assert one_task() == line
    print(
        f"event of {len(line)} bytes with 50 tasks, every task encoded: {best(every_task):.2f} us"
    )
    print(f"the same event, one task changed since the last:   {best(one_task):.2f} us")
    print("target: <= 10 us")


if __name__ == "__main__":
    main()
