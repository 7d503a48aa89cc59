"""Tests for simulator.scenario.timing: delay distributions, their draws and their validation."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import msgspec
import pytest

from simulator.scenario.timing import MAX_SECONDS, Delay, Lognormal


def delay(spec: dict[str, Any]) -> Delay:
    return msgspec.convert(spec, Delay)


def draws(d: Delay, seed: int = 7, n: int = 2000) -> list[float]:
    rng = random.Random(seed)
    return [d.draw(rng) for _ in range(n)]


def test_fixed_is_fixed() -> None:
    d = delay({"fixed": 0.25})
    assert set(draws(d)) == {0.25}


def test_fixed_zero_is_allowed() -> None:
    assert set(draws(delay({"fixed": 0}), n=10)) == {0.0}


def test_uniform_stays_within_bounds_and_spreads() -> None:
    values = draws(delay({"uniform": [0.3, 0.6]}))
    assert all(0.3 <= v <= 0.6 for v in values)
    assert min(values) < 0.33
    assert max(values) > 0.57
    assert 0.43 < sum(values) / len(values) < 0.47


def test_uniform_degenerate_range() -> None:
    assert set(draws(delay({"uniform": [1.5, 1.5]}), n=20)) == {1.5}


def test_lognormal_is_positive_and_capped() -> None:
    values = draws(delay({"lognormal": {"median": 1.0, "sigma": 1.5, "max": 4.0}}))
    assert all(0 < v <= 4.0 for v in values)
    assert 4.0 in values  # sigma 1.5 puts ~18% of the mass above 4
    below = sum(v < 1.0 for v in values) / len(values)
    assert 0.45 < below < 0.55  # half the draws fall below the median


def test_lognormal_without_max_is_unbounded_but_positive() -> None:
    values = draws(delay({"lognormal": {"median": 0.5, "sigma": 0.4}}))
    assert all(v > 0 for v in values)
    assert all(math.isfinite(v) for v in values)
    assert Lognormal(0.5, 0.4).max == math.inf


def test_lognormal_sigma_zero_is_the_median() -> None:
    values = draws(delay({"lognormal": {"median": 2.0, "sigma": 0.0}}), n=50)
    assert all(v == pytest.approx(2.0) for v in values)


@pytest.mark.parametrize(
    "spec",
    [
        {"fixed": 1.0},
        {"uniform": [0.1, 0.9]},
        {"lognormal": {"median": 1.0, "sigma": 0.5, "max": 3.0}},
    ],
)
def test_same_seed_same_draws(spec: dict[str, Any]) -> None:
    d = delay(spec)
    assert draws(d, seed=42, n=100) == draws(d, seed=42, n=100)


def test_different_seeds_differ() -> None:
    d = delay({"uniform": [0.0, 1.0]})
    assert draws(d, seed=1, n=20) != draws(d, seed=2, n=20)


@pytest.mark.parametrize(
    "spec",
    [
        {"fixed": 3.0},
        {"uniform": [0.1, 0.9]},
        {"lognormal": {"median": 1.0, "sigma": 0.5}},
    ],
)
def test_every_kind_consumes_two_draws(spec: dict[str, Any]) -> None:
    rng = random.Random(99)
    reference = random.Random(99)
    for _ in range(5):
        delay(spec).draw(rng)
        reference.random()
        reference.random()
        assert rng.getstate() == reference.getstate()


def test_changing_a_kind_keeps_the_stream_aligned() -> None:
    def third_draw(first: Delay) -> float:
        rng = random.Random(5)
        first.draw(rng)
        first.draw(rng)
        return delay({"uniform": [0.0, 10.0]}).draw(rng)

    kinds = [
        delay({"fixed": 1.0}),
        delay({"uniform": [2.0, 3.0]}),
        delay({"lognormal": {"median": 1.0, "sigma": 1.0}}),
    ]
    assert len({third_draw(k) for k in kinds}) == 1


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"fixed": 1.0, "uniform": [0.0, 1.0]},
        {"fixed": 1.0, "lognormal": {"median": 1.0, "sigma": 0.1}},
        {"uniform": [0.0, 1.0], "lognormal": {"median": 1.0, "sigma": 0.1}},
        {"fixed": -0.1},
        {"uniform": [-1.0, 1.0]},
        {"uniform": [2.0, 1.0]},
        {"uniform": [1.0]},
        {"lognormal": {"median": 0.0, "sigma": 0.5}},
        {"lognormal": {"median": -1.0, "sigma": 0.5}},
        {"lognormal": {"median": 1.0, "sigma": -0.5}},
        {"lognormal": {"median": 1.0, "sigma": 0.5, "max": -1.0}},
        {"lognormal": {"median": 1.0}},
        {"fixed": "1"},
        {"fixd": 1.0},
        {"lognormal": {"median": 1.0, "sigma": 0.5, "mean": 2.0}},
    ],
)
def test_invalid_specs_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(spec, Delay)


def test_refusal_explains_two_kinds() -> None:
    with pytest.raises(msgspec.ValidationError, match="exactly one"):
        msgspec.convert({"fixed": 1.0, "uniform": [0, 1]}, Delay)


def test_refusal_explains_lognormal_median() -> None:
    with pytest.raises(msgspec.ValidationError, match="median"):
        msgspec.convert({"lognormal": {"median": 0, "sigma": 1}}, Delay)


@pytest.mark.parametrize(
    "spec",
    [
        {"fixed": float("inf")},
        {"fixed": float("nan")},
        {"uniform": [0.0, float("inf")]},
        {"lognormal": {"median": float("nan"), "sigma": 0.5}},
    ],
)
def test_a_delay_must_be_finite(spec: dict[str, object]) -> None:
    with pytest.raises(msgspec.ValidationError, match="finite"):
        msgspec.convert(spec, Delay)


def test_a_huge_sigma_draws_huge_delays_never_an_overflow() -> None:
    import random

    huge = msgspec.convert({"lognormal": {"median": 1.0, "sigma": 1000.0}}, Delay)
    draws = [huge.draw(random.Random(seed)) for seed in range(50)]
    assert all(d >= 0 for d in draws) and max(draws) == MAX_SECONDS


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"fixed": 1e308}, "a delay must be at most 1,000,000,000 seconds"),
        ({"uniform": [0.0, 2e9]}, "a delay must be at most 1,000,000,000 seconds"),
        (
            {"lognormal": {"median": 1e10, "sigma": 0.1}},
            "lognormal median must be <= 1,000,000,000 seconds",
        ),
    ],
)
def test_a_delay_longer_than_max_seconds_is_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=re.escape(message)):
        msgspec.convert(spec, Delay)
    assert msgspec.convert({"fixed": MAX_SECONDS}, Delay).fixed == MAX_SECONDS
