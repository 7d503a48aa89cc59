"""What hiding API keys costs a journaled line. Target: a line with no mark of a key
costs <= 5 % of what a journaled process does with it.

Every line the journal writes goes through the session's registry of keys
(``Secrets.redact_line``, ``simulator.core.secrets``), with the world's key known, as
in a process. Timed, each a loop of ``--lines`` calls divided by their number, the
median of ``--rounds`` interleaved rounds:

- **command**: a command line with no mark (no backslash, no ``_k``, no known key);
- **event**: a 50-page generate event as the session wrote it (no mark either);
- **escaped**: a login event holding ``\\u0026`` in its URL: a backslash, so its escapes
  are undone and looked into, but no key;
- **key**: an ``update_fields`` line setting the key with its name escaped: found by
  name, hidden, the line rebuilt;
- **journaled**: what a process with ``--journal`` does with the command, but write
  its event to stdout: ``Session.feed`` (which learns from it: the one search),
  ``JournalWriter.line`` (its record: the same object, found clean already) and
  ``JournalWriter.event`` of its event (refused in generate's ``select_action``: the
  previous vm, and an error quoting the command, ``\\"`` escapes but no mark). What
  the redaction of an unmarked line is set against.

Each call is given a fresh copy of its line: a registry remembers the last line it
found clean, as a session learns from each line before its journal writes that same
object, and a copy is what a new line costs.

    python benchmarks/redaction.py [--lines 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from simulator.core.secrets import Secrets
from simulator.hosts.journal import JournalWriter
from simulator.launch import build_session

TARGET = 0.05
COMMAND = b'{"type":"select_action","params":{"action":"generate"}}'
KEYED = b'{"type":"update_fields","params":{"fields":{"llm_\\u0061pi_key":"sk-bench-0001"}}}'


def events(command: str, *args: str, first: bytes = b"") -> list[bytes]:
    session = build_session(command, args, speed=0.0, scenario="default")
    lines = list(session.start())
    if first:
        lines.extend(session.feed(first))
    while (deadline := session.next_deadline()) is not None and len(lines) < 500:
        lines.extend(session.advance(deadline))
    return lines


def per_call_ns(call: Callable[[bytes], object], line: bytes, count: int) -> float:
    """Each call on a fresh copy of ``line``: a registry remembers the last line it
    found clean (the session learns from a line, then its journal writes that object)."""
    copies = [bytes(bytearray(line)) for _ in range(count)]
    start = time.perf_counter_ns()
    for copy in copies:
        call(copy)
    return (time.perf_counter_ns() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    secrets = Secrets(["sk-sim-0000000000000000"])
    event = max(events("generate", "-y"), key=len)
    region = b'{"type":"select_region","params":{"region":"cn"}}'
    escaped = next(line for line in events("login", first=region) if b"\\u0026" in line)
    for line in (COMMAND, event):
        assert secrets.redact_line(line) is line, "an unmarked line must pass as it is"
    with tempfile.TemporaryDirectory() as folder:
        journal = JournalWriter.open(os.path.join(folder, "j.jsonl"), warn=print, pid=1)
        session = build_session("generate", (), speed=0.0)
        session.start()
        journal.secrets = secrets = session.secrets
        session.transcript.listener = journal.line

        def journaled(line: bytes) -> None:
            for event in session.feed(line):
                journal.event(0.0, event, "select_action")

        cases: dict[str, tuple[Callable[[bytes], object], bytes]] = {
            "command": (secrets.redact_line, COMMAND),
            "event": (secrets.redact_line, event),
            "escaped": (secrets.redact_line, escaped),
            "key": (lambda line: Secrets().redact_line(line), KEYED),
            "journaled": (journaled, COMMAND),
        }
        rounds: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (call, line) in cases.items():
                rounds[name].append(per_call_ns(call, line, args.lines))
        journal.close()
    median = {name: statistics.median(samples) for name, samples in rounds.items()}
    sizes = {"command": len(COMMAND), "event": len(event), "escaped": len(escaped)}
    for name, ns in median.items():
        size = f" ({sizes[name]} bytes)" if name in sizes else ""
        print(f"{name:8} {ns / 1000:8.2f} us{size}")
    share = median["command"] / median["journaled"]
    print(f"an unmarked command: {share:.1%} of its journaled handling (target <= {TARGET:.0%})")
    print("met" if share <= TARGET else "MISSED")


if __name__ == "__main__":
    main()
