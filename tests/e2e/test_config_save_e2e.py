"""``config --stdio --home D`` saving over a config.yaml of the user's, end to end: what
the save keeps, what it refuses, and the temporary file it leaves nowhere."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import Proc

SAVE = {"type": "save", "params": {}}


def update(fields: dict[str, str]) -> dict[str, Any]:
    return {"type": "update_fields", "params": {"fields": fields}}


def home_with(tmp_path: Path, config: bytes) -> Path:
    """A HOME whose ``.zread/config.yaml`` holds ``config`` (0600)."""
    home = tmp_path / "home"
    (home / ".zread").mkdir(parents=True, mode=0o700)
    path = home / ".zread" / "config.yaml"
    path.write_bytes(config)
    path.chmod(0o600)
    return home


def save(home: Path, fields: dict[str, str]) -> tuple[Proc, list[dict[str, Any]]]:
    """A config process on ``home`` that updates ``fields`` and saves, ended; with the
    events after the save."""
    with Proc("config", "--home", str(home), files=True) as p:
        p.read_event()
        p.send(update(fields))
        p.read_event()
        p.send(SAVE)
        rest = p.read_rest(10)
        p.wait()
    return p, [json.loads(line) for line in rest.splitlines()]


def temporary_files(home: Path) -> list[str]:
    return sorted(name for name in os.listdir(home / ".zread") if name.endswith(".tmp"))


# -- what a save keeps ---------------------------------------------------------------------


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_a_save_keeps_every_line_end_and_the_anchor_on_its_key(tmp_path: Path, end: bytes) -> None:
    lines = [
        b"# my settings",
        b"language: &lang en   # the one I read",
        b"doc_language: *lang",
        b"llm:",
        b"    model: glm-4.6",
        b"    api_key: sk-mine",
    ]
    home = home_with(tmp_path, end.join(lines) + end)
    p, after = save(home, {"language": "fr", "llm_model": "glm-5"})
    assert p.popen.returncode == 0, p.stderr
    assert after[-1]["done"] is True and after[-1]["vm"]["saved"] is True
    expected = [
        b"# my settings",
        b"language: &lang fr   # the one I read",
        b"doc_language: en",
        b"llm:",
        b"    model: glm-5",
        b"    api_key: sk-mine",
    ]
    assert (home / ".zread" / "config.yaml").read_bytes() == end.join(expected) + end
    assert temporary_files(home) == []


def test_a_file_of_mixed_line_ends_keeps_each_lines_own(tmp_path: Path) -> None:
    old = b"# mine\r\nlanguage: en\nllm:\r\n    model: glm-4.6\r"
    home = home_with(tmp_path, old)
    p, _ = save(home, {"llm_model": "glm-5"})
    assert p.popen.returncode == 0, p.stderr
    assert (home / ".zread" / "config.yaml").read_bytes() == old.replace(b"4.6", b"5")


# -- what a save refuses -------------------------------------------------------------------

REFUSED = {
    "a tab after key:": (
        b"# my settings\nlanguage: en\nllm:\n    model: glm-4.6\n    api_key:\tsk-mine\n",
        5,
        "found character '\\t' that cannot start any token",
    ),
    "a key written twice": (
        b"# my settings\nllm:\n    model: glm-4.6\n# again\nllm:\n    api_key: sk-mine\n",
        5,
        "llm is written twice, on lines 2 and 5",
    ),
}


@pytest.mark.parametrize(("old", "line", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_a_file_the_save_cannot_keep_is_refused_in_one_line_and_left_as_it_is(
    tmp_path: Path, old: bytes, line: int, why: str
) -> None:
    home = home_with(tmp_path, old)
    path = home / ".zread" / "config.yaml"
    os.utime(path, (1_000_000_000, 1_000_000_000))
    p, after = save(home, {"llm_model": "glm-5"})
    assert p.popen.returncode == 2
    stderr = p.stderr
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"zread-sim: {path}: line {line} cannot be kept"), stderr
    assert why in stderr and "sk-mine" not in stderr
    assert not any(event["vm"]["saved"] for event in p.events + after)
    assert path.read_bytes() == old
    assert path.stat().st_mtime == 1_000_000_000
    assert temporary_files(home) == []


# -- the temporary file of a save -----------------------------------------------------------


def plant_stale_temp(home: Path) -> Path:
    """The file a save killed before its rename leaves: replace_file's name for it,
    the new config with a key, 0600, an hour old."""
    path = home / ".zread" / f".config.yaml.{secrets.token_hex(4)}.tmp"
    path.write_bytes(b"llm:\n    api_key: sk-new\n")
    path.chmod(0o600)
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))
    return path


def quit_config(home: Path) -> None:
    with Proc("config", "--home", str(home), files=True) as p:
        p.read_event()
        p.send({"type": "quit", "params": {}})
        p.read_until_done()
        p.finish()


def test_a_killed_saves_temporary_file_is_removed_by_the_next_run(tmp_path: Path) -> None:
    home = home_with(tmp_path, b"# mine\nlanguage: en\n")
    plant_stale_temp(home)
    (home / "elsewhere").write_text("the user's\n")
    link = home / ".zread" / ".config.yaml.0a1b2c3d.tmp"
    link.symlink_to(home / "elsewhere")  # named as one, but a link: not zread's file
    quit_config(home)
    assert temporary_files(home) == [link.name]
    assert link.is_symlink() and (home / "elsewhere").read_text() == "the user's\n"


def test_the_next_save_removes_a_killed_saves_temporary_file(tmp_path: Path) -> None:
    home = home_with(tmp_path, b"# mine\nlanguage: en\n")
    plant_stale_temp(home)
    p, _ = save(home, {"language": "fr"})
    assert p.popen.returncode == 0, p.stderr
    assert temporary_files(home) == []
    assert (home / ".zread" / "config.yaml").read_bytes() == b"# mine\nlanguage: fr\n"


def test_the_temporary_file_of_a_save_still_running_is_kept(tmp_path: Path) -> None:
    home = home_with(tmp_path, b"# mine\nlanguage: en\n")
    temp = plant_stale_temp(home)
    fd = os.open(home / ".zread", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a save holds while its file exists
        quit_config(home)
        assert temp.exists()
    finally:
        os.close(fd)
    quit_config(home)
    assert not temp.exists()
