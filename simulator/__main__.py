"""The program: what ``zread``, ``zread-sim`` and ``python -m simulator`` run.

Owns: :func:`main`, which catches SIGTERM, SIGINT and SIGHUP before it imports
anything else (:mod:`simulator.signals`), then runs the command line
(:func:`simulator.cli.main`) and gives its exit code.

Must not: import anything at module level but :mod:`simulator.signals`.
"""

from simulator import signals


def main() -> int:
    """Run the command line, signals caught from its first instruction; the exit code."""
    signals.catch()
    try:
        from simulator.cli import main as run

        return run()
    except KeyboardInterrupt:  # a tool's Ctrl-C: the shell's code, no traceback
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
