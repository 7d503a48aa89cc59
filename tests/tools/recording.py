"""What the tests of recording and checking share: lines as zread and a client write
them, and a cassette around given line entries."""

from __future__ import annotations

import json
from typing import Any

from simulator.tools.cassette import CASSETTE_FORMAT


def line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def event(vm: dict[str, Any], waiting_for: list[str], done: bool = False, error: str = "") -> bytes:
    return line({"vm": vm, "waiting_for": waiting_for, "done": done, "error": error})


def cassette(lines: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "format": CASSETTE_FORMAT,
        "version": 1,
        "argv": ["zread", "version", "--stdio"],
        "command": "version",
        "exit_code": 0,
        "duration": 0.1,
        "lines": lines,
        **extra,
    }


VERSION_EVENT = event(
    {"version": "0.2.13", "channel": "", "go_version": "go1", "os": "linux", "arch": "amd64"},
    [],
    done=True,
)
