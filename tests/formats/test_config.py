"""Tests of simulator/formats/config.py: config.yaml read bounded, written in zread's
layout. (Saving over a user's file: test_config_edit.py.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.formats import yamlv3
from simulator.formats.bounds import BOM, LIMITS, FormatError
from simulator.formats.config import (
    CONFIG_KEYS,
    ConfigFileError,
    config_values,
    default_config,
    encode_config,
    read_config,
    update_config,
)
from simulator.formats.yamlv3 import DEFAULT_INDENT, MAX_ALIAS_NODES, load
from tests.samples import USER, ZREAD_DEFAULT, billion_laughs

REPOSITORY = Path(__file__).resolve().parents[2]


def refused(data: bytes) -> tuple[str, float]:
    """The message :func:`read_config` refuses ``data`` with, and the seconds it took."""
    start = time.monotonic()
    with pytest.raises(ConfigFileError) as caught:
        read_config(data)
    return str(caught.value), time.monotonic() - start


# -- decoding ------------------------------------------------------------------------------


def test_zreads_file_reads_as_its_defaults() -> None:
    doc = read_config(ZREAD_DEFAULT)
    assert doc == default_config()
    assert config_values(doc) == {
        "language": "zh",
        "doc_language": "zh",
        "max_concurrent": "1",
        "max_retries": "0",
        "llm_provider": "z.ai",
        "llm_base_url": "https://open.bigmodel.cn/api/paas/v4",
        "llm_model": "glm-5",
        "llm_api_key": "",
    }
    assert list(config_values(doc)) == list(CONFIG_KEYS)


def test_the_users_file_reads_with_its_alias_and_unknown_keys() -> None:
    doc = read_config(USER.encode())
    assert doc["profiles"]["main"] == {"timeout": 30, "hosts": ["a", "b"]}
    assert doc["zz_unknown"] == "yes"
    assert config_values(doc)["llm_model"] == "glm-5"
    assert config_values(doc)["max_concurrent"] == "2"


def test_only_true_and_false_are_booleans() -> None:
    doc = read_config(
        b"language: no\ndoc_language: yes\nllm:\n    provider: on\n    model: off\n"
        b"    api_key: true\n    base_url: False\n"
    )
    assert doc["language"] == "no"
    assert doc["doc_language"] == "yes"
    assert doc["llm"]["provider"] == "on"
    assert doc["llm"]["model"] == "off"
    assert doc["llm"]["api_key"] is True
    assert doc["llm"]["base_url"] is False
    values = config_values(doc)
    assert (values["language"], values["llm_api_key"], values["llm_base_url"]) == (
        "no",
        "true",
        "false",
    )


def test_a_missing_field_is_left_out_and_null_is_empty() -> None:
    values = config_values(read_config(b"llm:\n    api_key:\n"))
    assert values == {"llm_api_key": ""}


@pytest.mark.parametrize("data", [b"", b"\n", b"# only a comment\n", b"---\n", BOM])
def test_an_empty_file_is_an_empty_mapping(data: bytes) -> None:
    assert read_config(data) == {}


def test_a_byte_order_mark_is_allowed() -> None:
    assert read_config(BOM + b"language: en\n") == {"language": "en"}


@pytest.mark.parametrize(
    ("data", "kind"),
    [(b"- zh\n- en\n", "a list"), (b"just words\n", "text"), (b"42\n", "a number")],
)
def test_a_document_that_is_not_a_mapping_is_refused(data: bytes, kind: str) -> None:
    message, _ = refused(data)
    assert message == f"config.yaml: expected a mapping, got {kind}"


def test_a_value_that_is_not_a_scalar_is_refused_by_name() -> None:
    doc = read_config(b"llm:\n    model: [a, b]\n")
    with pytest.raises(ConfigFileError, match=r"^config\.yaml: llm\.model: expected a value"):
        config_values(doc)


def test_the_error_is_a_format_error_and_a_value_error() -> None:
    assert issubclass(ConfigFileError, FormatError)
    assert issubclass(ConfigFileError, ValueError)


# -- bounds (yamlv3's, tested there) ------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"language: zh\n" + b"#" * (300 << 10) + b"\n",
        b"a: " + b"[" * 900 + b"]" * 900 + b"\n",
        b"a: &a [*a]\n",
        billion_laughs(),
        b"language: [zh\n",
    ],
    ids=["large", "deep", "recursive", "billion laughs", "not yaml"],
)
def test_a_file_past_a_bound_is_a_config_file_error_in_yamlv3s_words(data: bytes) -> None:
    with pytest.raises(FormatError) as read:
        load(data, "config.yaml")
    message, seconds = refused(data)
    assert message == str(read.value)
    assert message.startswith("config.yaml: ") and "\n" not in message
    assert seconds < 5  # a generous bound: a hang or an expansion would take far longer


def test_the_billion_laughs_is_small_and_the_size_limit_is_the_shared_one() -> None:
    assert len(billion_laughs()) < 512
    limit = LIMITS["config.yaml"]
    assert read_config(b"a: 1\n" + b"#" * (limit - 6) + b"\n") == {"a": 1}
    with pytest.raises(ConfigFileError, match="larger than 64 KiB"):
        read_config(b"a: 1\n" + b"#" * (limit - 5) + b"\n")


def test_the_bounds_are_yamlv3s() -> None:
    assert MAX_ALIAS_NODES is yamlv3.MAX_ALIAS_NODES
    assert DEFAULT_INDENT is yamlv3.DEFAULT_INDENT == 4


# -- encoding ------------------------------------------------------------------------------


def test_the_defaults_are_written_as_zread_writes_them() -> None:
    assert encode_config(default_config()) == ZREAD_DEFAULT


def test_zreads_keys_go_first_in_its_order_and_others_are_kept_after() -> None:
    doc = {
        "extra": {"b": 1, "a": [1, 2]},
        "concurrency": {"max_retries": 2, "max_concurrent": 3},
        "language": "en",
        "llm": {"base_url": "u", "model": "m"},
    }
    assert encode_config(doc) == (
        b"language: en\nllm:\n    model: m\n    base_url: u\nconcurrency:\n"
        b"    max_concurrent: 3\n    max_retries: 2\nextra:\n    b: 1\n    a:\n"
        b"        - 1\n        - 2\n"
    )


def test_strings_are_quoted_only_when_needed_with_double_quotes() -> None:
    url = "https://example.com/" + "x" * 200
    doc = {"language": "no", "doc_language": "中文", "llm": {"api_key": "", "base_url": url}}
    assert (
        encode_config(doc)
        == (
            f'language: "no"\ndoc_language: 中文\nllm:\n    api_key: ""\n    base_url: {url}\n'
        ).encode()
    )
    assert read_config(encode_config(doc)) == doc


def test_update_config_builds_a_new_document() -> None:
    doc = read_config(b"language: en\nllm:\n    model: m\n")
    new = update_config(doc, {"max_retries": "3", "language": "en", "llm_model": "n"})
    assert new == {"language": "en", "llm": {"model": "n"}, "concurrency": {"max_retries": 3}}
    assert doc["llm"]["model"] == "m"  # a copy
    with pytest.raises(ValueError, match="not config fields: colour"):
        update_config(doc, {"colour": "red"})


# -- start-up ------------------------------------------------------------------------------


def test_importing_the_modules_imports_neither_ruamel_nor_pyyaml() -> None:
    code = (
        "import simulator.formats.config, simulator.formats.config_edit, sys; "
        "print('ruamel' in ' '.join(sys.modules), 'yaml' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.split() == ["False", "False"]
