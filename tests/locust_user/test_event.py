"""simulator.locust_user.event: an event's head read off its line's end, its vm when looked at."""

from __future__ import annotations

import json

import pytest

from simulator.locust_user.event import Event, read_head

LINE = json.dumps(
    {
        "vm": {"state": "running", "note": ',"waiting_for":["x"]'},
        "waiting_for": ["quit"],
        "done": False,
        "error": 'a "quoted" ,"waiting_for": error',
    },
    separators=(",", ":"),
).encode()


def test_the_head_is_read_off_the_end_of_the_line_whatever_the_strings_hold() -> None:
    assert (
        read_head(LINE + b"\n")
        == read_head(LINE)
        == {
            "waiting_for": ["quit"],
            "done": False,
            "error": 'a "quoted" ,"waiting_for": error',
        }
    )


@pytest.mark.parametrize(
    "line",
    [
        b'{"waiting_for":[],"vm":{},"done":true,"error":""}',  # another order
        b'{"vm":[],"waiting_for":[],"done":true,"error":""}',  # a vm not an object
        b'{"vm":{},"waiting_for":[],"error":"","done":true}',  # its keys in another order
        b'{"vm":{},"waiting_for":[],"done":true,"error":"","more":1}',
        b'{"vm":{},"waiting_for":[],"done":tru',  # cut short
        b'{"vm":{},"done":true,"error":""}',
        b'{"vm":{},"extra":1,"waiting_for":[],"done":true,"error":""}',  # a key before it
        b'{"vm":{},"done":false,"waiting_for":[],"done":true,"error":""}',
        b'{"vm":{}} garbage ,"waiting_for":[],"done":true,"error":""}',
        b"",
    ],
)
def test_a_line_not_laid_out_as_zread_writes_its_envelope_has_no_head(line: bytes) -> None:
    assert read_head(line) is None


def test_an_event_decodes_its_vm_only_when_looked_at() -> None:
    broken = b'{"vm":{"state":x},"waiting_for":[],"done":true,"error":""}'
    head = read_head(broken)
    assert head is not None
    event = Event(broken, head)
    assert event["done"] is True and event.get("waiting_for") == []
    with pytest.raises(ValueError, match="malformed"):
        event["vm"]
    whole = Event(LINE, read_head(LINE) or {})
    assert whole["vm"]["state"] == "running" and whole.get("missing", 7) == 7
    assert dict(whole) == json.loads(LINE) and len(whole) == 4 and "vm" in whole
    assert dict(Event(LINE + b"\n", read_head(LINE) or {})) == json.loads(LINE)
