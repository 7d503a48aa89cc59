"""Encoding one event whose vm holds 50 page tasks. Target: <= 10 us.

python benchmarks/encode_event.py
"""

from __future__ import annotations

import timeit

from simulator.envelope import encode_event, encode_vm
from statecharts.generate import GenerateVM, Pages, Task


def main() -> None:
    tasks = [
        Task(i, f"Page {i} <Title>", f"page-{i}", state="done", max_retries=2) for i in range(1, 51)
    ]
    vm = GenerateVM(state="running", max_retries=2, pages=Pages(tasks=tasks, done=50, total=50))
    waiting_for = ("quit", "cancel")
    number = 20000
    seconds = min(
        timeit.repeat(
            lambda: encode_event(encode_vm(vm), waiting_for, False, ""), number=number, repeat=5
        )
    )
    line = encode_event(encode_vm(vm), waiting_for, False, "")
    per_event = seconds / number * 1e6
    print(f"event of {len(line)} bytes with 50 tasks: {per_event:.2f} us (target <= 10 us)")


if __name__ == "__main__":
    main()
