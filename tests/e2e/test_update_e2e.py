"""``update --stdio`` end to end: check, offer, download progress, restart or skip."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import NOBODY_ANSWERS, Proc, vm_bytes, write_scenario

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
WAITING_FOR = {
    "checking": [],
    "has_update": ["download", "quit"],
    "downloading": [],
    "confirm_restart": ["restart", "skip_restart", "quit"],
}
OFFERED = {"has_update", "package_manager", "downloading", "confirm_restart", "done"}
"""The states that show latest_version: a newer version was found."""
DOWNLOAD = {"type": "download"}


def go_os() -> str:
    return {"linux": "linux", "darwin": "darwin", "win32": "windows"}[sys.platform]


def go_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[machine]


def check_vm(event: dict[str, Any], *, offered: bool | None = None) -> dict[str, Any]:
    """Key order and presence: latest_version from has_update on, package_manager in its state."""
    vm = event["vm"]
    state = vm["state"]
    has_latest = state in OFFERED if offered is None else offered
    expected = [
        k
        for k in VM_KEYS
        if (k != "latest_version" or has_latest)
        and (k != "package_manager" or state == "package_manager")
    ]
    assert list(vm) == expected, (state, list(vm))
    for key in ("downloaded_bytes", "total_bytes"):
        assert type(vm[key]) is int
    assert isinstance(vm["download_percent"], (int, float))
    assert 0 <= vm["download_percent"] <= 100
    if not event["done"]:
        assert event["waiting_for"] == WAITING_FOR[state], event
    return vm


def check_progress(events: list[dict[str, Any]]) -> None:
    previous = (0, 0.0)
    totals = {e["vm"]["total_bytes"] for e in events}
    assert len(totals) == 1 and totals.pop() > 0
    for event in events:
        vm = event["vm"]
        now = (vm["downloaded_bytes"], vm["download_percent"])
        assert now[0] >= previous[0] and now[1] >= previous[1], (previous, now)
        assert vm["downloaded_bytes"] <= vm["total_bytes"]
        previous = now


@pytest.mark.parametrize("finish", ["restart", "skip_restart"])
def test_default_flow_to_restart_or_skip(finish: str) -> None:
    with Proc("update") as p:
        checking = p.read_event()
        vm = check_vm(checking)
        assert vm["state"] == "checking"
        assert checking["waiting_for"] == []
        assert vm["current_version"] == "0.2.13"
        assert vm["download_url"] == ""
        assert (vm["downloaded_bytes"], vm["total_bytes"], vm["download_percent"]) == (0, 0, 0)
        assert b'"download_percent":0,' in p.last_raw

        offer = p.read_event()
        vm = check_vm(offer)
        assert vm["state"] == "has_update"
        assert offer["waiting_for"] == ["download", "quit"]
        assert vm["latest_version"] == "0.2.14"
        assert vm["download_url"].startswith("https://")
        assert "0.2.14" in vm["download_url"]
        assert go_os() in vm["download_url"] and go_arch() in vm["download_url"]

        p.reject({"type": "restart"}, 'command "restart" not allowed in state has_update')
        p.reject({"type": "download", "params": [1]}, prefix="invalid params: ")
        p.reject({"type": "download", "params": "now"}, prefix="invalid params: ")
        p.send({"type": "download", "params": {"unknown": True}})

        progress = [p.read_event()]
        while progress[-1]["vm"]["state"] == "downloading":
            progress.append(p.read_event())
        confirm = progress.pop()
        for event in progress:
            check_vm(event)
            assert event["waiting_for"] == [] and event["done"] is False
        assert len(progress) >= 10
        check_progress([*progress, confirm])
        # The last downloading event already shows the whole download.
        assert progress[-1]["vm"]["download_percent"] == 100
        assert progress[-2]["vm"]["download_percent"] < 100

        vm = check_vm(confirm)
        assert vm["state"] == "confirm_restart"
        assert confirm["waiting_for"] == ["restart", "skip_restart", "quit"]
        assert vm["download_percent"] == 100
        assert vm["downloaded_bytes"] == vm["total_bytes"]
        assert b'"download_percent":100,' in p.last_raw
        assert b'"download_percent":100.0' not in p.last_raw
        p.reject(DOWNLOAD, 'command "download" not allowed in state confirm_restart')
        p.reject({"type": "restart", "params": 5}, prefix="invalid params: ")
        p.reject({"type": "skip_restart", "params": ["x"]}, prefix="invalid params: ")

        p.send({"type": finish})
        done = p.read_event()
        vm = check_vm(done)
        assert done["done"] is True and done["waiting_for"] == [] and done["error"] == ""
        assert vm["state"] == "done"
        assert vm["download_percent"] == 100
        assert vm["error"] == ""
        p.finish()


def test_flow_at_a_small_speed_runs_its_timers_in_real_time() -> None:
    with Proc("update", speed=0.2) as p:
        p.drive_until([DOWNLOAD], lambda e: e["vm"]["state"] == "confirm_restart")
        downloading = [e for e in p.events if e["vm"]["state"] == "downloading"]
        assert len(downloading) >= 10
        check_progress(downloading + [p.events[-1]])
        assert p.events[-1]["vm"]["download_percent"] == 100
        p.send({"type": "skip_restart"})
        assert p.read_event()["done"] is True
        p.finish()


def test_up_to_date_scenario_ends_at_once() -> None:
    with Proc("update", scenario="up-to-date") as p:
        checking = p.read_event()
        assert check_vm(checking)["state"] == "checking"
        done = p.read_event()
        vm = check_vm(done)
        assert vm["state"] == "up_to_date"
        assert done["done"] is True and done["waiting_for"] == [] and done["error"] == ""
        assert vm["current_version"] == "0.2.13"
        p.finish()


def test_package_manager_scenario_names_brew() -> None:
    with Proc("update", scenario="package-manager") as p:
        assert "package_manager" not in check_vm(p.read_event())
        done = p.read_event()
        vm = check_vm(done)
        assert vm["state"] == "package_manager"
        assert vm["package_manager"] == "brew"
        assert vm["latest_version"] == "0.2.14"  # what brew would upgrade to
        assert done["done"] is True and done["waiting_for"] == []
        p.finish()


def test_a_brew_install_with_nothing_newer_is_up_to_date(tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path,
        "brew-latest",
        'extends = "up-to-date"\n[world.release]\npackage_manager = "brew"\n',
    )
    with Proc("update", scenario=scenario) as p:
        p.read_event()
        done = p.read_event()
        vm = check_vm(done)
        assert vm["state"] == "up_to_date"
        assert done["done"] is True and done["waiting_for"] == []
        p.finish()


def test_download_error_scenario_breaks_at_40_percent() -> None:
    with Proc("update", scenario="download-error") as p:
        p.drive([DOWNLOAD])
        states = [e["vm"]["state"] for e in p.events]
        assert states[:2] == ["checking", "has_update"]
        assert states[-1] == "error"
        assert set(states[2:-1]) == {"downloading"}
        for event in p.events:
            # has_update+: the error after a download still carries latest_version.
            check_vm(event, offered=event["vm"]["state"] != "checking")
        check_progress(p.events[2:])
        last = p.events[-1]
        assert last["done"] is True and last["waiting_for"] == [] and last["error"] == ""
        assert last["vm"]["download_percent"] == 40
        assert b'"download_percent":40,' in p.last_raw
        assert last["vm"]["error"] == "download failed: unexpected EOF"
        assert 0 < last["vm"]["downloaded_bytes"] < last["vm"]["total_bytes"]
        p.finish()


def test_check_failure_ends_in_error_without_an_offer(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, "check", '[[failures]]\npoint = "check"\nerror = "boom"\n')
    with Proc("update", scenario=scenario) as p:
        p.read_event()
        done = p.read_event()
        vm = check_vm(done, offered=False)
        assert vm["state"] == "error"
        assert vm["error"] == "boom"
        assert done["done"] is True and done["waiting_for"] == []
        p.finish()


def holding(tmp_path: Path, step: str) -> str:
    text = f"[timing]\n{step} = {{ uniform = [600, 600] }}\n"
    return write_scenario(tmp_path, f"hold-{step}", text)


@pytest.mark.parametrize(
    ("state", "step", "script"),
    [("checking", "check", []), ("downloading", "download_step", [DOWNLOAD])],
)
def test_internal_states_wait_with_an_empty_gate(
    tmp_path: Path, state: str, step: str, script: list[dict[str, Any]]
) -> None:
    with Proc("update", speed=1, scenario=holding(tmp_path, step)) as p:
        held = p.drive_until(script, lambda e: e["vm"]["state"] == state)
        check_vm(held)
        assert held["waiting_for"] == [] and held["done"] is False
        for command in ("download", "restart", "skip_restart", "_step", "_checked"):
            p.reject({"type": command}, f'command "{command}" not allowed in state {state}')
        p.send({"type": "quit"})
        done = p.read_event()
        assert done["done"] is True and done["waiting_for"] == []
        assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
        assert done["vm"]["state"] == state
        p.finish()


@pytest.mark.parametrize("where", ["has_update", "confirm_restart"])
def test_quit_and_end_of_stdin_at_each_gate(where: str) -> None:
    for how in ("quit", "eof"):
        with Proc("update") as p:
            script = [] if where == "has_update" else [DOWNLOAD]
            p.drive_until(script, lambda e, w=where: e["vm"]["state"] == w)
            if how == "quit":
                p.send({"type": "quit"})
            else:  # end of stdin is not quit: the gate waits until SIGTERM
                p.close_stdin()
                p.wait_stderr(NOBODY_ANSWERS)
                p.assert_waiting()
                p.terminate()
            done = p.read_event()
            assert done["done"] is True and done["waiting_for"] == []
            assert done["vm"]["state"] == where
            assert vm_bytes(p.raw[-1]) == vm_bytes(p.raw[-2])
            p.finish()


def test_reader_closing_stdout_during_the_download_ends_quietly() -> None:
    with Proc("update", speed=0.5) as p:
        p.drive_until([], lambda e: e["vm"]["state"] == "has_update")
        p.send(DOWNLOAD)
        p.close_stdout()  # the progress events now have nowhere to go
        p.wait(10)
        assert "Traceback" not in p.stderr


def test_same_inputs_give_byte_identical_stdout() -> None:
    runs = []
    for _ in range(2):
        with Proc("update", seed=3) as p:
            runs.append(b"".join(p.drive([DOWNLOAD, {"type": "restart"}])))
            p.finish()
    assert runs[0] == runs[1]
    assert runs[0].count(b"\n") >= 14
