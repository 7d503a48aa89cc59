"""Tests of simulator/formats/config_keep.py: the lines a config.yaml save may change,
its line ends and encoding, and the one-line refusal."""

from __future__ import annotations

import codecs

import pytest

from simulator.formats.config import ConfigFileError
from simulator.formats.config_keep import Kept, refused


def test_only_the_changed_values_lines_are_free() -> None:
    kept = Kept(b"# top\nlanguage: en\nllm:\n    model: m\n", [("llm", "model")])
    assert kept.free == {3} and not kept.may_add and kept.anchors == {}
    assert kept.check("# top\nlanguage: en\nllm:\n    model: n\n") == (
        b"# top\nlanguage: en\nllm:\n    model: n\n"
    )
    assert kept.check("# top\nlanguage: de\nllm:\n    model: n\n") == (
        1,
        "the round trip would write it otherwise",
    )
    assert kept.check("# top\nlanguage: en\nllm:\n    model: n\n    k: 1\n")[0] == 3


def test_a_missing_key_may_be_added() -> None:
    kept = Kept(b"language: en\r\n", [("llm", "model")])
    assert kept.may_add
    assert kept.check("language: en\nllm:\n    model: n\n") == (
        b"language: en\r\nllm:\r\n    model: n\r\n"
    )


def test_the_aliases_of_a_changed_anchored_value_are_written_out() -> None:
    kept = Kept(b"a: &x 'v'\nlanguage: &l en\nb: [*l, *x]\nc: *l\n", [("language",)])
    assert kept.anchors == {("language",): "l"}
    assert kept.text == "a: &x 'v'\nlanguage: &l en\nb: [en, *x]\nc: en\n"
    assert kept.free == {1, 2, 3}


def test_a_changed_alias_is_written_out_on_its_own_line() -> None:
    kept = Kept(b"language: &l en\ndoc_language: *l  # mine\n", [("doc_language",)])
    assert kept.anchors == {}
    assert kept.text == "language: &l en\ndoc_language: en  # mine\n"
    assert kept.free == {1}


def test_encodings_and_byte_order_marks_are_kept() -> None:
    old = codecs.BOM_UTF16_BE + "language: en\n".encode("utf-16-be")
    kept = Kept(old, [("language",)])
    assert kept.check("language: de\n") == codecs.BOM_UTF16_BE + "language: de\n".encode(
        "utf-16-be"
    )


def test_a_key_written_twice_is_named_when_a_save_would_read_back_otherwise() -> None:
    kept = Kept(b"language: en\nx: 1\nlanguage: fr\n", [("language",)])
    assert kept.misread("language: en\nx: 1\nlanguage: de\n") == (
        2,
        "language is written twice, on lines 1 and 3",
    )


def test_a_refusal_is_one_line_naming_the_line() -> None:
    error = refused(4, "why")
    assert isinstance(error, ConfigFileError)
    assert str(error) == (
        "config.yaml: line 5 cannot be kept as it is written by a save (why); nothing was saved"
    )
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: line 2 .*other than"):
        Kept("a: 1\nb: 2\u2028\n".encode(), [("a",)])
