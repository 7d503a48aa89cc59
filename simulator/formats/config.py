"""``$HOME/.zread/config.yaml``: read bounded, written in zread's layout, saved round-trip.

Owns: the fields of ``zread config`` and where config.yaml keeps them
(:data:`CONFIG_KEYS`), zread's defaults (:func:`default_config`), the one bounded
decoder (:func:`read_config`, :func:`config_values`), the one encoder
(:func:`encode_config`, with :func:`update_config` to build a new document).

Must not: do I/O (the store reads and writes the file), read the clock, or import
anything above :mod:`simulator.core`.

Reading and writing YAML, bounded, is :mod:`simulator.formats.yamlv3`'s (PyYAML read
and written as Go's ``gopkg.in/yaml.v3`` does, imported on first use); a read past one
of its bounds is :class:`ConfigFileError`, one line naming the limit.

Writing a new file (:func:`encode_config`) is done as yaml.v3 writes it: 4-space
indent, lists indented under their key, double quotes only where a string needs
quoting, non-ASCII raw, no line wrapping, zread's keys in zread's order and the others
kept after them.

Saving over an existing file, keeping what the user wrote, is
:mod:`simulator.formats.config_edit`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from simulator.formats.bounds import FormatError
from simulator.formats.yamlv3 import dump, load

KIND: Final = "config.yaml"
"""The file's name in messages and its key in :data:`~simulator.formats.bounds.LIMITS`."""


class ConfigFileError(FormatError):
    """A config.yaml that cannot be used; the message (one line) names the problem.

    A file of the user's setup (exit 2 when it reaches the command line); also a
    :class:`ValueError`, as any malformed input is."""


CONFIG_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "language": ("language",),
    "doc_language": ("doc_language",),
    "max_concurrent": ("concurrency", "max_concurrent"),
    "max_retries": ("concurrency", "max_retries"),
    "llm_provider": ("llm", "provider"),
    "llm_base_url": ("llm", "base_url"),
    "llm_model": ("llm", "model"),
    "llm_api_key": ("llm", "api_key"),
}
"""Each field of ``zread config`` (by json_key, in the command's order) and where it
is in config.yaml."""
_INTEGER_KEYS: Final = frozenset({"max_concurrent", "max_retries"})
KEY_ORDER: Final[dict[tuple[str, ...], tuple[str, ...]]] = {
    (): ("language", "doc_language", "llm", "concurrency"),
    ("llm",): ("provider", "model", "api_key", "base_url"),
    ("concurrency",): ("max_concurrent", "max_retries"),
}
"""The order zread writes its keys in, per map."""


def default_config() -> dict[str, Any]:
    """The config.yaml zread's defaults make (a fresh install writes it on first save)."""
    return {
        "language": "zh",
        "doc_language": "zh",
        "llm": {
            "provider": "z.ai",
            "model": "glm-5",
            "api_key": "",
            "base_url": "https://open.bigmodel.cn/api/paas/v4",
        },
        "concurrency": {"max_concurrent": 1, "max_retries": 0},
    }


# -- reading -------------------------------------------------------------------------------


def read_config(data: bytes) -> dict[str, Any]:
    """A config.yaml's document: a mapping (an empty file is an empty one), or
    :class:`ConfigFileError` naming the problem or the bound it goes past."""
    try:
        doc = load(data, KIND)
    except FormatError as err:
        raise ConfigFileError(str(err)) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigFileError(f"{KIND}: expected a mapping, got {_kind(doc)}")
    return cast(dict[str, Any], doc)


def _get(doc: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = doc
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _text(key: str, value: Any) -> str:
    """A YAML value as the string ``zread config`` shows (Go decodes it into a string)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigFileError(f"{KIND}: {key}: expected a value, got {_kind(value)}")


def config_values(doc: Mapping[str, Any]) -> dict[str, str]:
    """The ``zread config`` fields config.yaml gives, as strings, by json_key, in the
    command's order; a field the file does not have is left out (the scenario fills it)."""
    values: dict[str, str] = {}
    for key, path in CONFIG_KEYS.items():
        found, value = _get(doc, path)
        if found:
            values[key] = _text(".".join(path), value)
    return values


# -- changing ------------------------------------------------------------------------------


def changed_values(doc: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, str | int]:
    """The fields of ``values`` whose value differs from what ``doc`` shows, as they are
    to be written (integers as integers); ValueError for a name that is not a field."""
    unknown = sorted(set(values) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"not config fields: {', '.join(unknown)}")
    changes: dict[str, str | int] = {}
    for key, value in values.items():
        path = CONFIG_KEYS[key]
        found, old = _get(doc, path)
        if found and _text(".".join(path), old) == value:
            continue
        if key in _INTEGER_KEYS:
            try:
                changes[key] = int(value)
            except ValueError:
                raise ConfigFileError(
                    f"{KIND}: {key}: expected an integer, got {value!r}"
                ) from None
        else:
            changes[key] = value
    return changes


def apply_values(doc: dict[str, Any], changes: Mapping[str, str | int]) -> None:
    """``changes`` written into ``doc`` in place, a missing (or null) map created."""
    for key, value in changes.items():
        path = CONFIG_KEYS[key]
        node = doc
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigFileError(f"{KIND}: {part}: expected a mapping, got {_kind(child)}")
            node = child
        node[path[-1]] = value


def update_config(doc: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``doc`` with ``values`` (by json_key) written where config.yaml keeps
    them; a value equal to the file's is left as the file has it, keys it does not name
    are kept, integers are written as integers."""
    new: dict[str, Any] = _copy(doc)
    apply_values(new, changed_values(new, values))
    return new


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# -- writing -------------------------------------------------------------------------------


def _ordered(doc: Mapping[str, Any], path: tuple[str, ...] = ()) -> dict[str, Any]:
    """``doc`` with zread's keys first, in zread's order, then the others as they came."""
    order = KEY_ORDER.get(path, ())
    keys = [k for k in order if k in doc] + [k for k in doc if k not in order]
    return {
        k: _ordered(doc[k], (*path, k)) if isinstance(doc[k], Mapping) else doc[k] for k in keys
    }


def encode_config(doc: Mapping[str, Any]) -> bytes:
    """config.yaml's bytes in zread's layout: its keys in its order (the others after),
    nested maps indented by 4 spaces, strings quoted only when they must be, with
    double quotes, non-ASCII raw, no line wrapping."""
    return dump(_ordered(doc)).encode()


def needs_quotes(value: str) -> bool:
    """Whether zread's writer would quote ``value`` (or write it other than plain)."""
    return encode_config({"k": value}) != f"k: {value}\n".encode()


_KINDS: Final = {
    "dict": "a mapping",
    "list": "a list",
    "str": "text",
    "int": "a number",
    "float": "a number",
    "bool": "true or false",
    "bytes": "binary data",
    "NoneType": "nothing",
    "date": "a date",
    "datetime": "a date and time",
    "set": "a set",
}


def _kind(value: object) -> str:
    """What a YAML value is, in the simulator's words, not Python's type names."""
    return _KINDS.get(type(value).__name__, "a value of another kind")
