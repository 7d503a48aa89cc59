"""Scenarios: a world, its timing and its failures, by name or from a TOML file.

Owns: :class:`Scenario`, the built-in catalogue (``simulator/scenario/builtin/*.toml``), and
loading: ``extends`` chains merged table by table (arrays are replaced, not appended),
then validated into typed structs. A scenario that does not say ``extends`` extends
``default``, so a file only states what differs. A scenario that names an unknown key, a wrong type
or an impossible value is refused with its file, the key and the reason.

Must not: draw random numbers, read the clock, or write anything.
"""

# No `from __future__ import annotations` here: msgspec resolves these Structs'
# annotations when a scenario is first loaded, and each one left a string costs a
# compile and an eval at start-up.
import errno
import functools
import os
import tomllib
from collections.abc import Mapping
from typing import Any

import msgspec

from simulator.errors import ConfigurationError
from simulator.scenario.failures import Failure
from simulator.scenario.faults import Fault
from simulator.scenario.httpfaults import HttpFault
from simulator.scenario.timing import Delay
from simulator.scenario.world import World

DEFAULT = "default"


class ScenarioError(ConfigurationError):
    """A scenario that cannot be used; the message names the file, the key and why."""


class Scenario(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A world plus timing plus failures; the only source of behaviour variation.

    ``speed`` multiplies every delay, on top of ``--speed``; ``failures`` are domain
    failures (a page, the catalog, the download...); ``faults`` are transport faults
    (what happens to the bytes on the way to the client); ``http_faults`` are what the
    wiki server's requests meet (a file's ``[[faults.http]]`` entries).
    """

    name: str = ""
    description: str = ""
    extends: str = ""
    world: World = msgspec.field(default_factory=World)
    speed: float = 1.0
    timing: dict[str, Delay] = msgspec.field(default_factory=dict)
    failures: list[Failure] = msgspec.field(default_factory=list)
    faults: list[Fault] = msgspec.field(default_factory=list)
    http_faults: list[HttpFault] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0.0 <= self.speed < float("inf"):
            raise ValueError("speed must be a number >= 0")


# The built-ins ship inside the package; os.path keeps importlib.resources and pathlib
# (~10 ms) out of every start-up.
_BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")


_SEE = "(see: zread-sim scenarios)"
"""Where the names are listed: the installed command, whatever this program runs as."""


def builtin_names() -> list[str]:
    """The names of the built-in scenarios, ``default`` first."""
    names = sorted(n.removesuffix(".toml") for n in os.listdir(_BUILTIN_DIR) if n.endswith(".toml"))
    return sorted(names, key=lambda n: n != DEFAULT)


def builtin_text(name: str) -> str:
    """The TOML source of a built-in scenario."""
    path = os.path.join(_BUILTIN_DIR, f"{name}.toml")
    if os.path.basename(name) != name or not os.path.isfile(path):
        raise ScenarioError(f"unknown scenario {name!r} {_SEE}")
    with open(path, encoding="utf-8") as f:
        return f.read()


@functools.cache
def _builtin_data(name: str) -> dict[str, Any]:
    """A built-in scenario's TOML, parsed once per process (a test suite starts many
    sessions on one scenario, and parsing is half of what starting one costs). Shared:
    :func:`load_scenario` only reads it (its merge copies the tables it changes)."""
    return tomllib.loads(builtin_text(name))


def _is_path(ref: str) -> bool:
    return ref.endswith(".toml") or "/" in ref or os.sep in ref


_EXHAUSTED = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)
"""Out of descriptors or memory: no answer about the file (as
:func:`simulator.hosts.limits.exhausted`, which a scenario may not import)."""


def _read(ref: str, base: str | None) -> tuple[str, dict[str, Any]]:
    """Parse a scenario reference: a built-in name, or a path ending in .toml."""
    if _is_path(ref):
        from simulator.formats.bounds import LIMITS, FormatError, check_size
        from simulator.regularfile import NotRegularFile, read_regular

        path = ref if base is None else os.path.join(base, ref)
        try:
            data = read_regular(path, f"scenario {ref}", LIMITS["scenario"])
            check_size(data, "scenario", f"scenario {ref}")
            text = data.decode("utf-8")
        except OSError as err:
            if err.errno in _EXHAUSTED:  # the machine's, which the command line says as such
                raise
            raise ScenarioError(f"scenario {ref}: cannot read: {err.strerror}") from None
        except UnicodeDecodeError as err:
            raise ScenarioError(f"scenario {ref}: not UTF-8: {err.reason}") from None
        except (FormatError, NotRegularFile) as err:
            raise ScenarioError(str(err)) from None
        origin = path
    else:
        return f"built-in {ref}", _builtin_data(ref)
    return origin, _parse(text, origin)


_WHOLE_VALUES = {("timing",)}
"""Tables whose entries a child replaces whole: a delay may change its kind."""


def _merge(
    base: Mapping[str, Any], override: Mapping[str, Any], path: tuple[str, ...] = ()
) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping) and path not in _WHOLE_VALUES:
            merged[key] = _merge(old, value, (*path, key))
        else:
            merged[key] = value
    return merged


_FAULT_TABLES = ("stdio", "http")
"""The arrays of a ``[faults]`` table: transport faults, and the wiki server's."""


def _fault_tables(data: Mapping[str, Any], origin: str) -> Mapping[str, Any]:
    """One file's tables with its faults as a table of arrays (``stdio``, ``http``),
    so a file that states one kind keeps the other its parent states.

    TOML makes ``faults`` an array when a file writes ``[[faults]]`` (an ``http`` array
    written after them lands inside the last entry: lifted out here), and a table
    when it writes only ``[[faults.http]]``. :class:`ScenarioError` naming ``origin``
    (the file the user passed) for a ``faults`` table with another key."""
    if "http_faults" in data:
        raise ScenarioError(
            f"scenario {origin}: http_faults: unknown key (HTTP faults are [[faults.http]])"
        )
    faults = data.get("faults")
    if isinstance(faults, Mapping):
        unknown = sorted(set(faults) - set(_FAULT_TABLES))
        if unknown:
            raise ScenarioError(
                f"scenario {origin}: faults.{unknown[0]}: unknown key "
                "(faults holds [[faults]] entries, or the arrays stdio and http)"
            )
        return data
    if not isinstance(faults, list):
        return data  # none, or not an array: the struct says what is wrong
    stdio: list[Any] = []
    http: list[Any] = []
    for entry in faults:
        if isinstance(entry, Mapping) and "http" in entry:
            lifted = entry["http"]
            if not isinstance(lifted, list):
                raise ScenarioError(
                    f"scenario {origin}: faults.http: expected an array of tables ([[faults.http]])"
                )
            http.extend(lifted)
            entry = {key: value for key, value in entry.items() if key != "http"}
            if not entry:
                continue  # a [[faults]] written only to hold [[faults.http]]
        stdio.append(entry)
    tables: dict[str, Any] = {"stdio": stdio}
    if http:
        tables["http"] = http
    return {**data, "faults": tables}


def _explain(err: msgspec.ValidationError) -> tuple[str, str]:
    from simulator.formats.bounds import explain  # only a scenario that fails needs it

    return explain(err)


def _parse(text: str, origin: str) -> dict[str, Any]:
    """``text`` as TOML; :class:`ScenarioError` naming ``origin`` when it is not."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"scenario {origin}: not valid TOML: {err}") from None
    except RecursionError:
        raise ScenarioError(f"scenario {origin}: nested too deep to read") from None
    except ValueError:  # int() refused a number's digits
        raise ScenarioError(f"scenario {origin}: a number has too many digits to read") from None


def load_scenario(
    ref: str = DEFAULT, *, text: str | None = None, base: str | None = None
) -> Scenario:
    """Load a built-in scenario by name, or a TOML file by path, with its ``extends``.

    With ``text``, that TOML is the scenario, and ``ref`` its name (nothing is read for
    it; what it extends is). A relative path is read from ``base`` (None: where the
    process runs)."""
    if not ref:  # an empty ZREAD_SIM_SCENARIO or --scenario "" names nothing
        raise ScenarioError(f"empty scenario name: give a built-in name or a TOML path {_SEE}")
    chain = _chain(ref, text, base)
    origin = chain[0][0]
    merged: dict[str, Any] = {}
    for _, data in reversed(chain):
        merged = _merge(merged, _fault_tables(data, origin))
    merged.pop("extends", None)
    scenario = _validated(merged, origin)
    scenario.name = scenario.name or _name(ref, origin, text)
    scenario.extends = chain[1][0] if len(chain) > 1 else ""
    return scenario


def _chain(ref: str, text: str | None, base: str | None) -> list[tuple[str, dict[str, Any]]]:
    """``(origin, data)`` of the scenario ``ref`` (``text`` when given) and of each one
    it extends, nearest first; a scenario that comes back in its own chain is refused."""
    chain: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    current: str | None = ref
    while current:
        if text is not None and not chain:
            origin, data = ref, _parse(text, ref)
        else:
            origin, data = _read(current, base)
        identity = origin if origin.startswith("built-in ") else os.path.realpath(origin)
        if identity in seen:
            raise ScenarioError(f"scenario {origin}: extends itself (cycle)")
        seen.add(identity)
        chain.append((origin, data))
        current, base = _extended(origin, data, current)
    return chain


def _extended(origin: str, data: Mapping[str, Any], ref: str) -> tuple[str | None, str | None]:
    """What the scenario ``ref``, read from ``origin``, extends (None: nothing), and the
    directory a path to it is relative to (None: where the process runs)."""
    parent = data.get("extends", DEFAULT if ref != DEFAULT else "")
    if not isinstance(parent, str):
        raise ScenarioError(f"scenario {origin}: extends: expected a string")
    from_file = not origin.startswith("built-in ")
    base = os.path.dirname(origin) if from_file and _is_path(parent) else None
    return parent or None, base


def _validated(merged: Mapping[str, Any], origin: str) -> Scenario:
    """The merged tables as a :class:`Scenario`; :class:`ScenarioError` naming
    ``origin``, the key and the reason when they are not one."""
    timing = merged.get("timing")
    if isinstance(timing, Mapping):  # msgspec names a dict's keys "[...]": check each here
        for delay_name, delay in timing.items():
            try:
                msgspec.convert(delay, Delay)
            except msgspec.ValidationError as err:
                key, reason = _explain(err)
                where = f"timing.{delay_name}" + (f".{key}" if key else "")
                raise ScenarioError(f"scenario {origin}: {where}: {reason}") from None
    http: list[HttpFault] = []
    faults = merged.get("faults")
    if isinstance(faults, Mapping):  # the tables of _fault_tables
        http = _http_faults(faults.get("http", []), origin)
        merged = {**merged, "faults": faults.get("stdio", [])}
    try:
        scenario = msgspec.convert(merged, Scenario)
    except msgspec.ValidationError as err:
        key, reason = _explain(err)
        where = f"{key}: " if key else ""
        raise ScenarioError(f"scenario {origin}: {where}{reason}") from None
    scenario.http_faults = http
    return scenario


class _HttpTables(msgspec.Struct, forbid_unknown_fields=True):
    http: list[HttpFault]


def _http_faults(entries: Any, origin: str) -> list[HttpFault]:
    """``[[faults.http]]`` entries as :class:`HttpFault`; :class:`ScenarioError` naming
    ``origin``, the key (``faults.http[0].status``) and the reason."""
    try:
        return msgspec.convert({"http": entries}, _HttpTables).http
    except msgspec.ValidationError as err:
        key, reason = _explain(err)
        raise ScenarioError(f"scenario {origin}: faults.{key or 'http'}: {reason}") from None


def _name(ref: str, origin: str, text: str | None) -> str:
    """The name of a scenario that gives none: ``ref`` for a built-in or a text, else
    its file's name without ``.toml``."""
    if text is not None or origin == f"built-in {ref}":
        return ref
    return ref.removesuffix(".toml").rsplit("/", 1)[-1]
