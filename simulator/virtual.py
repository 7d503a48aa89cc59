"""``simulator.virtual``: the public face of :mod:`simulator.runners.virtual`."""

from simulator.runners.virtual import *  # noqa: F403
from simulator.runners.virtual import __all__ as __all__
