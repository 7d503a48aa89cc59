"""Tests of simulator/formats/config_edit.py: config.yaml saved over a user's file,
changing only the values that changed."""

from __future__ import annotations

import pytest

from simulator.formats.bounds import BOM
from simulator.formats.config import (
    ConfigFileError,
    config_values,
    read_config,
)
from simulator.formats.config_edit import save_config
from tests.samples import USER, ZREAD_DEFAULT, billion_laughs, changed

# -- saving round-trip ---------------------------------------------------------------------


def test_changing_one_value_changes_only_that_value() -> None:
    new = save_config(USER.encode(), {"max_retries": "3"})
    assert new == changed(USER, "  max_retries: 0\n", "  max_retries: 3\n")
    assert b"&d" in new and b"*d" in new


def test_a_changed_string_keeps_its_quotes() -> None:
    assert save_config(USER.encode(), {"llm_model": "glm-6"}) == changed(
        USER, "model: 'glm-5'", "model: 'glm-6'"
    )
    assert save_config(USER.encode(), {"llm_provider": "zhipu"}) == changed(
        USER, 'provider: "z.ai"', 'provider: "zhipu"'
    )
    assert save_config(USER.encode(), {"llm_model": "it's"}) == changed(
        USER, "model: 'glm-5'", "model: 'it''s'"
    )


def test_a_plain_value_that_needs_quotes_gets_double_quotes() -> None:
    assert save_config(USER.encode(), {"language": "no"}) == changed(
        USER, "language: en\n", 'language: "no"\n'
    )
    assert save_config(USER.encode(), {"language": "a: b"}) == changed(
        USER, "language: en\n", 'language: "a: b"\n'
    )


def test_several_values_change_together() -> None:
    new = save_config(
        USER.encode(),
        {"language": "fr", "max_concurrent": "4", "llm_api_key": "sk-1", "max_retries": "0"},
    )
    expected = (
        USER.replace("language: en\n", "language: fr\n")
        .replace("max_concurrent: 2\n", "max_concurrent: 4\n")
        .replace('api_key: ""', 'api_key: "sk-1"')
    )
    assert new == expected.encode()


def test_nothing_different_returns_the_file_itself() -> None:
    old = USER.encode()
    same = {"max_retries": "0", "max_concurrent": "2", "language": "en", "llm_api_key": ""}
    assert save_config(old, same) is old
    assert save_config(old, {}) is old


@pytest.mark.parametrize("written", ["3", '"3"', "'3'"])
def test_an_integer_and_its_string_are_the_same_value(written: str) -> None:
    old = f"concurrency:\n    max_retries: {written}\n".encode()
    assert save_config(old, {"max_retries": "3"}) is old


def test_integers_are_written_as_integers() -> None:
    new = save_config(b"concurrency:\n    max_retries: 3.0\n", {"max_retries": "3"})
    assert new == b"concurrency:\n    max_retries: 3\n"
    new = save_config(b'concurrency:\n    max_retries: "1"\n', {"max_retries": "2"})
    assert read_config(new)["concurrency"]["max_retries"] == 2
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: max_retries: expected an integer"):
        save_config(USER.encode(), {"max_retries": "three"})


def test_a_missing_map_is_added_in_zreads_order_with_the_files_indentation() -> None:
    old = "language: en\nllm:\n  model: m  # mine\n\n# the rest is mine\nextra: 1\n"
    assert save_config(old.encode(), {"max_retries": "2"}) == (
        b"language: en\nllm:\n  model: m  # mine\nconcurrency:\n  max_retries: 2\n"
        b"\n# the rest is mine\nextra: 1\n"
    )


def test_a_missing_key_is_added_after_the_one_before_it_in_zreads_order() -> None:
    old = "language: en\n\n# the model\nllm:\n    model: m\n"
    assert save_config(old.encode(), {"doc_language": "de", "llm_provider": "p"}) == (
        b"language: en\ndoc_language: de\n\n# the model\nllm:\n    provider: p\n    model: m\n"
    )
    old = "llm:\n    model: m\n# the end\n"
    assert save_config(old.encode(), {"llm_api_key": "k"}) == (
        b"llm:\n    model: m\n    api_key: k\n# the end\n"
    )


def test_a_key_is_added_to_the_users_file_after_the_one_before_it() -> None:
    new = save_config(USER.encode(), {"doc_language": "de"})
    assert new == changed(USER, "language: en\n", "language: en\ndoc_language: de\n")


def test_a_null_map_is_filled_in_place() -> None:
    old = b"llm:   # settings\nlanguage: en\n"
    assert save_config(old, {"llm_model": "m"}) == (
        b"llm:   # settings\n    model: m\nlanguage: en\n"
    )


@pytest.mark.parametrize("old", [b"", b"# my config\n"])
def test_a_file_without_a_document_gets_the_values_appended(old: bytes) -> None:
    assert save_config(old, {"language": "de", "max_retries": "1"}) == old + (
        b"language: de\nconcurrency:\n    max_retries: 1\n"
    )


def test_the_files_line_ends_and_byte_order_mark_are_kept() -> None:
    old = b"language: en\nconcurrency:\n    max_retries: 1"
    assert save_config(old, {"max_retries": "2"}) == old.replace(b": 1", b": 2")
    old = b"language: en\r\n# mine\r\nconcurrency:\r\n    max_retries: 1\r\n"
    assert save_config(old, {"max_retries": "2"}) == old.replace(b": 1", b": 2")
    old = BOM + b"language: en\n"
    assert save_config(old, {"language": "de"}) == BOM + b"language: de\n"


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_line_keeps_its_end_and_added_lines_take_the_files(end: str) -> None:
    old = f"# top{end}language: en{end}llm:{end}    model: m{end}"
    new = save_config(old.encode(), {"llm_model": "n", "llm_api_key": "k", "max_retries": "3"})
    expected = (
        f"# top{end}language: en{end}llm:{end}    model: n{end}    api_key: k{end}"
        f"concurrency:{end}    max_retries: 3{end}"
    )
    assert new == expected.encode()


def test_a_file_of_mixed_line_ends_keeps_each_lines_own() -> None:
    old = b"# top\r\nlanguage: en\nllm:\r\n    model: m\r"
    assert save_config(old, {"llm_model": "n", "language": "de"}) == (
        b"# top\r\nlanguage: de\nllm:\r\n    model: n\r"
    )


def test_a_utf16_file_stays_utf16() -> None:
    old = "\ufeff# 设置\r\nlanguage: en\r\n".encode("utf-16-le")
    new = save_config(old, {"language": "de"})
    assert new == "\ufeff# 设置\r\nlanguage: de\r\n".encode("utf-16-le")


def test_lines_ruamel_would_normalize_are_kept_unless_changed() -> None:
    old = "language: ~\nflow: [ 1, 2 ]\nllm:\n    model:   m\n    api_key: Null\n"
    assert save_config(old.encode(), {"llm_model": "n"}) == changed(
        old, "    model:   m\n", "    model: n\n"
    )
    assert save_config(old.encode(), {"language": "de"}) == changed(
        old, "language: ~\n", "language: de\n"
    )


def test_a_folded_scalar_elsewhere_is_kept() -> None:
    old = "note: one\n  two\nblock: |\n  text\nllm:\n    model: m\n"
    assert save_config(old.encode(), {"llm_model": "n"}) == changed(old, "model: m", "model: n")


def test_a_value_reached_through_an_alias_changes_the_anchored_node() -> None:
    old = "base: &d\n    provider: z.ai\n    model: glm-5\nllm: *d\n"
    new = save_config(old.encode(), {"llm_model": "glm-6"})
    assert new == changed(old, "model: glm-5", "model: glm-6")
    assert config_values(read_config(new))["llm_model"] == "glm-6"


def test_a_key_written_twice_where_the_change_falls_is_refused_naming_it() -> None:
    # The last of two equal keys is the value; ruamel keeps the first, so no save
    # keeps both lines and reads back as intended.
    old = b"# mine\nlanguage: en\nlanguage: fr\nllm:\n    model: m\n"
    with pytest.raises(ConfigFileError) as refused:
        save_config(old, {"language": "de"})
    assert str(refused.value) == (
        "config.yaml: line 2 cannot be kept as it is written by a save "
        "(language is written twice, on lines 2 and 3); nothing was saved"
    )
    old = b"llm:\n  model: a\n# the key\nllm:\n  api_key: k\n"
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: line 4 .*llm is written twice"):
        save_config(old, {"llm_model": "x"})


def test_a_key_written_twice_elsewhere_is_kept_as_it_is() -> None:
    old = b"# mine\nlanguage: en\nlanguage: fr\nllm:\n    model: m\n"
    assert save_config(old, {"llm_model": "n"}) == old.replace(b"model: m", b"model: n")


@pytest.mark.parametrize(
    ("old", "line", "why"),
    [
        (b"# mine\nllm:\n    model: m\n    api_key:\tabc\n", 4, "found character '\\t'"),
        (b"language: en\t# a tab before the comment\nllm:\n  model: m\n", 1, "found character"),
        (b"a: 1\nllm: {model: m,\n  k: 2}\n", 3, "would write it otherwise"),
    ],
)
def test_a_file_the_round_trip_cannot_keep_is_refused_naming_the_line(
    old: bytes, line: int, why: str
) -> None:
    with pytest.raises(ConfigFileError) as refused:
        save_config(old, {"llm_model": "n"})
    message = str(refused.value)
    assert message.startswith(f"config.yaml: line {line} cannot be kept as it is written")
    assert why in message and message.endswith("; nothing was saved")
    assert "\n" not in message and "abc" not in message  # one line, no value echoed


def test_a_changed_anchored_value_keeps_its_anchor_and_its_aliases_their_value() -> None:
    old = "# top\nlanguage: &l en # the lang\n\n# doc\ndoc_language: *l   # mine\nx: [*l, *l]\n"
    assert save_config(old.encode(), {"language": "fr"}) == (
        b"# top\nlanguage: &l fr # the lang\n\n# doc\ndoc_language: en   # mine\nx: [en, en]\n"
    )
    old = "concurrency:\n    max_retries: &r 3   # r\n    max_concurrent: *r\n"
    new = save_config(old.encode(), {"max_retries": "5"})
    assert new == b"concurrency:\n    max_retries: &r 5   # r\n    max_concurrent: 3\n"


def test_a_value_changed_at_an_alias_leaves_the_anchor_and_its_comment_where_they_are() -> None:
    old = "language: &l en # the lang\ndoc_language: *l\nx: 1\n"
    assert save_config(old.encode(), {"doc_language": "fr"}) == changed(
        old, "doc_language: *l\n", "doc_language: fr\n"
    )
    old = "language: &l en # the lang\ndoc_language: *l  # mine\nx: 1\n"
    assert save_config(old.encode(), {"doc_language": "fr", "language": "de"}) == (
        b"language: &l de # the lang\ndoc_language: fr  # mine\nx: 1\n"
    )


def test_an_alias_of_a_changed_value_over_several_lines_is_refused() -> None:
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: line 3 .*several lines"):
        save_config(b"language: &l |\n  en\ndoc_language: *l\n", {"language": "fr"})


def test_a_save_is_bounded_and_refuses_what_is_not_a_config() -> None:
    with pytest.raises(ConfigFileError, match="aliases expand to more than"):
        save_config(billion_laughs(), {"language": "de"})
    with pytest.raises(ConfigFileError, match="recursive aliases"):
        save_config(b"a: &a [*a]\n", {"language": "de"})
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: expected a mapping, got a list$"):
        save_config(b"- a\n", {"language": "de"})
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: llm: expected a mapping, got a lis"):
        save_config(b"llm: [a]\n", {"llm_model": "m"})
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: concurrency: expected a mapping"):
        save_config(b"concurrency: 3\n", {"max_retries": "1"})
    with pytest.raises(ValueError, match="not config fields: colour"):
        save_config(b"language: en\n", {"colour": "red"})


def test_with_no_file_zreads_defaults_are_written_with_the_values() -> None:
    assert save_config(None, {}) == ZREAD_DEFAULT
    assert save_config(None, {"max_retries": "3", "llm_api_key": "sk-1"}) == (
        ZREAD_DEFAULT.replace(b"max_retries: 0", b"max_retries: 3").replace(
            b'api_key: ""', b"api_key: sk-1"
        )
    )


def test_a_saved_file_reads_back_with_the_values() -> None:
    values = {
        "language": "yes",
        "doc_language": "中文",
        "max_concurrent": "8",
        "max_retries": "5",
        "llm_provider": "#hash",
        "llm_base_url": "https://x.example/v1",
        "llm_model": "- dash",
        "llm_api_key": "line\nbreak",
    }
    for old in (None, USER.encode(), ZREAD_DEFAULT, b"", b"extra: 1\n"):
        assert config_values(read_config(save_config(old, values))) == values
