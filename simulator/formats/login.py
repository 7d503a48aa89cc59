"""``login.json``: who is logged in.

Owns: :class:`LoginRecord`, :func:`encode_login` and :func:`decode_login`. zread's own
format is not known: the simulator writes ``{"username", "region", "model",
"logged_in_at"}`` in wiki.json's layout (:mod:`simulator.formats.gojson`), and reads any
JSON object (keys it does not write are ignored, missing ones are empty), so a real
zread's file is "logged in" too.

Must not: do I/O or read the clock (the caller gives the time).
"""

from __future__ import annotations

import datetime as dt

import msgspec

from simulator.formats import gojson
from simulator.formats.bounds import decode_json
from simulator.formats.ids import go_time


class LoginRecord(msgspec.Struct, kw_only=True):
    """What login.json says (the simulator's format; other keys are ignored on read)."""

    username: str = ""
    region: str = ""
    model: str = ""
    logged_in_at: str = ""


_LOGIN_DECODER = msgspec.json.Decoder(LoginRecord)


def encode_login(username: str, region: str, model: str, *, logged_in_at: dt.datetime) -> bytes:
    """login.json's bytes (the simulator's choice of format, wiki.json's layout);
    ``logged_in_at`` is written as Go's UTC time."""
    record = LoginRecord(
        username=username, region=region, model=model, logged_in_at=go_time(logged_in_at)
    )
    return gojson.encode(record)


def decode_login(data: bytes, name: str = "login.json") -> LoginRecord:
    """What a login.json says, or :class:`~simulator.formats.bounds.FormatError`: too
    large, too deep, not JSON, not an object."""
    return decode_json(data, _LOGIN_DECODER, "login.json", name)
