"""End-to-end: the simulator under a real ``ulimit -n``, from 5 (about the fewest the
interpreter starts with) to 12, run cold: the descriptors at stake are those of the
process's own start-up, which a served child (it takes the launcher's limits too) never
opens.

At each limit a run does what it does with no limit, or it ends with one line on
stderr naming what ran out, what it was doing and the limit, exit 2, no traceback; what
is on disk never contradicts what it said: never ``no_wiki`` with a wiki on disk, never
``serving`` from a server that answers nothing, never a save reported that was not
written, never a config called "not a regular file".
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import Proc

LIMITS = range(5, 13)
TIMEOUT = 20.0
"""Generous: a run at a low limit on a loaded machine is still a normal run."""


def out_of_descriptors(n: int) -> re.Pattern[str]:
    """The one stderr line of a run out of descriptors at ``ulimit -n n``."""
    doing = r"[a-z' .\-/]+"
    return re.compile(rf"zread-sim: out of file descriptors while {doing} \(ulimit -n is {n}\)\n")


def events_of(p: Proc) -> list[dict[str, Any]]:
    """Every event the process wrote, to the end of its stdout."""
    rest = p.read_rest(TIMEOUT)
    return [json.loads(line) for line in [*p.raw, *rest.splitlines(keepends=True)]]


def ended_out_of_descriptors(p: Proc, n: int) -> bool:
    """Whether the run ended out of descriptors (checked: one line, exit 2); False
    when it ran to its end, exit 0, stderr silent."""
    rc = p.wait(TIMEOUT)
    stderr = p.stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    if rc == 0:
        assert stderr == "", stderr
        return False
    assert rc == 2, (rc, stderr)
    assert out_of_descriptors(n).fullmatch(stderr), stderr
    return True


@pytest.fixture
def wiki(tmp_path: Path) -> tuple[Path, Path]:
    """A project with a wiki generated into it (no limit), and its HOME."""
    project, home = tmp_path / "P", tmp_path / "H"
    project.mkdir()
    home.mkdir()
    with Proc("generate", "-y", "--project", str(project), "--home", str(home), files=True) as p:
        assert p.read_until_done(TIMEOUT)["vm"]["state"] == "done"
        p.finish()
    assert (project / ".zread/wiki/current").is_file()
    return project, home


@pytest.mark.parametrize("n", LIMITS)
def test_browse_serves_a_page_or_says_it_is_out_of_descriptors(
    wiki: tuple[Path, Path], n: int
) -> None:
    project, home = wiki
    argv = ("--project", str(project), "--home", str(home), "--port", "0")
    with Proc("browse", *argv, files=True, nofile=n) as p:
        served = None
        with contextlib.suppress(AssertionError):  # stdout ended first
            served = p.read_until(lambda e: e["vm"]["state"] == "serving", TIMEOUT)
        if served is not None and not served["done"]:
            with urllib.request.urlopen(served["vm"]["url"] + "/", timeout=TIMEOUT) as answer:
                assert answer.status == 200
                assert b"<a href=" in answer.read()
            p.send({"type": "quit"})
            p.read_until_done(TIMEOUT)
        states = [event["vm"]["state"] for event in events_of(p)]
        assert "no_wiki" not in states  # a wiki is on disk
        out = ended_out_of_descriptors(p, n)
        assert out != ("serving" in states), (states, p.stderr_so_far())


@pytest.mark.parametrize("n", LIMITS)
def test_config_saves_or_says_it_is_out_of_descriptors(tmp_path: Path, n: int) -> None:
    home = tmp_path / "H"
    (home / ".zread").mkdir(parents=True)
    config = home / ".zread/config.yaml"
    config.write_text("language: en\n")
    with Proc("config", "--home", str(home), files=True, nofile=n) as p:
        change = {"type": "update_fields", "params": {"fields": {"language": "zh"}}}
        p.write(b"".join(json.dumps(c).encode() + b"\n" for c in (change, {"type": "save"})))
        p.send({"type": "quit"})
        p.close_stdin()
        events = events_of(p)
        out = ended_out_of_descriptors(p, n)
    saved = config.read_text()
    if out:
        assert saved == "language: en\n"  # nothing half-written
        assert not (events and events[-1]["done"])
    else:
        assert "language: zh" in saved
        assert events[-1]["done"]
        assert all(event["error"] == "" for event in events)


@pytest.mark.parametrize("n", LIMITS)
def test_generate_writes_its_wiki_or_says_it_is_out_of_descriptors(tmp_path: Path, n: int) -> None:
    project, home = tmp_path / "P", tmp_path / "H"
    project.mkdir()
    home.mkdir()
    argv = ("-y", "--project", str(project), "--home", str(home))
    with Proc("generate", *argv, files=True, nofile=n) as p:
        p.close_stdin()
        events = events_of(p)
        out = ended_out_of_descriptors(p, n)
    current = project / ".zread/wiki/current"
    if out:
        assert not current.exists()  # no version was made current
        assert not any(event["vm"]["state"] == "done" for event in events)
    else:
        assert events[-1]["vm"]["state"] == "done"
        assert current.is_file()


@pytest.mark.parametrize("n", LIMITS)
def test_login_saves_or_says_it_is_out_of_descriptors(tmp_path: Path, n: int) -> None:
    home = tmp_path / "H"
    home.mkdir()
    with Proc("login", "--home", str(home), files=True, nofile=n) as p:
        try:
            p.read_event(TIMEOUT)
            p.send({"type": "select_region", "params": {"region": "global"}})
            p.read_until(lambda e: e["vm"]["state"] == "select_model", TIMEOUT)
            p.send({"type": "select_model", "params": {"model": "glm-4.6"}})
            p.read_until_done(TIMEOUT)
        except (AssertionError, BrokenPipeError):  # it ended first
            pass
        events = events_of(p)
        out = ended_out_of_descriptors(p, n)
    written = (home / ".zread/login.json").is_file()
    assert written != out
    assert (events[-1]["vm"]["state"] == "done") != out
