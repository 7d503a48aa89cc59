"""What the load test's modules share: its error.

Owns: :class:`LoadError`, a bad argument of ``zread-sim load`` or an unusable scenario
(one line on stderr, exit 2).

Must not: run, measure or print anything. It imports nothing of the package but its
errors.
"""

from __future__ import annotations

from simulator.errors import ConfigurationError


class LoadError(ConfigurationError):
    """A bad argument or an unusable scenario: one line on stderr, exit 2."""
