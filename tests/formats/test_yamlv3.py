"""Tests of simulator/formats/yamlv3.py: YAML read bounded and written as Go's yaml.v3
does, errors in the simulator's words naming the file's kind."""

from __future__ import annotations

import time

import pytest

from simulator.formats.bounds import BOM, MAX_NESTING, FormatError
from simulator.formats.yamlv3 import MAX_ALIAS_NODES, dump, load
from tests.samples import billion_laughs

KIND = "config.yaml"


def load_config(data: bytes) -> object:
    return load(data, KIND)


def refused(data: bytes) -> tuple[str, float]:
    """The message :func:`load` refuses ``data`` with, and the seconds it took."""
    start = time.monotonic()
    with pytest.raises(FormatError) as caught:
        load(data, KIND)
    return str(caught.value), time.monotonic() - start


# -- reading -------------------------------------------------------------------------------


def test_only_true_and_false_are_booleans() -> None:
    doc = load(b"a: no\nb: yes\nc: on\nd: off\ne: true\nf: False\ng: TRUE\nh: y\n", KIND)
    assert doc == {
        "a": "no",
        "b": "yes",
        "c": "on",
        "d": "off",
        "e": True,
        "f": False,
        "g": True,
        "h": "y",
    }


@pytest.mark.parametrize("data", [b"", b"\n", b"# only a comment\n", b"---\n", BOM])
def test_an_empty_document_is_none(data: bytes) -> None:
    assert load(data, KIND) is None


def test_what_is_not_a_map_is_read_as_it_is() -> None:
    assert load(b"- zh\n- 1\n", KIND) == ["zh", 1]
    assert load(BOM + b"just words\n", KIND) == "just words"


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"language: [zh\n", "line 2, column 1"),
        (b"language: zh: en\n", "line 1, column 13"),
        (b"a: 1\n---\nb: 2\n", "line 2, column 1"),
        (b"language: *nothing\n", "line 1, column 11"),
        (b"language: \xff\n", "at byte 10"),
        (b"language: !!python/object:os.system x\n", "line 1, column 11"),
        (b"\tlanguage: zh\n", "line 1, column 1"),
    ],
)
def test_invalid_yaml_is_one_line_naming_the_file_and_the_place(data: bytes, where: str) -> None:
    message, _ = refused(data)
    assert message.startswith(f"config.yaml: not valid YAML: {where}: ")
    assert "\n" not in message
    assert "<byte string>" not in message


def test_a_number_past_what_python_reads_is_refused_by_name() -> None:
    message, _ = refused(b"a: " + b"9" * 5000 + b"\n")
    assert message == "config.yaml: a number has too many digits to read"


# -- bounds --------------------------------------------------------------------------------


def _block_nesting(depth: int) -> bytes:
    """``depth`` block maps, one inside the other."""
    return "".join(f"{'  ' * level}k{level}:\n" for level in range(depth - 1)).encode() + (
        f"{'  ' * (depth - 1)}leaf: 1\n".encode()
    )


DEEP = f"nested deeper than {MAX_NESTING} levels, the limit for config.yaml"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            b"language: zh\n" + b"#" * (300 << 10) + b"\n",
            "config.yaml: larger than 64 KiB, the limit for config.yaml",
            id="300 KiB",
        ),
        pytest.param(b"a: " + b"[" * 900 + b"]" * 900 + b"\n", DEEP, id="flow 900 deep"),
        pytest.param(b"a: " + b"{b: " * 900 + b"1" + b"}" * 900 + b"\n", DEEP, id="flow maps"),
        pytest.param(_block_nesting(MAX_NESTING + 1), DEEP, id="block 33 deep"),
        pytest.param(_block_nesting(150), DEEP, id="block 150 deep"),
        pytest.param(
            b"a: &a " + b"[" * 30 + b"x" + b"]" * 30 + b"\nb: [[[*a]]]\n",
            DEEP,
            id="deep once aliases are expanded",
        ),
        pytest.param(
            b"a: &a [*a]\n",
            "alias *a is inside the node it names: recursive aliases are not allowed",
            id="recursive list",
        ),
        pytest.param(
            b"a: &a\n    b: *a\n",
            "alias *a is inside the node it names: recursive aliases are not allowed",
            id="recursive map",
        ),
        pytest.param(
            billion_laughs(),
            f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes, the limit for config.yaml",
            id="billion laughs",
        ),
    ],
)
def test_past_a_bound_is_refused_quickly_naming_the_limit(data: bytes, expected: str) -> None:
    message, seconds = refused(data)
    assert message.startswith("config.yaml: ")
    assert message.endswith(expected)
    assert "\n" not in message
    assert seconds < 5  # a generous bound: a hang or an expansion would take far longer


def test_nesting_to_the_limit_and_aliases_within_it_are_read() -> None:
    assert load_config(_block_nesting(MAX_NESTING))["k0"]["k1"]["k2"] is not None
    doc = load_config(b"a: &a [1, 2]\nb: [*a, *a]\nc: {x: *a}\n")
    assert doc["b"] == [[1, 2], [1, 2]]
    assert doc["c"] == {"x": [1, 2]}


def test_aliases_are_counted_expanded_up_to_the_limit() -> None:
    ten = ", ".join(["1"] * 9)
    # Each alias of a names its 10 nodes; the 1,000th alias reaches 10,000 nodes, not more.
    at_limit = f"a: &a [{ten}]\nb: [{', '.join(['*a'] * 1000)}]\n".encode()
    assert len(load_config(at_limit)["b"]) == 1000
    past = f"a: &a [{ten}]\nb: [{', '.join(['*a'] * 1001)}]\n".encode()
    with pytest.raises(FormatError, match="aliases expand to more than 10,000 nodes"):
        load_config(past)


# -- writing -------------------------------------------------------------------------------


def test_dump_writes_as_yaml_v3_writes() -> None:
    doc = {"z": "no", "a": {"list": [1, "x y"], "empty": "", "cn": "中文"}, "b": None, "t": True}
    assert dump(doc) == (
        'z: "no"\na:\n    list:\n        - 1\n        - x y\n    empty: ""\n    cn: 中文\n'
        "b: null\nt: true\n"
    )
    long = "word " * 100
    assert dump({"k": long.strip()}) == f"k: {long.strip()}\n"
    assert load(dump(doc).encode(), KIND) == doc
