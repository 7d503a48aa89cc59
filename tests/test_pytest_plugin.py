"""Tests for simulator.pytest_plugin: the ``zread_sim`` and ``zread_bin`` fixtures.

Most tests run small test files with ``pytester`` (inline, in this process), so they
see the plugin exactly as a user's suite does: installed, with no conftest. The last
ones use the fixtures in this module directly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from simulator.pytest_plugin import ZreadExecutable
from simulator.runners.virtual import SimSession, ZreadSim
from tests.e2e.helpers import process_running

pytest_plugins = ["pytester"]


def test_the_fixtures_need_no_conftest(pytester: pytest.Pytester) -> None:
    assert not list(pytester.path.glob("conftest.py"))
    pytester.makepyfile(
        """
        from simulator.runners.virtual import SimSession, ZreadSim

        def test_sim(zread_sim):
            assert isinstance(zread_sim, ZreadSim)
            session = zread_sim.start("generate", "-y", scenario="flaky-pages")
            assert isinstance(session, SimSession)
            done = session.wait_done()
            assert done["vm"]["done_total"] == 16
            assert not session.violations

        def test_bin(zread_bin):
            assert zread_bin.name == "zread"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_failed_assert_not_violations_shows_each_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_careless(zread_sim):
            session = zread_sim.start("generate", "-y", scenario="failing-pages")
            session.send("retry", task_id=3)
            session.send_line(b"not json")
            assert not session.violations
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-vv")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '*assert not [[]1. at t=0.000s in state running: sent {"type":"retry",*'
            'expected quit, cancel: command "retry" not allowed in state running | '
            "2. at t=0.000s in state running: sent not json; expected quit, cancel: "
            "invalid JSON*"
        ]
    )


def test_zread_bin_is_the_zread_found_first_on_path(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import json, os, shutil, subprocess

        def test_which(zread_bin):
            assert shutil.which("zread") == str(zread_bin)
            assert os.access(zread_bin, os.X_OK)
            assert os.environ["PATH"].split(os.pathsep)[0] == str(zread_bin.parent)

        def test_runs_the_simulator(zread_bin):
            done = subprocess.run(
                ["zread", "version", "--stdio"], capture_output=True, timeout=30, check=True
            )
            lines = done.stdout.splitlines()
            assert len(lines) == 1
            event = json.loads(lines[0])
            assert event["done"] is True and event["waiting_for"] == []
            assert event["vm"]["version"]

        def test_steered_by_the_environment(zread_bin, monkeypatch):
            monkeypatch.setenv("ZREAD_SIM_SCENARIO", "empty")
            monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
            done = subprocess.run(
                ["zread", "browse", "--stdio"], capture_output=True, timeout=30, check=True
            )
            (line,) = done.stdout.splitlines()
            assert json.loads(line)["vm"]["state"] == "no_wiki"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_simulator_variables_never_leak_into_a_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set in the environment the test suite runs in: cleared for tests using zread_bin.
    monkeypatch.setenv("ZREAD_SIM_SEED", "5")
    monkeypatch.setenv("ZREAD_SIM_SCENARIO", "versions")
    pytester.makepyfile(
        """
        import json, os, subprocess

        def test_1_sets(zread_bin, monkeypatch):
            assert "ZREAD_SIM_SEED" not in os.environ
            assert "ZREAD_SIM_SCENARIO" not in os.environ
            monkeypatch.setenv("ZREAD_SIM_SCENARIO", "empty")
            monkeypatch.setenv("ZREAD_SIM_SPEED", "0")

        def test_2_sees_none_of_it(zread_bin):
            # Only the fresh home the fixture gives every test.
            leaked = sorted(k for k in os.environ if k.startswith("ZREAD_SIM_"))
            assert leaked == ["ZREAD_SIM_HOME", "ZREAD_SIM_JOURNAL", "ZREAD_SIM_SPEED"]
            assert os.environ["ZREAD_SIM_SPEED"] == "0"
            assert os.listdir(os.environ["ZREAD_SIM_HOME"]) == []
            zread = subprocess.Popen(
                ["zread", "browse", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            first = json.loads(zread.stdout.readline())
            zread.communicate(b'{"type":"quit"}\\n', timeout=30)  # end of stdin is not quit
            assert first["vm"]["state"] == "loading"  # the default scenario, one wiki
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    # And the outer environment is as it was.
    assert os.environ["ZREAD_SIM_SEED"] == "5"
    assert os.environ["ZREAD_SIM_SCENARIO"] == "versions"


def test_every_simulator_variable_is_cleared_even_one_the_plugin_never_knew(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZREAD_SIM_EOF", "quit")  # would end zread at the end of stdin
    monkeypatch.setenv("ZREAD_SIM_WHATEVER", "1")
    pytester.makepyfile(
        """
        import os, subprocess

        def test_zread_waits_at_the_end_of_stdin(zread_bin):
            assert "ZREAD_SIM_EOF" not in os.environ
            assert "ZREAD_SIM_WHATEVER" not in os.environ
            zread = subprocess.Popen(
                ["zread", "config", "--stdio"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
            zread.stdin.close()
            said = zread.stderr.readline()
            zread.terminate()
            zread.wait(timeout=30)
            zread.stderr.close()
            assert b"stdin is closed: nothing can answer" in said
            zread_bin.strict = False
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_sessions_are_closed_after_each_test(pytester: pytest.Pytester) -> None:
    url_file = pytester.path / "url.txt"
    pytester.makepyfile(
        f"""
        import urllib.error, urllib.request
        from pathlib import Path

        URL_FILE = Path({str(url_file)!r})

        def test_1_serves(zread_sim):
            # An ephemeral port: 9681, the default, may be another worker's meanwhile.
            session = zread_sim.start("browse", "--port", "0")
            url = session.wait_state("serving")["vm"]["url"]
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.status == 200
            URL_FILE.write_text(url)
            # No quit, no close: the fixture must do it.

        def test_2_server_is_gone():
            url = URL_FILE.read_text()
            try:
                urllib.request.urlopen(url, timeout=5)
            except urllib.error.URLError as err:
                assert isinstance(err.reason, ConnectionRefusedError)
            else:
                raise AssertionError(f"{{url}} still answers after its test ended")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert url_file.read_text().startswith("http://127.0.0.1:")


def test_a_failing_wait_shows_the_simulation_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_forgets_the_prompt(zread_sim):
            session = zread_sim.start("generate")
            session.wait_done()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E *.SimulationError: the session is waiting for the client*'select_action'*"]
    )


def test_a_conftest_can_override_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        from simulator.runners.virtual import ZreadSim

        class EmptyWorld(ZreadSim):
            def start(self, command, *args, scenario="empty", **kwargs):
                return super().start(command, *args, scenario=scenario, **kwargs)

        @pytest.fixture
        def zread_sim():
            sim = EmptyWorld()
            yield sim
            sim.close()

        @pytest.fixture
        def zread_bin(zread_bin, monkeypatch):
            monkeypatch.setenv("ZREAD_SIM_SCENARIO", "up-to-date")
            monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
            return zread_bin
        """
    )
    pytester.makepyfile(
        """
        import json, shutil, subprocess

        def test_sim_default_changed(zread_sim):
            session = zread_sim.start("browse")
            assert session.last["done"] and session.vm["state"] == "no_wiki"

        def test_bin_default_changed(zread_bin):
            assert shutil.which("zread") == str(zread_bin)
            done = subprocess.run(
                ["zread", "update", "--stdio"], input=b"", capture_output=True, timeout=30
            )
            last = json.loads(done.stdout.splitlines()[-1])
            assert last["done"] and last["vm"]["state"] == "up_to_date"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


# -- the fixtures, used here directly -----------------------------------------------------


def test_zread_sim_fixture_starts_sessions(zread_sim: ZreadSim) -> None:
    session = zread_sim.start("login", scenario="login-timeout", speed=0)
    assert isinstance(session, SimSession) and zread_sim.sessions == [session]
    session.send("select_region", region="global")
    error = session.wait_done()
    assert error["vm"]["state"] == "error" and error["vm"]["error"]
    assert not session.violations


def test_zread_sim_fixture_is_fresh_for_each_test(zread_sim: ZreadSim) -> None:
    assert zread_sim.sessions == []


def test_zread_bin_fixture_runs_zread(zread_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert shutil.which("zread") == str(zread_bin)
    assert sorted(k for k in os.environ if k.startswith("ZREAD_SIM_")) == [
        "ZREAD_SIM_HOME",
        "ZREAD_SIM_JOURNAL",
        "ZREAD_SIM_SPEED",
    ]
    monkeypatch.setenv("ZREAD_SIM_SCENARIO", "failing-pages")
    monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
    monkeypatch.setenv("ZREAD_SIM_SEED", "7")
    done = subprocess.run(
        ["zread", "generate", "-y", "--skip-failed", "--stdio"],
        input=b"",
        capture_output=True,
        timeout=30,
        check=True,
    )
    last = json.loads(done.stdout.splitlines()[-1])
    assert last["done"] is True and last["vm"]["done_total"] == 14
    failed = [t["id"] for t in last["vm"]["pages"]["tasks"] if t["state"] == "failed"]
    assert failed == [3, 7]
    assert b"Traceback" not in done.stderr


def test_closing_zread_sim_stops_its_servers(zread_sim: ZreadSim) -> None:
    session = zread_sim.start("browse", speed=0)
    url = session.wait_state("serving")["vm"]["url"]
    zread_sim.close()
    assert session.done and zread_sim.sessions == []
    with pytest.raises(urllib.error.URLError) as info:
        urllib.request.urlopen(url, timeout=5)
    assert isinstance(info.value.reason, ConnectionRefusedError)


def test_zread_sim_ignores_the_simulator_variables(
    zread_sim: ZreadSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In-process sessions take their scenario, seed and speed from start() only.
    monkeypatch.setenv("ZREAD_SIM_SCENARIO", "empty")
    monkeypatch.setenv("ZREAD_SIM_SPEED", "0")
    session = zread_sim.start("browse")
    assert session.vm["state"] == "loading"
    session.wait_state("serving")
    assert session.now > 0


def test_zread_bin_runs_in_an_environment_a_client_strips(zread_bin: Path, tmp_path: Path) -> None:
    # A sandboxing client passes on only HOME, PATH, LANG, LC_ALL and TMPDIR.
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [str(zread_bin), "version", "--stdio"], env=env, capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["vm"]["version"] == "0.2.13"
    help_done = subprocess.run(
        [str(zread_bin), "generate", "--help"], env=env, capture_output=True, timeout=30
    )
    assert help_done.returncode == 0 and b"Generate wiki documentation" in help_done.stdout


def test_zread_bin_keeps_its_guarantees_in_an_environment_a_client_strips(
    zread_bin: ZreadExecutable, tmp_path: Path
) -> None:
    client_home = tmp_path / "client-home"
    client_home.mkdir()
    env = {"HOME": str(client_home), "PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"}
    slow = subprocess.run(  # ~6 s of delays at speed 1
        [str(zread_bin), "generate", "-y", "--stdio"], env=env, capture_output=True, timeout=30
    )
    assert slow.returncode == 0, slow.stderr
    saved = subprocess.run(
        [str(zread_bin), "config", "--stdio"],
        input=b'{"type":"save"}\n{"type":"quit"}\n',
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert saved.returncode == 0, saved.stderr
    calls = zread_bin.calls  # the journal, baked in
    assert [call.argv[1] for call in calls] == ["generate", "config"]
    assert calls[0].how == "done" and calls[0].duration < 1  # speed 0, baked in
    assert list(client_home.iterdir()) == []  # zread's HOME is the fixture's, baked in
    assert (zread_bin.home / ".zread" / "config.yaml").is_file()


def test_a_variable_set_when_zread_bin_runs_beats_what_it_baked(
    zread_bin: ZreadExecutable, tmp_path: Path
) -> None:
    other = tmp_path / "other.jsonl"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "ZREAD_SIM_JOURNAL": str(other)}
    done = subprocess.run(
        [str(zread_bin), "version", "--stdio"], env=env, capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert zread_bin.calls == [] and other.read_text().count('"kind":"start"') == 1


# -- zread_bin: calls, strict, timeout, nothing left running ---------------------------


def test_zread_bin_lists_its_calls_with_what_happened(zread_bin: ZreadExecutable) -> None:
    done = subprocess.run(
        ["zread", "generate", "-y", "--stdio"], input=b"", capture_output=True, timeout=30
    )
    assert done.returncode == 0
    subprocess.run(
        ["zread", "config", "--stdio"], input=b'{"type":"quit"}\n', capture_output=True, timeout=30
    )
    calls = zread_bin.calls
    assert [call.argv[1:] for call in calls] == [
        ["generate", "-y", "--stdio"],
        ["config", "--stdio"],
    ]
    assert [call.exit_code for call in calls] == [0, 0]
    assert [call.how for call in calls] == ["done", "quit"]
    assert calls[0].cwd == str(zread_bin.project)
    assert calls[0].state == "done" and calls[1].state == "editing"
    assert all(call.duration >= 0 and call.violations == [] for call in calls)


def test_zread_bin_fails_a_test_whose_client_broke_the_protocol(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import subprocess

        def test_out_of_turn(zread_bin):
            subprocess.run(
                ["zread", "config", "--stdio"],
                input=b'{"type":"download"}\\n{"type":"quit"}\\n',
                capture_output=True,
                timeout=30,
            )

        def test_allowed(zread_bin):
            zread_bin.strict = False
            subprocess.run(
                ["zread", "config", "--stdio"],
                input=b'{"type":"download"}\\n{"type":"quit"}\\n',
                capture_output=True,
                timeout=30,
            )
            assert len(zread_bin.calls[0].violations) == 1
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*saw mistakes*", '*command "download" not allowed*'])


def test_zread_bin_kills_what_a_test_left_running_and_says_so(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    pytester.makepyfile(
        f"""
        import json, subprocess
        from pathlib import Path

        def test_leaves_a_hang_behind(zread_bin, monkeypatch):
            monkeypatch.setenv("ZREAD_SIM_SCENARIO", "hang")
            zread = subprocess.Popen(
                ["zread", "generate", "-y", "--stdio"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            )
            json.loads(zread.stdout.readline())
            Path({str(pid_file)!r}).write_text(str(zread.pid))
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*still running when the test ended (killed)*generate*"])
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and process_running(pid):
        time.sleep(0.05)
    assert not process_running(pid)


def test_zread_bin_kills_a_call_past_its_timeout(zread_bin: ZreadExecutable) -> None:
    zread_bin.strict = False
    zread_bin.timeout = 0.5
    zread = subprocess.Popen(
        ["zread", "config", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert zread.wait(10) == -signal.SIGKILL
    (call,) = zread_bin.calls
    assert call.exit_code is None and call.state == "editing"
    assert call.violations[-1].endswith(
        "killed after the 0.5 s timeout: in state editing: zread config --stdio"
    )


# -- --zread-coverage ----------------------------------------------------------------------

COVERED_SUITE = """
import subprocess

def test_generate_through_the_gate(zread_sim):
    session = zread_sim.start("generate")
    session.wait_for(lambda e: "select_action" in e["waiting_for"])
    session.send("select_action", action="generate")
    session.wait_done()

def test_version_as_a_process(zread_bin):
    subprocess.run(["zread", "version", "--stdio"], stdin=subprocess.DEVNULL, check=True,
                   capture_output=True, timeout=60)
"""


def test_zread_coverage_prints_the_table_of_both_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(COVERED_SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--zread-coverage")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*- zread coverage -*",
            "zread coverage: 2 sessions; transitions 25.0% of the commands run",
            "generate          1  5/8 62%      6/27 22%     1/12 8%      0/3 0%       -",
            "version           1  2/2 100%     1/1 100%     -            -            -",
            "generate: never reached:",
            "  `retry_catalog` never sent in `catalog_error` (running)",
        ]
    )
    assert result.ret == 0


def test_without_the_option_there_is_no_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(COVERED_SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "zread coverage" not in result.stdout.str()


def test_zread_coverage_json_writes_the_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(COVERED_SUITE)
    report = pytester.path / "coverage.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--zread-coverage-json={report}")
    result.assert_outcomes(passed=2)
    data = json.loads(report.read_text())
    assert [c["command"] for c in data["commands"]] == ["generate", "version"]
    assert data["commands"][0]["transitions"] == {"reached": 6, "total": 27}


def test_a_coverage_json_path_that_cannot_be_written_is_refused_before_the_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(COVERED_SUITE)
    report = pytester.path / "no-such-folder" / "coverage.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--zread-coverage-json={report}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line] == [
        f"ERROR: --zread-coverage-json {report}: cannot write: No such file or directory"
    ]
    assert "passed" not in result.stdout.str()  # refused before any test ran


def test_a_coverage_json_that_fails_to_write_at_the_end_is_one_line(
    pytester: pytest.Pytester,
) -> None:
    folder = pytester.path / "reports"
    folder.mkdir()
    report = folder / "coverage.json"
    pytester.makepyfile(
        COVERED_SUITE
        + f"""
def test_the_folder_goes_away():
    import shutil
    shutil.rmtree({str(folder)!r})
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--zread-coverage-json={report}"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [f"zread coverage not written: {report}: cannot write: No such file or directory"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("threshold", "code"), [("20", 0), ("30", 1)])
def test_zread_coverage_fail_under_fails_the_run_below_it(
    pytester: pytest.Pytester, threshold: str, code: int
) -> None:
    pytester.makepyfile(COVERED_SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--zread-coverage-fail-under", threshold)
    result.assert_outcomes(passed=2)
    assert result.ret == code
    failed = f"FAIL: zread coverage: transitions 25.0% is below the required {threshold}%"
    assert (failed in result.stdout.str()) is bool(code)


UNNEEDED = ("-p", "no:faker", "-p", "no:pytest-subprocess", "-p", "no:hypothesispytest")
"""Plugins installed here that the suite below does not use: each of the three processes
of an xdist run would load them for nothing (about half of its start-up)."""


def test_zread_coverage_adds_up_the_xdist_workers(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(COVERED_SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "xdist", "-n", "2", "--zread-coverage", *UNNEEDED
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["zread coverage: 2 sessions; transitions 25.0% of the commands run"]
    )


def test_the_simulator_s_modules_are_imported_as_python_imports_them(
    pytester: pytest.Pytester,
) -> None:
    """Not through pytest's assertion rewriting, which parses and compiles each module
    anew on every run where bytecode is not written."""
    pytester.makepyfile(
        """
        import importlib, sys

        def test_loader():
            sys.modules.pop("simulator.hosts.pages", None)
            module = importlib.import_module("simulator.hosts.pages")
            assert type(module.__loader__).__name__ == "SourceFileLoader"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
