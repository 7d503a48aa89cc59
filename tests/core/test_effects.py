"""Tests for simulator.core.effects: effects are plain frozen values.

What they must be for the rest to work: immutable (a session hands the same value to a
host and keeps it in its journal), equal by value (tests and hosts compare them),
cheap (slots), and the persisted ones named in one tuple the hosts dispatch on.
"""

from __future__ import annotations

import inspect

import msgspec
import pytest

from simulator.core import effects
from simulator.core.effects import (
    PERSISTED,
    AskApproval,
    CancelApproval,
    CatalogReady,
    DraftLeft,
    PageWritten,
    SaveConfig,
    SaveLogin,
    ServerStarted,
    StartServer,
    StopServer,
    WikiGenerated,
)

EXAMPLES: list[object] = [
    SaveConfig({"language": "fr"}, initial={"language": "en"}),
    SaveLogin("ada", "global", "glm-4.6"),
    CatalogReady(pages=(), language="en"),
    PageWritten(page_id=3),
    WikiGenerated(pages_done=15, pages_total=16),
    DraftLeft(done=4),
    StartServer(site={"pages": []}),
    StopServer(),
    ServerStarted(url="http://127.0.0.1:8080/"),
    AskApproval(url="https://example.invalid/auth", timeout_ns=5_000_000_000),
    CancelApproval(),
]


def effect_types() -> list[type]:
    return [
        value
        for name, value in vars(effects).items()
        if inspect.isclass(value) and value.__module__ == effects.__name__
    ]


def test_every_effect_type_has_an_example_and_the_persisted_ones_are_listed() -> None:
    assert {type(example) for example in EXAMPLES} == set(effect_types())
    assert set(effects.PERSISTED) < set(effect_types())


@pytest.mark.parametrize("effect", EXAMPLES, ids=lambda e: type(e).__name__)
def test_an_effect_is_frozen(effect: msgspec.Struct) -> None:
    assert isinstance(effect, msgspec.Struct)
    for name in effect.__struct_fields__:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(effect, name, None)
    assert not hasattr(effect, "__dict__")  # slots: small, and no stray attributes


@pytest.mark.parametrize("effect", EXAMPLES, ids=lambda e: type(e).__name__)
def test_an_effect_equals_a_copy_of_itself_and_no_other(effect: msgspec.Struct) -> None:
    copy = type(effect)(*(getattr(effect, name) for name in effect.__struct_fields__))
    assert copy == effect and copy is not effect
    assert all(effect != other for other in EXAMPLES if other is not effect)


def test_values_decide_equality() -> None:
    assert DraftLeft(3) == DraftLeft(done=3) != DraftLeft(4)
    assert SaveLogin("ada", "cn", "m") != SaveLogin("ada", "global", "m")
    assert WikiGenerated(1, 2) != WikiGenerated(2, 2)
    assert StopServer() == StopServer() and CancelApproval() == CancelApproval()
    stop: object = StopServer()
    assert stop != CancelApproval()  # two types with no fields are still not equal


def test_effects_without_a_dict_field_can_be_kept_in_sets() -> None:
    assert len({DraftLeft(1), DraftLeft(1), DraftLeft(2), StopServer(), StopServer()}) == 3
    assert hash(SaveLogin("ada", "cn", "m")) == hash(SaveLogin("ada", "cn", "m"))


def test_defaults() -> None:
    saved = SaveConfig({"language": "fr"})
    assert saved.initial == {}
    assert saved.initial is not SaveConfig({}).initial  # each gets a dict of its own
    assert ServerStarted() == ServerStarted(url="", error="")
    assert ServerStarted(error="port in use").url == ""


def test_persisted_names_what_a_home_keeps() -> None:
    assert (SaveConfig, SaveLogin, CatalogReady, PageWritten, WikiGenerated, DraftLeft) == PERSISTED
    kept = [example for example in EXAMPLES if isinstance(example, PERSISTED)]
    assert [type(example) for example in kept] == list(PERSISTED)
    # Serving and asking the control peer are the process's business, never persisted.
    persisted: tuple[type, ...] = PERSISTED
    for transient in (StartServer, StopServer, ServerStarted, AskApproval, CancelApproval):
        assert transient not in persisted
