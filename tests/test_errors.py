"""simulator.errors: one tree, four branches, and every error the package raises
on purpose in the branch that says whose fault it is."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

from simulator.errors import (
    ConfigurationError,
    MisuseError,
    ProtocolError,
    SimulatorBug,
    SimulatorError,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]

BRANCHES = (ConfigurationError, MisuseError, ProtocolError, SimulatorBug)

WHOSE = {
    "simulator.errors.OutOfResources": ConfigurationError,
    "simulator.cli.options.UsageError": ConfigurationError,
    "simulator.cli.program.StreamClosedError": ConfigurationError,
    "simulator.scenario.catalogue.ScenarioError": ConfigurationError,
    "simulator.warmsocket.ServeError": ConfigurationError,
    "simulator.regularfile.NotRegularFile": ConfigurationError,
    "simulator.hosts.dirfd.FilesError": ConfigurationError,
    "simulator.hosts.dirfd.LinkRefused": ConfigurationError,
    "simulator.formats.bounds.FormatError": ConfigurationError,
    "simulator.formats.config.ConfigFileError": ConfigurationError,
    "simulator.hosts.wikiserver.ListenError": ConfigurationError,
    "simulator.hosts.journal.JournalError": ConfigurationError,
    "simulator.tools.journal.JournalReadError": ConfigurationError,
    "simulator.tools.coverage.CoverageError": ConfigurationError,
    "simulator.tools.paths.PathsError": ConfigurationError,
    "simulator.tools.charts.ChartsError": ConfigurationError,
    "simulator.tools.charts.RenderError": ConfigurationError,
    "simulator.runners.controlled.ControlAddressError": ConfigurationError,
    "simulator.tools.load.common.LoadError": ConfigurationError,
    "simulator.tools.cassette.RecordError": ConfigurationError,
    "simulator.tools.schema.SchemaError": ConfigurationError,
    "simulator.core.interface.SessionError": MisuseError,
    "simulator.launch.FlagError": MisuseError,
    "simulator.runners.virtual.SimulationError": MisuseError,
    "simulator.tools.remote.RemoteError": MisuseError,
    "simulator.core.envelope.RejectedLine": ProtocolError,
    "simulator.core.driver.InvalidParams": ProtocolError,
    "simulator.core.chart_check.ChartError": SimulatorBug,
}
"""Each error class of the package, and the branch it belongs to."""

STANDALONE = {
    "simulator/clijson.py",
    "simulator/clijson_codec.py",
    "simulator/control.py",
    "simulator/control_frames.py",
    # Imports Locust, which monkey-patches the process; its SessionFailed is a failure
    # reported to Locust's statistics, never raised to a caller.
    "simulator/locust.py",
}
"""The companion protocols keep errors of their own, to stay usable alone."""


def test_the_branches_hang_from_one_root() -> None:
    for branch in BRANCHES:
        assert issubclass(branch, SimulatorError)
    for a in BRANCHES:
        for b in BRANCHES:
            assert a is b or not issubclass(a, b)


def test_exit_codes_say_whose_fault_it_is() -> None:
    assert ConfigurationError.exit_code == 2
    assert SimulatorBug.exit_code == 70
    assert MisuseError.exit_code == 70  # the command line misusing its own API is a bug


@pytest.mark.parametrize(("where", "branch"), sorted(WHOSE.items(), key=lambda kv: kv[0]))
def test_each_error_is_in_its_branch(where: str, branch: type[Exception]) -> None:
    module, name = where.rsplit(".", 1)
    error = getattr(importlib.import_module(module), name)
    assert issubclass(error, branch)


def test_every_error_class_of_the_package_is_in_the_tree() -> None:
    """An exception class declared anywhere in the package (but the two standalone
    protocols, and private control-flow signals) is one the table above names."""
    found = set()
    for path in sorted((ROOT / "simulator").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in STANDALONE:
            continue
        module = relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                error = getattr(importlib.import_module(module), node.name, None)
                if isinstance(error, type) and issubclass(error, BaseException):
                    found.add(f"{module}.{node.name}")
    tree = {name for name in found if name.rsplit(".", 1)[1] not in {b.__name__ for b in BRANCHES}}
    tree.discard("simulator.errors.SimulatorError")
    assert tree == set(WHOSE)


def test_a_protocol_error_message_is_the_event_error_text() -> None:
    from simulator.core.envelope import RejectedLine

    rejected = RejectedLine("invalid JSON: expected a value")
    assert isinstance(rejected, ProtocolError)
    assert rejected.text == str(rejected) == "invalid JSON: expected a value"


def test_the_tree_is_importable_from_the_package() -> None:
    import simulator

    assert simulator.SimulatorError is SimulatorError
    assert simulator.ConfigurationError is ConfigurationError
    assert issubclass(simulator.ScenarioError, simulator.ConfigurationError)
