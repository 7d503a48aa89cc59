"""Tests for simulator.cli.options: the simulator options, their variables, and what
``install`` bakes."""

from __future__ import annotations

import argparse
import os

import pytest

from simulator.cli.options import (
    ENVIRONMENT,
    UsageError,
    add_simulator_options,
    apply_environment,
    baked,
)


def parse(argv: list[str], environ: dict[str, str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_simulator_options(parser)
    args = parser.parse_args(argv)
    if environ is not None:
        apply_environment(args, environ)
    return args


def test_every_option_has_its_variable_and_defaults_to_none_until_applied() -> None:
    args = parse([])
    assert all(getattr(args, option) is None for option in ENVIRONMENT)
    assert all(variable.startswith("ZREAD_SIM_") for variable, _, _ in ENVIRONMENT.values())
    apply_environment(args, {})
    assert (args.scenario, args.seed, args.speed, args.files, args.frame) == (
        "default",
        0,
        1.0,
        True,
        False,
    )


def test_a_flag_beats_its_variable() -> None:
    environ = {"ZREAD_SIM_SEED": "7", "ZREAD_SIM_SCENARIO": "empty", "ZREAD_SIM_FILES": "0"}
    args = parse(["--seed", "3"], environ)
    assert (args.seed, args.scenario, args.files) == (3, "empty", False)


@pytest.mark.parametrize(
    ("variable", "text", "says"),
    [
        ("ZREAD_SIM_SEED", "x", "ZREAD_SIM_SEED: expected an integer, got 'x'"),
        ("ZREAD_SIM_SPEED", "-1", "ZREAD_SIM_SPEED: expected a number >= 0, got '-1'"),
        ("ZREAD_SIM_FILES", "maybe", "ZREAD_SIM_FILES: expected 1 or 0 (true/false), got 'maybe'"),
    ],
)
def test_a_bad_variable_is_a_usage_error_naming_it(variable: str, text: str, says: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse([], {variable: text})
    assert str(refused.value) == says


def test_baked_options_mean_the_same_from_any_directory(tmp_path: object) -> None:
    args = parse(
        [
            "--scenario",
            "empty",
            "--speed",
            "0.5",
            "--home",
            "h",
            "--no-files",
            "--control",
            "unix:s",
        ]
    )
    variables = baked(args)
    assert variables["ZREAD_SIM_SCENARIO"] == "empty"  # a name stays a name
    assert variables["ZREAD_SIM_SPEED"] == "0.5"
    assert variables["ZREAD_SIM_HOME"] == os.path.abspath("h")
    assert variables["ZREAD_SIM_FILES"] == "0"
    assert variables["ZREAD_SIM_CONTROL"] == "unix:" + os.path.abspath("s")
    assert "ZREAD_SIM_SEED" not in variables  # not given: not baked


def test_baking_an_unknown_scenario_fails_now() -> None:
    from simulator.scenario import ScenarioError

    with pytest.raises(ScenarioError):
        baked(parse(["--scenario", "no-such-scenario"]))
