"""The program: what ``zread``, ``zread-sim`` and ``python -m simulator`` run.

Owns: :func:`main`, which catches SIGTERM, SIGINT and SIGHUP before it imports
anything else (:mod:`simulator.signals`), then runs the command line
(:func:`simulator.cli.main`) and gives its exit code. When ``ZREAD_SIM_SERVER`` names
a warm server (``zread-sim serve``), the command is handed to it instead
(:mod:`simulator.launcher`, which imports nothing heavier than ``_socket``), and the
command line is imported only when there is none to run it; when it is unset and
``ZREAD_SIM_WARM`` is set (a ``zread`` installed with ``--warm``), the same with the
user's own warm server, started first when none runs (:mod:`simulator.warmlaunch`).

The garbage collector is off while the command line is imported, and what the imports
made is then frozen out of its reach (``gc.freeze``): start-up creates tens of thousands
of objects and no cycle worth collecting, and each collection it would trigger walks
them all again, a few milliseconds of every spawn.

Must not: import anything at module level but :mod:`simulator.signals` (and ``gc``,
built into the interpreter).
"""

import gc

from simulator import signals


def main() -> int:
    """Run the command line, signals caught from its first instruction; the exit code."""
    signals.catch()
    import os  # loaded by the interpreter's own start-up: costs nothing

    server = os.environ.get("ZREAD_SIM_SERVER")
    code = None
    if server:
        from simulator.launcher import hand_over

        code = hand_over(server)
    elif server is None and os.environ.get("ZREAD_SIM_WARM"):  # set, even empty: not warm
        from simulator.warmlaunch import hand_over_warm

        code = hand_over_warm(os.environ["ZREAD_SIM_WARM"])
    if code is not None:
        return code
    try:
        gc.disable()
        try:
            from simulator.cli import main as run
        finally:
            gc.freeze()
            gc.enable()
        return run()
    except KeyboardInterrupt:  # a tool's Ctrl-C: the shell's code, no traceback
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
