"""``simulator.pipes``: the public face of :mod:`simulator.runners.pipes`."""

from simulator.runners.pipes import *  # noqa: F403
from simulator.runners.pipes import __all__ as __all__
