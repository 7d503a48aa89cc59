"""Delay distributions: how long a simulated step takes.

Owns: :class:`Delay`, one distribution as a scenario declares it (``fixed``,
``uniform`` or ``lognormal``, WireMock's vocabulary), and its draw from a seeded RNG.

Must not: read the clock or sleep. The session multiplies a draw by the speed factor
and turns it into a deadline; a runner does the waiting.
"""

# No `from __future__ import annotations` here: msgspec resolves these Structs'
# annotations when a scenario is first loaded, and each one left a string costs a
# compile and an eval at start-up.
import math
import random

import msgspec

_EXP_MAX = 700.0
"""The largest exponent a lognormal draw takes (``math.exp`` overflows past ~709)."""
MAX_SECONDS = 1e9
"""The longest delay, about 31 years: a scenario may ask for "never", and a longer one,
times a speed, could leave the range of a float (a deadline of infinity, which no JSON
answer can show)."""


class Lognormal(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A lognormal delay: half the draws fall below ``median``; none above ``max``."""

    median: float
    sigma: float
    max: float = math.inf

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median) and math.isfinite(self.sigma)) or math.isnan(self.max):
            raise ValueError("lognormal median and sigma must be finite numbers")
        if self.median <= 0:
            raise ValueError("lognormal median must be > 0")
        if self.sigma < 0:
            raise ValueError("lognormal sigma must be >= 0")
        if self.max < 0:
            raise ValueError("lognormal max must be >= 0")
        if self.median > MAX_SECONDS:
            raise ValueError(f"lognormal median must be <= {MAX_SECONDS:,.0f} seconds")


class Delay(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Exactly one of ``fixed`` (seconds), ``uniform`` ([lower, upper]) or ``lognormal``."""

    fixed: float | None = None
    uniform: tuple[float, float] | None = None
    lognormal: Lognormal | None = None

    def __post_init__(self) -> None:
        given = [k for k in ("fixed", "uniform", "lognormal") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a delay takes exactly one of fixed, uniform, lognormal")
        numbers = [self.fixed] if self.fixed is not None else list(self.uniform or ())
        if not all(math.isfinite(n) for n in numbers):
            raise ValueError("a delay must be a finite number of seconds")
        if any(n > MAX_SECONDS for n in numbers):
            raise ValueError(f"a delay must be at most {MAX_SECONDS:,.0f} seconds")
        if self.fixed is not None and self.fixed < 0:
            raise ValueError("fixed must be >= 0")
        if self.uniform is not None:
            lower, upper = self.uniform
            if not 0 <= lower <= upper:
                raise ValueError("uniform needs 0 <= lower <= upper")

    def draw(self, rng: random.Random) -> float:
        """One delay in seconds, drawn from ``rng`` (two draws, whatever the kind).

        A fixed count keeps the stream aligned when a scenario changes a delay's kind.
        """
        u1, u2 = 1.0 - rng.random(), rng.random()
        if self.fixed is not None:
            return self.fixed
        if self.uniform is not None:
            lower, upper = self.uniform
            return lower + (upper - lower) * u2
        assert self.lognormal is not None
        spec = self.lognormal
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)  # Box-Muller
        # The exponent is held below exp's overflow: a huge sigma draws huge delays, as
        # asked, never an OverflowError, and none longer than MAX_SECONDS.
        return min(spec.median * math.exp(min(spec.sigma * z, _EXP_MAX)), spec.max, MAX_SECONDS)
