"""Tests for statecharts.update, in process and in virtual time.

checking → up_to_date | package_manager | has_update | error; has_update → download →
downloading (one progress event per step, never decreasing, the last at 100) →
confirm_restart → restart | skip_restart → done.
"""

from __future__ import annotations

import itertools
import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from simulator.virtual import SimSession, start
from statecharts import load_chart

GATES = {
    "checking": [],
    "has_update": ["download", "quit"],
    "downloading": [],
    "confirm_restart": ["restart", "skip_restart", "quit"],
}
TERMINAL = ("up_to_date", "package_manager", "error", "done")
VM_KEYS = [
    "state",
    "current_version",
    "latest_version",
    "download_url",
    "package_manager",
    "downloaded_bytes",
    "total_bytes",
    "download_percent",
    "error",
]
CURRENT = "0.2.13"
LATEST = "0.2.14"
TOTAL = 18874368
STEPS = 12
CHECK_DELAY = (0.3, 0.6)
STEP_DELAY = (0.1, 0.15)
EPS = 1e-9
GO_OS = {"linux": "linux", "darwin": "darwin", "win32": "windows"}[sys.platform]
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[
    platform.machine().lower()
]
URL = f"https://download.zread.ai/zread/v{LATEST}/zread_{GO_OS}_{GO_ARCH}.tar.gz"

Starter = Callable[..., SimSession]


@pytest.fixture
def run() -> Iterator[Starter]:
    """Start ``zread update --stdio`` sessions in virtual time; closed at the end."""
    opened: list[SimSession] = []

    def _start(*args: str, **kwargs: Any) -> SimSession:
        sim = start("update", *args, **kwargs)
        opened.append(sim)
        return sim

    yield _start
    for sim in opened:
        sim.close()


def vm(state: str, **fields: Any) -> dict[str, Any]:
    """The update vm in ``state``; latest_version and package_manager only when given."""
    values = {
        "state": state,
        "current_version": CURRENT,
        "download_url": "",
        "downloaded_bytes": 0,
        "total_bytes": 0,
        "download_percent": 0,
        "error": "",
        **fields,
    }
    return {key: values[key] for key in VM_KEYS if key in values}


def offered(state: str, **fields: Any) -> dict[str, Any]:
    """The vm from has_update on: the latest version and its download URL."""
    return vm(state, latest_version=LATEST, download_url=URL, **fields)


def event(state: str, the_vm: dict[str, Any]) -> dict[str, Any]:
    terminal = state in TERMINAL
    return {
        "vm": the_vm,
        "waiting_for": [] if terminal else GATES[state],
        "done": terminal,
        "error": "",
    }


def progress(step: int, *, total: int = TOTAL, steps: int = STEPS) -> tuple[int, float]:
    """(downloaded_bytes, download_percent) after ``step`` of ``steps``."""
    if step == steps:
        return total, 100
    return total * step // steps, 100 * step / steps


def out_lines(sim: SimSession) -> list[bytes]:
    return [line.data for line in sim.transcript if line.direction == "out"]


def vm_and_gate(line: bytes) -> bytes:
    return line[: line.index(b',"done":')]


def vm_bytes(line: bytes) -> bytes:
    return line[: line.index(b',"waiting_for":')]


def scenario_file(tmp_path: Path, text: str, name: str = "custom") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text('extends = "default"\n' + text, encoding="utf-8")
    return str(path)


def drive_to(sim: SimSession, state: str) -> None:
    """From the first event to the first event showing ``state``."""
    if state == "checking":
        return
    sim.wait_state("has_update")
    if state == "has_update":
        return
    sim.send("download")
    if state == "downloading":
        sim.wait_for(lambda e: e["vm"]["download_percent"] >= 25)  # part of the way
        assert sim.vm["state"] == "downloading"
        return
    sim.wait_state(state)


# -- the chart ---------------------------------------------------------------------------


def test_chart_states_and_gates() -> None:
    chart = load_chart("update")
    shown = {name: spec for name, spec in chart.states.items() if name != chart.initial}
    assert set(shown) == set(GATES) | set(TERMINAL)
    for name, spec in shown.items():
        assert spec.vm_state == name
        assert spec.terminal is (name in TERMINAL)
        assert list(spec.waiting_for) == GATES.get(name, [])
        has_timer = bool(spec.timers)
        assert has_timer is (not spec.terminal and not spec.waiting_for), name
    assert [timer.repeat for timer in shown["downloading"].timers] == [True]
    assert set(chart.commands) == {"download", "restart", "skip_restart"}


# -- the default flow --------------------------------------------------------------------


def test_checking_then_has_update(run: Starter) -> None:
    sim = run()
    assert sim.events == [event("checking", vm("checking"))]
    assert b'"download_percent":0,' in out_lines(sim)[0]
    assert len(sim.session.pending()) == 1
    offer = sim.wait_state("has_update")
    assert offer == event("has_update", offered("has_update"))
    assert CHECK_DELAY[0] - EPS <= sim.now <= CHECK_DELAY[1] + EPS
    assert sim.session.pending() == []
    assert sim.advance(3600.0) == []  # a gate: nothing happens until the client answers
    assert len(sim.events) == 2


def test_download_progress_ends_at_100_then_confirm_restart(run: Starter) -> None:
    sim = run()
    sim.wait_state("has_update")
    t = sim.now
    first = sim.send("download")
    assert first == [event("downloading", offered("downloading", total_bytes=TOTAL))]
    assert sim.now == t
    confirm = sim.wait_state("confirm_restart")
    downloading = [e for e in sim.events if e["vm"]["state"] == "downloading"]
    expected = []
    for step in range(STEPS + 1):
        done_bytes, percent = progress(step)
        expected.append(
            event(
                "downloading",
                offered(
                    "downloading",
                    total_bytes=TOTAL,
                    downloaded_bytes=done_bytes,
                    download_percent=percent,
                ),
            )
        )
    assert downloading == expected
    assert [e["vm"]["download_percent"] for e in downloading][-2:] == [100 * 11 / 12, 100]
    full = {"total_bytes": TOTAL, "downloaded_bytes": TOTAL, "download_percent": 100}
    assert confirm == event("confirm_restart", offered("confirm_restart", **full))
    # One download_step per event after the first, and one more to confirm.
    steps = STEPS + 1
    assert STEP_DELAY[0] * steps - EPS <= sim.now - t <= STEP_DELAY[1] * steps + EPS
    assert sim.session.pending() == []
    # Go writes a float with no fraction without ".0".
    assert b'"download_percent":100,' in out_lines(sim)[-1]
    assert b"100.0" not in b"".join(out_lines(sim))


def test_each_download_step_takes_one_download_step_delay(run: Starter) -> None:
    sim = run()
    sim.wait_state("has_update")
    sim.send("download")
    sim.wait_state("confirm_restart")
    times = [line.time for line in sim.transcript if line.direction == "out"][2:]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == STEPS + 1
    assert all(STEP_DELAY[0] - EPS <= gap <= STEP_DELAY[1] + EPS for gap in gaps), gaps


@pytest.mark.parametrize("finish", ["restart", "skip_restart"])
def test_restart_or_skip_restart_ends_in_done(run: Starter, finish: str) -> None:
    sim = run()
    drive_to(sim, "confirm_restart")
    t = sim.now
    answer = sim.send(finish)
    full = {"total_bytes": TOTAL, "downloaded_bytes": TOTAL, "download_percent": 100}
    assert answer == [event("done", offered("done", **full))]
    assert sim.now == t
    assert sim.done is True
    assert sim.session.pending() == []
    assert sim.violations == []
    assert sim.send("restart") == []
    assert sim.violations[-1].after_done is True


def test_download_ignores_unknown_params_keys(run: Starter) -> None:
    sim = run()
    drive_to(sim, "has_update")
    sim.send("download", unknown=True)
    assert sim.last == event("downloading", offered("downloading", total_bytes=TOTAL))
    assert sim.violations == []


# -- the other outcomes of checking ------------------------------------------------------


def test_up_to_date_ends_at_once(run: Starter) -> None:
    sim = run(scenario="up-to-date")
    done = sim.wait_done()
    assert sim.events == [
        event("checking", vm("checking", current_version=CURRENT)),
        event("up_to_date", vm("up_to_date", current_version=CURRENT)),
    ]
    assert done is sim.events[-1]
    assert CHECK_DELAY[0] - EPS <= sim.now <= CHECK_DELAY[1] + EPS


def test_package_manager_ends_naming_it_and_the_newer_version(run: Starter) -> None:
    sim = run(scenario="package-manager")
    sim.wait_done()
    assert sim.events == [
        event("checking", vm("checking")),
        event(
            "package_manager",
            vm("package_manager", latest_version=LATEST, package_manager="brew"),
        ),
    ]
    assert list(sim.vm) == VM_KEYS  # both conditional keys, in the reference's order


@pytest.mark.parametrize(
    ("current", "latest"),
    [("0.2.13", "0.2.13"), ("0.3.0", "0.2.14"), ("v0.2.13", "0.2.13"), ("1.0.0", "1.0.0-rc.1")],
    ids=["same", "installed-newer", "v-prefix", "release-after-its-rc"],
)
def test_nothing_newer_is_up_to_date_whatever_installed_it(
    run: Starter, tmp_path: Path, current: str, latest: str
) -> None:
    """A package manager's answer is how to upgrade: with nothing newer there is
    nothing to upgrade to, so the answer is up_to_date, brew or not."""
    for manager in ("", "brew"):
        text = (
            f'[world.release]\ncurrent_version = "{current}"\nlatest_version = "{latest}"\n'
            f'package_manager = "{manager}"\n'
        )
        sim = run(scenario=scenario_file(tmp_path, text, name=f"pm{manager}"))
        sim.wait_done()
        assert sim.events[-1] == event("up_to_date", vm("up_to_date", current_version=current))


@pytest.mark.parametrize(
    ("current", "latest"),
    [
        ("0.2.13", "0.2.14"),
        ("0.2.9", "0.2.10"),
        ("0.2.14-rc.1", "0.2.14"),
        ("1.0.0-rc.1", "1.0.0-rc.2"),
        ("dev", "0.2.14"),
    ],
    ids=["patch", "numeric-not-text", "rc-to-release", "rc-to-rc", "unparsed"],
)
def test_a_newer_version_is_offered(
    run: Starter, tmp_path: Path, current: str, latest: str
) -> None:
    text = f'[world.release]\ncurrent_version = "{current}"\nlatest_version = "{latest}"\n'
    sim = run(scenario=scenario_file(tmp_path, text))
    assert sim.wait_for(lambda e: e["vm"]["state"] != "checking")["vm"]["state"] == "has_update"
    assert sim.vm["latest_version"] == latest


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        ('point = "check"', "check for updates: connection refused"),
        ('point = "check"\nerror = "boom"', "boom"),
    ],
    ids=["default-text", "own-text"],
)
def test_check_failure_ends_in_error_without_an_offer(
    run: Starter, tmp_path: Path, failure: str, message: str
) -> None:
    sim = run(scenario=scenario_file(tmp_path, f"[[failures]]\n{failure}\n"))
    sim.wait_done()
    assert sim.events == [
        event("checking", vm("checking")),
        event("error", vm("error", error=message)),
    ]


# -- download failures -------------------------------------------------------------------


def test_download_error_scenario_breaks_at_40_percent(run: Starter) -> None:
    sim = run(scenario="download-error")
    drive_to(sim, "has_update")
    sim.send("download")
    last = sim.wait_done()
    downloading = [e["vm"] for e in sim.events if e["vm"]["state"] == "downloading"]
    assert [(v["downloaded_bytes"], v["download_percent"]) for v in downloading] == [
        progress(step) for step in range(5)
    ]
    assert last == event(
        "error",
        offered(
            "error",
            total_bytes=TOTAL,
            downloaded_bytes=int(TOTAL * 0.4),
            download_percent=40,
            error="download failed: unexpected EOF",
        ),
    )
    assert b'"download_percent":40,' in out_lines(sim)[-1]
    assert sim.session.pending() == []


def test_download_failure_default_text_at_its_percent(run: Starter, tmp_path: Path) -> None:
    text = '[[failures]]\npoint = "download"\nat_percent = 50.0\n'
    sim = run(scenario=scenario_file(tmp_path, text))
    drive_to(sim, "has_update")
    sim.send("download")
    last = sim.wait_done()
    assert len([e for e in sim.events if e["vm"]["state"] == "downloading"]) == 6
    assert last == event(
        "error",
        offered(
            "error",
            total_bytes=TOTAL,
            downloaded_bytes=TOTAL // 2,
            download_percent=50,
            error="download failed: connection reset by peer",
        ),
    )


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (4, [(0, 0), (250, 25), (500, 50), (750, 75), (1000, 100)]),
        (3, [(0, 0), (333, 100 / 3), (666, 200 / 3), (1000, 100)]),
    ],
)
def test_the_world_release_sets_versions_url_size_and_steps(
    run: Starter, tmp_path: Path, steps: int, expected: list[tuple[int, float]]
) -> None:
    text = (
        "[world.release]\n"
        'current_version = "1.0.0"\n'
        'latest_version = "1.1.0"\n'
        'download_url = "https://example.test/zread-{version}-{os}-{arch}.tar.gz"\n'
        "download_bytes = 1000\n"
        f"download_steps = {steps}\n"
    )
    sim = run(scenario=scenario_file(tmp_path, text))
    offer = sim.wait_state("has_update")
    url = f"https://example.test/zread-1.1.0-{GO_OS}-{GO_ARCH}.tar.gz"
    assert offer["vm"] == vm(
        "has_update", current_version="1.0.0", latest_version="1.1.0", download_url=url
    )
    sim.send("download")
    sim.wait_state("confirm_restart")
    downloading = [e["vm"] for e in sim.events if e["vm"]["state"] == "downloading"]
    assert [(v["downloaded_bytes"], v["download_percent"]) for v in downloading] == expected
    assert {v["total_bytes"] for v in downloading} == {1000}


# -- rejections in every state -----------------------------------------------------------

NON_TERMINAL = list(GATES)
REFUSED = [
    (state, command)
    for state in NON_TERMINAL
    for command in ("download", "restart", "skip_restart", "select_region", "_checked", "_step")
    if command not in GATES[state]
]


@pytest.mark.parametrize(("state", "command"), REFUSED)
def test_a_command_not_in_waiting_for_is_rejected(run: Starter, state: str, command: str) -> None:
    sim = run()
    drive_to(sim, state)
    before = sim.last
    timers = [(t.trigger, t.deadline) for t in sim.session.pending()]
    error = f'command "{command}" not allowed in state {state}'
    assert sim.send(command) == [{**before, "error": error}]
    lines = out_lines(sim)
    assert vm_and_gate(lines[-1]) == vm_and_gate(lines[-2])
    assert [(v.error, v.state, v.waiting_for) for v in sim.violations] == [
        (error, state, tuple(GATES[state]))
    ]
    assert sim.session.state == state
    assert [(t.trigger, t.deadline) for t in sim.session.pending()] == timers


@pytest.mark.parametrize(
    ("state", "line", "error"),
    [
        ("has_update", b'{"type":"download","params":[1]}', "expected `object`, got `array`"),
        ("has_update", b'{"type":"download","params":"now"}', "expected `object`, got `str`"),
        ("confirm_restart", b'{"type":"restart","params":5}', "expected `object`, got `int`"),
        (
            "confirm_restart",
            b'{"type":"skip_restart","params":["x"]}',
            "expected `object`, got `array`",
        ),
    ],
)
def test_params_that_are_not_an_object_are_invalid_params(
    run: Starter, state: str, line: bytes, error: str
) -> None:
    sim = run()
    drive_to(sim, state)
    before = sim.last
    assert sim.send_line(line) == [{**before, "error": f"invalid params: {error}"}]
    assert sim.session.state == state


# -- quit --------------------------------------------------------------------------------


@pytest.mark.parametrize("state", NON_TERMINAL)
def test_quit_in_every_non_terminal_state(run: Starter, state: str) -> None:
    sim = run()
    drive_to(sim, state)
    before = sim.last
    count = len(sim.events)
    answer = sim.send("quit")
    assert answer == [{**before, "waiting_for": [], "done": True, "error": ""}]
    assert answer[0]["vm"]["state"] == state
    lines = out_lines(sim)
    assert vm_bytes(lines[-1]) == vm_bytes(lines[-2])
    assert sim.done is True
    assert sim.session.pending() == []
    assert sim.violations == []
    assert sim.advance(1000.0) == []
    assert len(sim.events) == count + 1


def test_quit_while_downloading_keeps_the_progress_shown(run: Starter) -> None:
    sim = run()
    drive_to(sim, "downloading")
    done_bytes, percent = progress(3)
    assert sim.send("quit")[0]["vm"] == offered(
        "downloading", total_bytes=TOTAL, downloaded_bytes=done_bytes, download_percent=percent
    )


# -- every ending ------------------------------------------------------------------------
#
# The final event says how the run ended and shows nothing still at work: never
# checking or downloading (but after quit, which shows the vm as it stood), the newer
# version whenever one was found, the package manager only in its own state.


def end_plain(sim: SimSession, finish: str) -> None:
    drive_to(sim, "confirm_restart")
    sim.send(finish)


def end_after_download(sim: SimSession) -> None:
    drive_to(sim, "has_update")
    sim.send("download")


ENDINGS: dict[str, tuple[str, Callable[[SimSession], None], str, bool]] = {
    # name: (scenario text, how to drive it, final state, is a newer version shown)
    "restart": ("", lambda sim: end_plain(sim, "restart"), "done", True),
    "skip_restart": ("", lambda sim: end_plain(sim, "skip_restart"), "done", True),
    "up-to-date": (
        '[world.release]\nlatest_version = "0.2.13"\n',
        lambda sim: None,
        "up_to_date",
        False,
    ),
    "up-to-date-brew": (
        '[world.release]\nlatest_version = "0.2.13"\npackage_manager = "brew"\n',
        lambda sim: None,
        "up_to_date",
        False,
    ),
    "package-manager": (
        '[world.release]\npackage_manager = "brew"\n',
        lambda sim: None,
        "package_manager",
        True,
    ),
    "check-error": ('[[failures]]\npoint = "check"\n', lambda sim: None, "error", False),
    "check-error-brew": (
        '[world.release]\npackage_manager = "brew"\n\n[[failures]]\npoint = "check"\n',
        lambda sim: None,
        "error",
        False,
    ),
    "download-error": (
        '[[failures]]\npoint = "download"\nat_percent = 50.0\n',
        end_after_download,
        "error",
        True,
    ),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_ending_shows_how_it_ended(run: Starter, tmp_path: Path, ending: str) -> None:
    text, drive, final_state, newer = ENDINGS[ending]
    sim = run(scenario=scenario_file(tmp_path, text))
    drive(sim)
    last = sim.wait_done()
    assert last["done"] is True and last["waiting_for"] == [] and last["error"] == ""
    the_vm = last["vm"]
    assert the_vm["state"] == final_state
    assert ("latest_version" in the_vm) is newer, the_vm
    assert ("package_manager" in the_vm) is (final_state == "package_manager")
    if final_state != "error":
        assert the_vm["error"] == ""
    if final_state in ("up_to_date", "package_manager") or ending.startswith("check"):
        assert the_vm["download_url"] == ""
        assert (the_vm["downloaded_bytes"], the_vm["download_percent"]) == (0, 0)
    if final_state == "done":
        assert the_vm["download_percent"] == 100
        assert the_vm["downloaded_bytes"] == the_vm["total_bytes"] > 0
    assert sim.session.pending() == []


# -- determinism -------------------------------------------------------------------------


def transcript(seed: int) -> list[tuple[str, float, bytes]]:
    sim = start("update", seed=seed)
    try:
        sim.wait_state("has_update")
        sim.send("download")
        sim.wait_state("confirm_restart")
        sim.send("restart")
        return [(line.direction, line.time, line.data) for line in sim.transcript]
    finally:
        sim.close()


def test_same_seed_gives_identical_events_and_times() -> None:
    first, second = transcript(3), transcript(3)
    assert first == second
    assert len([d for d, _, _ in first if d == "out"]) == 2 + (STEPS + 1) + 2


def test_another_seed_changes_the_times_not_the_events() -> None:
    three, four = transcript(3), transcript(4)
    assert [(d, data) for d, _, data in three] == [(d, data) for d, _, data in four]
    assert [t for _, t, _ in three] != [t for _, t, _ in four]
