"""simulator.locust: ZreadUser run by real Locust, headless, in a child process.

The pytest process never imports Locust (it monkey-patches the process it is imported
in): each test writes a locustfile, runs ``python -m locust`` on it, and reads back its
CSV statistics and what it printed.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from simulator.runners.virtual import start as virtual_start
from tests.answering import drive

pytestmark = pytest.mark.timeout(60)

HEAD = "from simulator.locust import ZreadUser, memory_line, print_memory_at_exit\n"


def locust(
    tmp_path: Path, body: str, *options: str, env: dict[str, str] | None = None
) -> tuple[int, str, dict[tuple[str, str], dict[str, str]]]:
    """Run Locust headless on a locustfile of ``body``: (exit code, stdout, stats rows)."""
    path = tmp_path / "zread_locustfile.py"
    path.write_text(HEAD + textwrap.dedent(body))
    prefix = tmp_path / "run"
    argv = [sys.executable, "-m", "locust", "-f", str(path), "--headless", "--only-summary"]
    done = subprocess.run(
        [*argv, "--csv", str(prefix), *options],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=tmp_path,
        check=False,
        env=env,
    )
    with open(f"{prefix}_stats.csv", newline="") as f:
        rows = {(row["Type"], row["Name"]): row for row in csv.DictReader(f)}
    return done.returncode, done.stdout + done.stderr, rows


def count(rows: dict[tuple[str, str], dict[str, str]], kind: str, name: str) -> tuple[int, int]:
    row = rows[(kind, name)]
    return int(row["Request Count"]), int(row["Failure Count"])


def test_in_process_sessions_report_lateness_commands_and_sessions(tmp_path: Path) -> None:
    body = """
        class Flaky(ZreadUser):
            args = ()
            scenario = "flaky-pages"
            speed = 0.02
            sessions_per_user = 2
        """
    # The run quits when every user has run its sessions; -t only bounds a broken run.
    code, out, rows = locust(tmp_path, body, "-u", "3", "-r", "10", "-t", "40s")
    assert code == 0, out
    assert count(rows, "session", "generate") == (6, 0)
    for trigger in ("_page_done", "_catalog_step", "_retry_due"):
        assert count(rows, "lateness", trigger)[0] > 0
    answered, failed = count(rows, "command", "select_action")
    assert answered > 0 and failed == 0


def test_a_subclass_with_nothing_in_it_is_a_working_locustfile(tmp_path: Path) -> None:
    # The defaults: generate, -y, the default scenario, speed 1, sessions until the run
    # ends. A session takes longer than the run: what it reports in its first seconds is
    # enough. Each user's first catalog step is due within 1.3 s of the start (its start
    # spread, 1 s, and the step, 0.15-0.28 s) plus the warm-up; 6 s leaves a loaded
    # machine room for the warm-up and Locust's own start.
    body = """
        class Generate(ZreadUser):
            pass
        """
    code, out, rows = locust(tmp_path, body, "-u", "2", "-r", "10", "-t", "6s")
    assert code == 0, out
    assert ("command", "select_action") not in rows  # -y: generate asks nothing first
    late, failed = count(rows, "lateness", "_catalog_step")
    assert late >= 2 and failed == 0
    assert int(rows[("", "Aggregated")]["Failure Count"]) == 0


def test_process_mode_drives_real_zread_processes(tmp_path: Path) -> None:
    body = """
        class Processes(ZreadUser):
            mode = "process"
            args = ()
            scenario = "flaky-pages"
            speed = 0.02
            sessions_per_user = 1
        """
    code, out, rows = locust(tmp_path, body, "-u", "2", "-r", "10", "-t", "20s")
    assert code == 0, out
    assert count(rows, "session", "generate") == (2, 0)
    assert count(rows, "command", "select_action")[0] >= 2
    assert count(rows, "lateness", "process timers")[0] > 0


def test_a_client_mistake_fails_the_session(tmp_path: Path) -> None:
    body = """
        class Careless(ZreadUser):
            speed = 0.02
            sessions_per_user = 1
            sent = False

            def answer(self, event):
                if not self.sent and not event["done"]:
                    self.sent = True
                    return b'{"type":"bogus"}\\n'
                return super().answer(event)
        """
    code, out, rows = locust(tmp_path, body, "-u", "2", "-r", "10", "-t", "20s")
    assert code == 1, out  # Locust's exit code when a request failed
    assert count(rows, "session", "generate") == (2, 2)
    assert count(rows, "command", "bogus") == (2, 2)
    assert "client mistake" in out and "bogus" in out


def test_memory_is_the_rss_added_per_live_session(tmp_path: Path) -> None:
    # Four users, one slow session each, all live together: the peak holds four.
    body = """
        from locust import events
        from simulator.locust_user.memory import memory_of

        class Slow(ZreadUser):
            speed = 0.1
            sessions_per_user = 1
            start_spread = 0  # all four start together

        @events.quitting.add_listener
        def show(environment, **_):
            m = memory_of(environment)
            added, live = m.figure()
            print(f"RAW {added} {live} {m.peak - m.before}")

        print_memory_at_exit()
        """
    code, out, _ = locust(tmp_path, body, "-u", "4", "-r", "100", "-t", "20s")
    assert code == 0, out
    raw = next(line for line in out.splitlines() if line.startswith("RAW "))
    added, live, own = (int(word) for word in raw.split()[1:])
    assert live == 4 and added == own
    # A live session holds some memory (about 10 KB here), and far less than a process
    # of its own would (~20 MB): a figure outside is a broken measure.
    assert 0 < added / live < 1024
    line = next(line for line in out.splitlines() if line.startswith("memory: "))
    assert line.startswith(f"memory: {added / live:.1f} KB per live session")
    assert "4 live at the peak" in line


def test_nothing_but_this_module_imports_locust() -> None:
    # Locust is an optional extra that monkey-patches the process it is imported in: the
    # pytest plugin, the drop-in process and every other command must run without it.
    code = textwrap.dedent(
        """
        import io, sys
        import simulator.pytest_plugin
        from simulator.cli import main
        for argv in (["version", "--stdio"], ["generate", "--stdio", "-y", "--no-files",
                     "--speed", "0"], ["scenarios"], ["schema", "--help"], ["load", "--help"],
                     ["coverage", "--help"], ["journal", "--help"], ["serve", "--help"]):
            main(argv, stdin=io.BytesIO(), stdout=io.BytesIO(), stderr=io.StringIO(),
                 environ={})
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("locust", "gevent")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False
    )
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "[]"), done.stderr


def test_a_session_that_never_sleeps_still_times_out(tmp_path: Path) -> None:
    # Every update_fields makes another event at once, which asks for update_fields
    # again: the session never waits for a timer, and must still meet its timeout while
    # the rest of the process (the run's end, -t) goes on.
    body = """
        class Spin(ZreadUser):
            command = "config"
            args = ()
            speed = 0.0
            timeout = 2.0
            sessions_per_user = 1

            def answer(self, event):
                if "update_fields" in event["waiting_for"]:
                    return b'{"type":"update_fields","params":{"fields":{"language":"en"}}}\\n'
                return super().answer(event)
        """
    started = time.monotonic()
    code, out, rows = locust(tmp_path, body, "-u", "1", "-r", "10", "-t", "15s")
    assert time.monotonic() - started < 15 + 10, out
    assert code == 1, out
    assert count(rows, "session", "config") == (1, 1)
    assert "no done:true within 2 s" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_process_mode_starts_its_own_zread_not_a_warm_servers(tmp_path: Path) -> None:
    # Handed to a warm server, a session's memory would be the server's, not counted.
    body = """
        from simulator.locust_user.memory import CHILDREN

        class Processes(ZreadUser):
            mode = "process"
            speed = 0.02
            sessions_per_user = 1

            def answer(self, event):
                for pid in list(CHILDREN):
                    try:
                        with open(f"/proc/{pid}/environ", "rb") as f:
                            names = [v.split(b"=")[0] for v in f.read().split(b"\\0")]
                    except OSError:
                        continue
                    print("SERVER" if b"ZREAD_SIM_SERVER" in names else "COLD", flush=True)
                return super().answer(event)
        """
    env = {**os.environ, "ZREAD_SIM_SERVER": str(tmp_path / "no-such-server.sock")}
    code, out, rows = locust(tmp_path, body, "-u", "1", "-r", "10", "-t", "20s", env=env)
    assert code == 0, out
    assert count(rows, "session", "generate") == (1, 0)
    assert "COLD" in out and "SERVER" not in out


def test_a_masters_side_by_side_reaches_its_workers_and_each_session_is_reported(
    tmp_path: Path,
) -> None:
    # The class says one at a time; the master's option says three, for each worker.
    body = """
        from locust import events

        class Three(ZreadUser):
            speed = 0.02
            sessions_per_user = 3

            def _side_by_side(self):
                at_once = super()._side_by_side()
                print(f"side by side: {at_once}", flush=True)
                return at_once
        """
    options = ["-u", "2", "-r", "10", "-t", "40s", "--processes", "2"]
    code, out, rows = locust(tmp_path, body, *options, "--zread-side-by-side", "3")
    assert code == 0, out
    assert "side by side: 3" in out and "side by side: 1" not in out
    assert count(rows, "session", "generate") == (6, 0)  # 2 users x 3, on 2 workers


def test_sessions_side_by_side_keep_their_own_retries_through_super_answer(
    tmp_path: Path,
) -> None:
    # failing-pages fails pages for good; the reference client retries each once, per
    # session: a client shared by the sessions would skip the retries another one made.
    body = """
        class Overridden(ZreadUser):
            args = ()
            scenario = "failing-pages"
            speed = 0.02
            side_by_side = 4
            sessions_per_user = 4

            def answer(self, event):
                return super().answer(event)
        """
    code, out, rows = locust(tmp_path, body, "-u", "1", "-r", "10", "-t", "40s")
    assert code == 0, out
    assert count(rows, "session", "generate") == (4, 0)
    # One session of each seed, in virtual time, its retries counted alone.
    retries = 0
    for seed in range(4):
        sim = virtual_start("generate", scenario="failing-pages", seed=seed)
        sent = drive(sim)
        assert sim.done
        sim.close()
        retries += sum(line.startswith(b'{"type":"retry"') for line in sent)
    assert retries == 8  # two a session
    assert count(rows, "command", "retry")[0] == retries


def test_a_graceful_stop_ends_the_sessions_running_and_starts_no_more(tmp_path: Path) -> None:
    # Sessions of ~1.5 s, two at a time; the run stops at 3 s with 30 s to end in: the
    # users end what runs, begin nothing, and stop long before Locust would kill them.
    body = """
        class Slow(ZreadUser):
            speed = 0.1
            side_by_side = 2
        """
    began = time.monotonic()
    code, out, rows = locust(
        tmp_path, body, "-u", "2", "-r", "10", "-t", "3s", "--stop-timeout", "30"
    )
    assert code == 0, out
    assert time.monotonic() - began < 25, out  # not killed at the stop timeout
    ended, failed = count(rows, "session", "generate")
    assert ended >= 4 and failed == 0


def test_a_worker_reads_locusts_default_options_once_a_process() -> None:
    # Locust's worker asks for them once for each of the master's options at every spawn
    # message; read once, they are the same dict each time, and Locust's own.
    probe = (
        "import simulator.locust\n"
        "from locust import argument_parser as parser\n"
        "first = parser.default_args_dict()\n"
        "print(first is parser.default_args_dict(), 'headless' in first, 'num_users' in first)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["True", "True", "True"]
