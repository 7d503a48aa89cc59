"""``zread config --stdio``: edit the nine config fields, then save or quit.

Owns: the config vm (nine fields in the reference's order, index 2 read-only), the
validation of ``update_fields`` (all or nothing), ``reload_llm`` and ``save``.

There is no state machine in zread's config; the chart has one editing state, shown
as ``editing`` in error texts, and one terminal state after ``save``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

from simulator.core.command import Answer
from simulator.core.driver import Driver, InvalidParams
from simulator.core.effects import SaveConfig

if TYPE_CHECKING:
    from collections.abc import Mapping

    from transitions import EventData


SUMMARY = "Edit zread's configuration"
HELP = """Edit zread's configuration: languages, concurrency and the LLM provider,
kept in ~/.zread/config.yaml."""
ABOUT = (
    "Edits zread's configuration: `update_fields` and `reload_llm` change it "
    "in place, `save` writes it and ends the session."
)


ANSWERS = frozenset({"update_fields"})
"""The gates :func:`answer` answers: it is asked only when an event offers one."""


def answer(waiting: list[str], vm: Mapping[str, Any], memory: dict[str, Any]) -> Answer:
    """A sensible client: change one field, then save."""
    if "update_fields" not in waiting:
        return None
    if memory.get("edited"):
        return ("save", {})
    memory["edited"] = True
    return ("update_fields", {"fields": {"language": "de"}})


FIELDS: tuple[tuple[str, str], ...] = (
    ("config.language", "language"),
    ("config.doc_language", "doc_language"),
    ("config.llm", ""),
    ("config.max_concurrent", "max_concurrent"),
    ("config.max_retries", "max_retries"),
    ("config.llm_provider", "llm_provider"),
    ("config.llm_base_url", "llm_base_url"),
    ("config.llm_model", "llm_model"),
    ("config.llm_api_key", "llm_api_key"),
)
"""(title_key, json_key) of each field, in order; an empty json_key is read-only."""

_INTEGER = re.compile(r"[+-]?[0-9]+")
_RANGES = {"max_concurrent": (1, 64), "max_retries": (0, 10)}
_LLM_KEYS = ("llm_provider", "llm_base_url", "llm_model", "llm_api_key")


class Field(msgspec.Struct):
    title_key: str
    json_key: str
    initial: str
    value: str


class ConfigVM(msgspec.Struct):
    fields: list[Field] = msgspec.field(default_factory=list)
    dirty: bool = False
    saved: bool = False
    error: str = ""


class UpdateFields(msgspec.Struct):
    fields: dict[str, str]


def _integer(value: str) -> int | None:
    """``value`` as an integer; None when it is not one, or has more than 18 digits
    after its leading zeros (out of every range, and ``int`` refuses more than 4300)."""
    if not _INTEGER.fullmatch(value):
        return None
    digits = value.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 18:
        return None
    return -int(digits) if value[0] == "-" else int(digits)


def _check_value(key: str, value: str) -> None:
    bounds = _RANGES.get(key)
    if bounds is None:
        return
    low, high = bounds
    number = _integer(value)
    if number is None or not low <= number <= high:
        raise InvalidParams(f"{key} must be an integer {low}-{high}, got {value!r}")


class ConfigModel(Driver):
    vm_type = ConfigVM
    vm: ConfigVM

    def load(self, _: EventData) -> None:
        settings = self.rt.scenario.world.config
        for title_key, json_key in FIELDS:
            if json_key:
                value = str(getattr(settings, json_key))
            else:
                value = f"{settings.llm_provider} / {settings.llm_model}"
            self.vm.fields.append(Field(title_key, json_key, value, value))

    def field_examples(self) -> list[dict[str, Any]]:
        """The first editable field, set to the value it has."""
        editable = [f for f in self.vm.fields if f.json_key]
        return [{"fields": {f.json_key: f.value}} for f in editable[:1]]

    def check_update(self, params: UpdateFields) -> None:
        editable = {f.json_key for f in self.vm.fields if f.json_key}
        for key, value in params.fields.items():
            if key not in editable:
                reason = "is read-only" if key == "" else "is not a config field"
                raise InvalidParams(f"field {key!r} {reason}")
            _check_value(key, value)

    def apply_update(self, event: EventData) -> None:
        changes: dict[str, str] = {
            key: str(_integer(value)) if key in _RANGES else value  # "+4", "04": shown as 4
            for key, value in event.kwargs["params"].fields.items()
        }
        for field in self.vm.fields:
            if field.json_key in changes:
                field.value = changes[field.json_key]
        self.vm.dirty = any(f.value != f.initial for f in self.vm.fields)

    def reload_llm(self, _: EventData) -> None:
        values = {f.json_key: f.value for f in self.vm.fields}
        empty = [key for key in _LLM_KEYS if not values[key].strip()]
        self.vm.error = f"LLM settings incomplete: {', '.join(empty)} empty" if empty else ""

    def save(self, _: EventData) -> None:
        editable = [f for f in self.vm.fields if f.json_key]
        self.rt.effect(
            SaveConfig(
                {f.json_key: f.value for f in editable},
                initial={f.json_key: f.initial for f in editable},
            )
        )
        self.vm.saved = True


CHART = {
    "name": "config",
    "writes": "home",  # on save: HOME is checked writable before the first event
    "model": "ConfigModel",
    "failures": [],
    "initial": "starting",
    "states": [
        {"name": "starting"},
        {
            "name": "editing",
            "waiting_for": ["update_fields", "save", "reload_llm", "quit"],
        },
        {"name": "saved", "vm_state": "editing", "terminal": True},
    ],
    "transitions": [
        {"trigger": "_start", "source": "starting", "dest": "editing", "before": "load"},
        {"trigger": "update_fields", "source": "editing", "dest": None, "after": "apply_update"},
        {"trigger": "reload_llm", "source": "editing", "dest": None, "after": "reload_llm"},
        {"trigger": "save", "source": "editing", "dest": "saved", "before": "save"},
    ],
    "commands": {
        "update_fields": {
            "params": "UpdateFields",
            "check": "check_update",
            "examples": "field_examples",
        },
        "reload_llm": {},
        "save": {},
    },
}
