"""simulator.tools.cassette: redaction of what a cassette stores, the cassette's
layout, and the refusal of what is not a cassette."""

from __future__ import annotations

import datetime
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from simulator.errors import ConfigurationError
from simulator.tools.cassette import (
    CASSETTE_FORMAT,
    CASSETTE_VERSION,
    RecordError,
    Redactor,
    assemble,
    check_out_path,
    decode_line,
    dumps,
    encode_line,
    home_keys,
    read_cassette,
    write_cassette,
)
from tests.tools.recording import VERSION_EVENT, cassette, event, line

# -- redaction -------------------------------------------------------------------------


def test_api_keys_url_tokens_and_patterns_are_redacted() -> None:
    redactor = Redactor([r"hunter\d+"])
    command = line({"type": "update_fields", "params": {"fields": {"llm_api_key": "sk-abc"}}})
    assert b"sk-abc" not in redactor.line(command)
    url = (
        "https://zread.ai/oauth/authorize?client_id=zread-cli\\u0026state=562958af"
        "\\u0026code=C0DE\\u0026access_token=T0K\\u0026response_type=code"
    )
    redacted = redactor.line(b'{"vm":{"authorize_url":"' + url.encode() + b'"}}').decode()
    for secret in ("562958af", "C0DE", "T0K"):
        assert secret not in redacted
    assert "client_id=zread-cli" in redacted and "response_type=code" in redacted
    assert redactor.text("http://x/cb?state=abc&token=def pass hunter2") == (
        "http://x/cb?state=***&token=*** pass ***"
    )


def test_a_key_is_hidden_in_every_spelling_once_a_line_or_an_event_named_it() -> None:
    redactor = Redactor()
    shown = event(
        {"fields": [{"json_key": "llm_api_key", "initial": "sk-from-config", "value": "x"}]},
        ["save", "quit"],
    )
    assert b"sk-from-config" not in redactor.line(shown)
    escaped = b'{"type":"update_fields","params":{"fields":{"LLM_\\u0041PI_KEY":"sk-typed-1"}}}'
    assert b"sk-typed" not in redactor.line(escaped)
    for later in (b"{'note': 'sk-\\u0074yped-1'", b"error: sk-from-config"):
        assert redactor.line(later).count(b"***") == 1, later
    assert redactor.text("cwd /home/sk-typed-1") == "cwd /home/***"


def test_the_key_in_homes_config_is_known_before_the_program_runs(tmp_path: Path) -> None:
    (tmp_path / ".zread").mkdir()
    (tmp_path / ".zread" / "config.yaml").write_text("llm:\n  api_key: sk-home-key-1\n")
    assert home_keys(str(tmp_path)) == ["sk-home-key-1"]
    (tmp_path / ".zread" / "config.yaml").write_text("llm: [broken\n")
    assert home_keys(str(tmp_path)) == []
    assert home_keys(None) == []


def test_a_bad_pattern_is_refused() -> None:
    with pytest.raises(RecordError, match="not a regular expression"):
        Redactor(["("])
    with pytest.raises(RecordError, match="empty string"):
        Redactor(["x*"])
    assert issubclass(RecordError, ConfigurationError)


# -- writing ------------------------------------------------------------------------------


def run_of(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """A cassette as a recording assembles it, with ``changes`` to its arguments."""
    arguments: dict[str, Any] = {
        "program": ["zread", "version", "--stdio"],
        "command": "version",
        "env": {"HOME": "/home/someone", "PATH": "/bin"},
        "cwd": tmp_path,
        "started": datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC),
        "duration": 0.25,
        "exit_code": 0,
        "patterns": 0,
        "files": [],
        "lines": [{"t": 0.01, "dir": "out", "n": 1, **encode_line(VERSION_EVENT)}],
        "redactor": Redactor(),
    }
    arguments.update(changes)
    return assemble(**arguments)


def test_a_run_is_assembled_with_its_keys_in_order_and_only_the_envs_names(
    tmp_path: Path,
) -> None:
    doc = run_of(tmp_path, patterns=2)
    assert list(doc) == [
        "format", "version", "argv", "command", "env", "cwd", "started", "duration",
        "exit_code", "redacted", "files", "lines",
    ]  # fmt: skip
    assert doc["format"] == CASSETTE_FORMAT and doc["version"] == CASSETTE_VERSION == 1
    assert doc["env"] == ["HOME", "PATH"] and "/bin" not in json.dumps(doc)
    assert doc["started"] == "2024-05-06T07:08:09.123Z"
    assert doc["redacted"] == {"api_keys": True, "url_tokens": True, "patterns": 2}


def test_the_argv_is_redacted_before_the_cwd_and_the_files_paths(tmp_path: Path) -> None:
    # A key the argv names is hidden in the paths that follow it.
    change = {"root": "project", "path": ".zread/sk-argv-1/x", "sha256": "ab", "change": "created"}
    doc = run_of(
        tmp_path / "sk-argv-1",
        program=["zread", "llm_api_key=sk-argv-1", "pass=hunter2"],
        files=[change],
        redactor=Redactor([r"hunter\d"]),
    )
    assert doc["argv"] == ["zread", "llm_api_key=***", "pass=***"]
    assert doc["cwd"] == str(tmp_path / "***")
    assert doc["files"] == [{**change, "path": ".zread/***/x"}]
    assert change["path"] == ".zread/sk-argv-1/x"  # what it was given is left as it was


def test_a_line_that_is_not_utf8_is_kept_in_base64() -> None:
    assert encode_line(b'{"a":"\xc3\xa9"}') == {"line": '{"a":"\u00e9"}'}
    raw = b"\xff\xfe not text"
    entry = encode_line(raw)
    assert set(entry) == {"line_b64"} and decode_line(entry) == raw
    with pytest.raises(ValueError, match="neither line nor line_b64"):
        decode_line({"t": 0})


def test_the_cassette_is_written_one_entry_a_line_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    out = tmp_path / "c.json"
    lines = [
        {"t": 0.0, "dir": "in", "n": 1, **encode_line(b"\xff")},
        {"t": 0.01, "dir": "out", "n": 1, **encode_line(VERSION_EVENT), "eol": False},
    ]
    doc = run_of(tmp_path, lines=lines)
    write_cassette(out, doc)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text()
    assert text.startswith('{\n  "format": "zread-sim-cassette",\n  "version": 1,\n')
    assert '  "files": [],\n' in text
    assert '  "lines": [\n    {"t": 0.0, "dir": "in", "n": 1, "line_b64": "/w=="},\n    {' in text
    assert text.endswith("\n  ]\n}\n") and text.isascii()
    assert text == dumps(doc)
    back = read_cassette(out)
    assert back == json.loads(text) == doc
    assert [decode_line(entry) for entry in back["lines"]] == [b"\xff", VERSION_EVENT]


def test_where_a_cassette_cannot_go_is_said_before_and_while_writing(tmp_path: Path) -> None:
    check_out_path(tmp_path / "fine.json")
    with pytest.raises(RecordError, match=r"^--out .*: is a directory$"):
        check_out_path(tmp_path)
    with pytest.raises(RecordError, match=r"^--out .*: no such directory .*nowhere$"):
        check_out_path(tmp_path / "nowhere" / "c.json")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(RecordError, match=r"^--out .*: cannot write the cassette \(Not a dir"):
        write_cassette(blocker / "c.json", cassette([]))
    assert sorted(os.listdir(tmp_path)) == ["a-file"]


def test_a_fifo_or_a_device_is_no_cassette_to_write_or_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), (Path(os.devnull), "a character device")):
        with pytest.raises(RecordError, match=rf"^--out {path}: not a regular file \({what}\)$"):
            check_out_path(path)
        with pytest.raises(RecordError, match=rf"^--out {path}: not a regular file \({what}\)$"):
            write_cassette(path, cassette([]))  # no reader: refused, not waited on
        with pytest.raises(RecordError, match=rf"^{path}: not a regular file \({what}\)$"):
            read_cassette(path)  # no writer: refused, not waited on
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


# -- reading ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not a cassette (not JSON: "),
        ("[" * 5000 + "]" * 5000, "nest"),
        ('{"format": "other"}', 'not a cassette (no format "zread-sim-cassette")'),
        (json.dumps(cassette([], version=2)), "cassette version 2 is not supported"),
        (json.dumps(cassette([], version="1")), "cassette version '1' is not supported"),
        (json.dumps(cassette({"n": 1})), "not a cassette (no list of lines)"),
        (json.dumps(cassette([{"t": 0, "dir": "out"}])), "line entry 1 is broken (it needs t"),
        (
            json.dumps(cassette([{"t": 0, "dir": "out", "n": 1, "line": ""}, {"dir": "x"}])),
            "line entry 2 is broken (it needs t, dir and n)",
        ),
        (
            json.dumps(cassette([{"t": 0, "dir": "err", "n": 1}])),
            "line entry 1 is broken (a line has neither line nor line_b64)",
        ),
        (
            json.dumps(cassette([{"t": 0, "dir": "in", "n": 1, "line_b64": "!!"}])),
            "line entry 1 is broken (",
        ),
    ],
)
def test_what_is_not_a_cassette_is_refused_naming_the_file(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(RecordError) as caught:
        read_cassette(path)
    message = str(caught.value)
    assert str(path) in message and says in message, message
    assert "\n" not in message and "Traceback" not in message


def test_a_missing_cassette_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match=r"missing\.json: cannot read \(No such file"):
        read_cassette(tmp_path / "missing.json")


def test_out_of_descriptors_reading_one_is_raised_not_a_record_error(tmp_path: Path) -> None:
    from tests.e2e.helpers import run_starved

    (tmp_path / "c.json").write_text("{}")
    done = run_starved(
        "from pathlib import Path\nfrom simulator.tools.cassette import read_cassette",
        "try:\n"
        f"    read_cassette(Path({str(tmp_path / 'c.json')!r}))\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, getattr(err, 'errno', None))\n",
        spare=0,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"OSError {errno.EMFILE}\n"
