"""What a chart's model may ask of the session that runs it.

Owns: :class:`Driver`, the base class of every chart's model (the object whose
``state`` the shared ``transitions`` machine moves, and whose methods the chart names
as callbacks), the :class:`Runtime` protocol a session offers its driver, and
:class:`Flags`, the zread command-line flags a driver may read.

Must not: do I/O or read the clock. A driver changes its vm and asks for timers,
failures and effects through ``self.rt``; the session owns all of them.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import msgspec

from simulator.errors import ProtocolError

if TYPE_CHECKING:
    from simulator.scenario import Scenario
    from simulator.scenario.failures import Failure


class InvalidParams(ProtocolError):
    """Raised by a command check: the params are well-formed but name nothing valid."""


class Flags(msgspec.Struct, frozen=True):
    """The zread flags of a command that takes none; the base of each command's own.

    A command with flags declares a subclass in its module, one field per flag, each
    annotated with the :class:`~simulator.core.command.Flag` that sets it; its chart
    names it (``"flags"``), and its model reads ``self.flags``.
    """


class Runtime(Protocol):
    """The services a session gives its driver."""

    @property
    def scenario(self) -> Scenario: ...

    @property
    def rng(self) -> random.Random: ...

    @property
    def flags(self) -> Flags: ...

    @property
    def seed(self) -> int: ...

    @property
    def peer_attached(self) -> bool:
        """True when a control peer is attached (``--control``)."""
        ...

    def schedule(self, trigger: str, delay: str | float, **payload: Any) -> int:
        """Fire ``trigger`` after the named scenario delay (or a number of seconds)."""
        ...

    def cancel(self, timer_id: int) -> None:
        """Forget a timer that has not fired yet."""
        ...

    def failure(self, point: str, *, target: int = 0, attempt: int = 1) -> Failure | None:
        """The scenario's failure for this attempt at ``point``, or None if it succeeds."""
        ...

    def effect(self, effect: object) -> None:
        """Ask the runner to do something outside the session (I/O)."""
        ...


CURRENT_VERSION = ""
"""What :meth:`Driver.versions_read` gives by default: current's wiki.json only (or,
with no current version, the newest's), the one date a first event shows."""
EVERY_VERSION = "*"
"""What :meth:`Driver.versions_read` gives for a list that shows every version's date."""


class Driver:
    """Base of a chart's model: holds the vm and the runtime; callbacks are methods.

    ``state`` is written by the chart's ``transitions`` machine. ``vm`` is a msgspec
    Struct whose encoding is the event's ``vm``.
    """

    vm_type: ClassVar[type[Any]]
    state: str
    transition_taken: int = -1
    """The index of the chart transition that ran last (written by the chart's machine;
    :attr:`simulator.core.chart.Chart.transitions`)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.flags = rt.flags
        """The command's flags: a subclass narrows the type to its chart's flags type."""
        self.vm = self.vm_type()

    @classmethod
    def versions_read(cls, flags: Flags) -> str:
        """Whose wiki.json a start from the project's files reads: :data:`CURRENT_VERSION`,
        :data:`EVERY_VERSION`, or one version's id. The other versions are known by their
        folders' names only: a start costs the same whatever the project's past."""
        return CURRENT_VERSION

    def on_quit(self) -> None:
        """Called when the client quits; release whatever the driver holds."""

    def on_effect(self, effect: object, result: object) -> None:
        """Called with the result of an effect this driver asked for."""
