"""The error tree: every error the simulator raises on purpose, by whose fault it is.

Owns the four branches under :class:`SimulatorError`:

- :class:`ConfigurationError`: the user's setup (a bad flag or variable, scenario,
  home, control address). The command line prints its message as one line and exits
  2; nothing is changed. :class:`OutOfResources` is the machine's part of the setup:
  the limits the process was given (``ulimit``) or the system's, too low to run.
- :class:`MisuseError`: a caller of the Python API used it out of order or with a bad
  argument (start twice, feed before start, an unknown zread flag to ``start``).
- :class:`ProtocolError`: the zread client broke the protocol (bad JSON or params, a
  command out of turn). Never raised to a process's user: the session answers with an
  event whose ``error`` is the message, and records it in its journal.
- :class:`SimulatorBug`: the simulator's own bug (a chart that cannot compile). The
  command line prints one line and exits 70; so does any other unexpected exception.

The two companion protocols (:mod:`simulator.clijson`, :mod:`simulator.control`) keep
errors of their own, so each stays usable without the rest of the package.

Must not: import anything from the package: every module may raise these.
"""

from __future__ import annotations

from typing import ClassVar


class SimulatorError(Exception):
    """The root of the simulator's errors; ``exit_code`` is what the command line
    exits with when one reaches it."""

    exit_code: ClassVar[int] = 70


class ConfigurationError(SimulatorError):
    """The user's setup cannot be used; the message names what and why (exit 2)."""

    exit_code = 2


class OutOfResources(ConfigurationError):
    """The process ran out of file descriptors, memory or threads: the machine's limits
    (its ``ulimit``, or the whole system's), which the user sets, not a fault of the
    input nor of the simulator. The message names what ran out and what the simulator
    was doing (``out of file descriptors while reading the wiki (ulimit -n is 6)``);
    one line, exit 2, and nothing it could not finish is reported as done."""


class MisuseError(SimulatorError):
    """The Python API was called out of order or with a bad argument: the caller's bug."""


class ProtocolError(SimulatorError):
    """The client broke the protocol; the message is the event's ``error`` text."""


class SimulatorBug(SimulatorError):
    """The simulator's own bug: never the user's or the client's fault (exit 70)."""
