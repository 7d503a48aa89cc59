"""Runners: what owns the clock and the streams of a session.

Owns: the process (:mod:`~simulator.runners.stdio`, with or without ``--control``),
virtual time for tests (:mod:`~simulator.runners.virtual`), real pipes in this process
(:mod:`~simulator.runners.pipes`), many sessions on one asyncio loop
(:mod:`~simulator.runners.aio`), the lifecycle every real-time runner shares
(:mod:`~simulator.runners.live`), the pure step from events to the actions a runner
carries out (:mod:`~simulator.runners.output`), the ``--journal`` observer
(:mod:`~simulator.runners.journaling`) and the admin API handlers
(:mod:`~simulator.runners.admin`).

Must not: decide anything about the protocol: the session does.
"""
