"""Tests for simulator.tools.load.common: the load test's error says whose fault it is."""

from __future__ import annotations

from simulator.errors import ConfigurationError
from simulator.tools.load import LoadError


def test_a_load_error_is_a_configuration_error_exiting_2() -> None:
    error = LoadError("give --sessions N")
    assert isinstance(error, ConfigurationError)
    assert error.exit_code == 2 and str(error) == "give --sessions N"
