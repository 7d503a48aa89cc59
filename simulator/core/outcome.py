"""What one call of a session gives back: :class:`Outcome`.

Owns: the shape of a session call's result, the same for every session (a chart's and
a cassette's): the event lines it produced (the list itself, each with its newline),
the vm state each shows, whether the session is over, whether a quit ended it, and the
effects the driver asked for meanwhile. That is all a runner needs: nothing it does
afterwards asks the session again.

Must not: know how events are encoded or what an effect does.
"""

from __future__ import annotations

from typing import Final


class Outcome(list[bytes]):
    """What one session call produced, as data: its event lines in order (the list
    itself, each with its newline) and what a runner needs beside them.

    ``states[i]`` is the vm state event ``i`` shows (what a transport fault's
    ``on_state`` matches); ``done`` is true once the session is over (then the last
    event, if the call produced any, is the ``done:true`` one); ``quit`` is true when
    the call ended the session as ``quit`` does (the client's ``quit``, or a runner's
    ``Session.quit``); ``effects`` are what the driver asked of the outside world
    during the call, oldest first, to be performed before the events are written.
    """

    __slots__ = ("done", "effects", "quit", "states")

    def __init__(self) -> None:  # (list.__init__ would only empty the new list)
        self.states: list[str] = []
        self.effects: list[object] = _NO_EFFECTS
        self.done = False
        self.quit = False


_NO_EFFECTS: Final[list[object]] = []
"""Shared by every outcome without effects (most of them); never appended to."""
