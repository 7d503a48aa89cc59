"""N generate sessions to done in one test, in virtual time, files off: ``ZreadSim()``
without a home or a project (what ``zread_sim`` runs with files on)."""

import os
import time

from simulator.virtual import ZreadSim

N = int(os.environ.get("N", "50"))


def test_generate_sessions_files_off() -> None:
    sim = ZreadSim()
    t0 = time.perf_counter()
    for _ in range(N):
        session = sim.start("generate", "-y")
        done = session.wait_done()
        assert done["vm"]["state"] == "done"
        assert done["vm"]["done_total"] == 16
        assert not session.violations
        session.close()
    with open(os.environ["TIMING_FILE"], "a") as f:
        f.write(f"sim-files-off {(time.perf_counter() - t0) / N:.6f}\n")
    sim.close()
