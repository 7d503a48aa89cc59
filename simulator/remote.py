"""``simulator.remote``: the public face of :mod:`simulator.tools.remote`."""

from simulator.tools.remote import *  # noqa: F403
from simulator.tools.remote import __all__ as __all__
