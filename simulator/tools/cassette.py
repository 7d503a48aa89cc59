"""The cassette: what ``zread-sim record`` writes and ``check`` and ``replay:`` read
(JSON, ``docs/record.md``).

Owns:

- **the format**: :data:`CASSETTE_FORMAT`, :data:`CASSETTE_VERSION`, the keys and their
  order (:func:`assemble`), a line's entry (:func:`encode_line`, :func:`decode_line`),
  the layout on disk (:func:`dumps`: one key a line, one line or file entry a line);
- **writing** it (:func:`check_out_path` before the program runs, :func:`write_cassette`
  after, mode 0600) and **reading** it (:func:`read_cassette`, which refuses what is not
  a cassette of this version, naming the file and the entry);
- **redaction** of what it stores (:class:`Redactor`, over
  ``simulator.core.redaction``): API keys, by name in any spelling and by value wherever
  they occur once known (HOME's ``config.yaml``'s, :func:`home_keys`; one a line
  named, one an event showed), the values of secret-looking query parameters of any URL
  (``state=``, ``code=``, ``…token=`` …, the tokens of ``authorize_url``), and the
  user's ``--redact`` regexes;
- :class:`RecordError`, the one error of recording and checking.

Must not: run a program, touch the client's streams, or judge a line against the charts
(:mod:`simulator.tools.conformance` does); write anywhere but the path it is given;
write a secret, an environment value or a ``--redact`` pattern itself.
Must not be imported by the core, scenarios, runners or hosts.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from simulator.core import redaction
from simulator.errors import ConfigurationError
from simulator.formats.bounds import (
    LIMITS,
    FormatError,
    check_json_nesting,
    check_size,
    in_words,
)
from simulator.hosts import limits
from simulator.regularfile import REPLACE, NotRegularFile, open_regular, read_regular, refusal

CASSETTE_FORMAT: Final = "zread-sim-cassette"
CASSETTE_VERSION: Final = 1
DIRECTIONS: Final = {"in": "stdin", "out": "stdout", "err": "stderr"}
"""A line's direction in a cassette, and the stream it travelled on."""


class RecordError(ConfigurationError):
    """Bad input to record or check (a flag, a pattern, a program, a cassette): one
    line on stderr, exit 2."""


# -- redaction ----------------------------------------------------------------------------


class Redactor(redaction.Redactor):
    """Everything written into a cassette or a report goes through :meth:`text` or
    :meth:`line` first (:class:`simulator.core.redaction.Redactor`); a bad ``--redact``
    pattern is a :class:`RecordError`."""

    def __init__(self, patterns: Sequence[str] = (), keys: Sequence[str] = ()) -> None:
        try:
            super().__init__(patterns, keys)
        except ValueError as exc:
            raise RecordError(f"--redact: {exc}") from None


def home_keys(home: str | None) -> list[str]:
    """The API key in HOME's ``config.yaml`` (what the program will read), if any."""
    from simulator.hosts.userfiles import UserFiles
    from simulator.scenario.world import World

    with contextlib.suppress(Exception):  # a config it cannot read is the program's to say
        return [UserFiles(Path(home)).world(World()).config.llm_api_key] if home else []
    return []


# -- JSON and lines -----------------------------------------------------------------------


def decode_json(raw: bytes) -> Any:
    """One JSON text; ValueError in the simulator's words (msgspec's) when it is not."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.ValidationError as exc:  # a number msgspec cannot hold
        raise ValueError(in_words(exc)) from None
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("nested too deep") from None


def compact(value: Any) -> str:
    """``value`` as compact JSON, for a message."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_line(raw: bytes) -> dict[str, Any]:
    """A line's bytes in an entry: ``line`` (UTF-8 text), else ``line_b64``."""
    try:
        return {"line": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"line_b64": base64.b64encode(raw).decode("ascii")}


def decode_line(entry: Mapping[str, Any]) -> bytes:
    """An entry's line as bytes; ValueError when it has none."""
    if isinstance(entry.get("line"), str):
        return str(entry["line"]).encode("utf-8", "surrogateescape")
    if isinstance(entry.get("line_b64"), str):
        return base64.b64decode(str(entry["line_b64"]), validate=True)
    raise ValueError("a line has neither line nor line_b64")


# -- writing ------------------------------------------------------------------------------


def assemble(
    *,
    program: Sequence[str],
    command: str | None,
    env: Mapping[str, str],
    cwd: Path,
    started: datetime.datetime,
    duration: float,
    exit_code: int,
    patterns: int,
    files: list[dict[str, Any]],
    lines: list[dict[str, Any]],
    redactor: Redactor,
) -> dict[str, Any]:
    """One run's cassette, its keys in their order: the argv, the cwd and the files'
    paths redacted (in that order: what one names is hidden in the next), the
    environment's variable names only, ``patterns`` the count of ``--redact`` patterns
    (``lines`` come redacted, as they passed)."""
    argv = [redactor.text(word) for word in program]
    where = redactor.text(str(cwd))
    changes = [{**change, "path": redactor.text(change["path"])} for change in files]
    return {
        "format": CASSETTE_FORMAT,
        "version": CASSETTE_VERSION,
        "argv": argv,
        "command": command,
        "env": sorted(env),
        "cwd": where,
        "started": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "duration": duration,
        "exit_code": exit_code,
        "redacted": {"api_keys": True, "url_tokens": True, "patterns": patterns},
        "files": changes,
        "lines": lines,
    }


def dumps(cassette: Mapping[str, Any]) -> str:
    """The cassette's JSON: one key a line, one line or file entry a line (ASCII)."""
    parts = []
    for key, value in cassette.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            items = ",\n    ".join(json.dumps(item) for item in value)
            text = "[\n    " + items + "\n  ]"
        else:
            text = json.dumps(value)
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def check_out_path(out: Path) -> None:
    """:class:`RecordError` when a cassette cannot be written at ``out``."""
    if out.is_dir():
        raise RecordError(f"--out {out}: is a directory")
    with contextlib.suppress(OSError):
        mode = out.stat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO would hold the writer for ever, a device eat it
            raise RecordError(str(refusal(f"--out {out}", mode)))
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise RecordError(f"--out {out}: no such directory {parent}")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise RecordError(f"--out {out}: not writable")


def write_cassette(out: Path, cassette: Mapping[str, Any]) -> None:
    """``cassette`` at ``out``, readable by its owner only (:func:`dumps`)."""
    try:  # 0600: a cassette holds what both sides said, redacted or not
        fd = open_regular(str(out), f"--out {out}", REPLACE)
        with open(fd, "w", encoding="utf-8") as file:
            file.write(dumps(cassette))
    except OSError as exc:
        limits.reraise(exc)  # out of descriptors: the machine's, said as such
        raise RecordError(f"--out {out}: cannot write the cassette ({exc.strerror})") from None
    except NotRegularFile as exc:
        raise RecordError(str(exc)) from None


# -- reading ------------------------------------------------------------------------------


def read_cassette(path: Path) -> dict[str, Any]:
    """The cassette at ``path``; :class:`RecordError` when it cannot be read as one."""
    doc = _check_header(_read_json(path), path)
    _check_lines(doc.get("lines"), path)
    return doc


def _read_json(path: Path) -> Any:
    """The JSON at ``path``, within the cassette's bounds."""
    try:
        data = read_regular(str(path), str(path), LIMITS["cassette"])
        check_size(data, "cassette", str(path))
        check_json_nesting(data, str(path))
        return decode_json(data)
    except OSError as exc:
        limits.reraise(exc)
        raise RecordError(f"{path}: cannot read ({exc.strerror})") from None
    except (FormatError, NotRegularFile) as exc:
        raise RecordError(str(exc)) from None
    except ValueError as exc:
        raise RecordError(f"{path}: not a cassette (not JSON: {exc})") from None


def _check_header(doc: Any, path: Path) -> dict[str, Any]:
    """``doc`` when it says it is a cassette of this version."""
    if not isinstance(doc, dict) or doc.get("format") != CASSETTE_FORMAT:
        raise RecordError(f"{path}: not a cassette (no format {compact(CASSETTE_FORMAT)})")
    if doc.get("version") != CASSETTE_VERSION:
        raise RecordError(f"{path}: cassette version {doc.get('version')!r} is not supported")
    return doc


def _check_lines(lines: Any, path: Path) -> None:
    """:class:`RecordError` naming the first entry of ``lines`` that is not a line."""
    if not isinstance(lines, list):
        raise RecordError(f"{path}: not a cassette (no list of lines)")
    for index, entry in enumerate(lines, 1):
        try:
            _check_entry(entry)
        except ValueError as exc:
            raise RecordError(f"{path}: line entry {index} is broken ({exc})") from None


def _check_entry(entry: Any) -> None:
    """ValueError saying what a line entry lacks."""
    ok = (
        isinstance(entry, dict)
        and entry.get("dir") in DIRECTIONS
        and isinstance(entry.get("n"), int)
        and isinstance(entry.get("t"), int | float)
    )
    if not ok:
        raise ValueError("it needs t, dir and n")
    decode_line(entry)
