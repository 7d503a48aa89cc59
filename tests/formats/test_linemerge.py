"""Tests of simulator/formats/linemerge.py: a tool's changed lines applied to a person's
text, where they can be placed, and nowhere else."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.formats.linemerge import first_touched, join_ends, merge, opcodes, split_ends

OURS = "# my settings\nllm:\n  model:   gpt  # fast\n  key: ~\nlanguage: en\n\n# end\n"
BASE = "llm:\n  model: gpt # fast\n  key:\nlanguage: en\n"


def test_a_changed_line_replaces_the_persons_line_and_nothing_else_moves() -> None:
    theirs = BASE.replace("language: en", "language: de")
    assert merge(OURS, BASE, theirs) == OURS.replace("language: en", "language: de")


def test_a_line_the_tool_normalized_is_kept_unless_it_is_the_one_changed() -> None:
    # "model:   gpt" and "key: ~" are the tool's "model: gpt" and "key:", line for line.
    theirs = BASE.replace("model: gpt # fast", "model: o3 # fast")
    merged = merge(OURS, BASE, theirs)
    assert merged == OURS.replace("  model:   gpt  # fast", "  model: o3 # fast")
    assert "  key: ~\n" in (merged or "")


def test_added_lines_go_after_the_line_they_follow() -> None:
    theirs = BASE.replace("  key:\n", "  key:\n  base_url: x\n")
    assert merge(OURS, BASE, theirs) == OURS.replace("  key: ~\n", "  key: ~\n  base_url: x\n")
    at_the_top = "top: 1\n" + BASE
    assert merge(OURS, BASE, at_the_top) == OURS.replace("llm:\n", "top: 1\nllm:\n", 1)
    assert merge("a\n", "a\n", "a\nb\n") == "a\nb\n"


def test_removed_lines_are_removed() -> None:
    theirs = BASE.replace("  key:\n", "")
    assert merge(OURS, BASE, theirs) == OURS.replace("  key: ~\n", "")


def test_nothing_changed_is_the_persons_text() -> None:
    assert merge(OURS, BASE, BASE) == OURS
    assert merge("", "", "") == ""


def test_a_change_with_no_place_in_the_persons_text_is_none() -> None:
    # The person's text has a line the tool's rendering does not: a changed line of the
    # rendering that the person's text does not have line for line cannot be placed.
    ours = "a: 1\nb: >\n  folded\n  text\nc: 3\n"
    base = "a: 1\nb: folded text\nc: 3\n"
    assert merge(ours, base, base.replace("folded text", "new")) is None
    assert merge("x\ny\n", "p\nq\nr\n", "p\nQ\nr\n") is None


LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n"]), max_size=12)


@given(a=LINES, b=LINES)
def test_the_opcodes_turn_one_list_into_the_other_as_difflibs_do(
    a: list[str], b: list[str]
) -> None:
    codes = opcodes(a, b)
    rebuilt: list[str] = []
    position = 0
    for tag, i1, i2, j1, j2 in codes:
        assert tag in {"equal", "replace", "delete", "insert"}
        assert i1 == position  # contiguous, in order
        position = i2
        rebuilt += a[i1:i2] if tag == "equal" else b[j1:j2]
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
    assert position == len(a) and rebuilt == b
    if not a or not b or (a[0] != b[0] and a[-1] != b[-1]):
        assert codes == difflib.SequenceMatcher(None, a, b).get_opcodes()


def test_first_touched_names_the_first_line_changed_outside_the_free_ones() -> None:
    ours = "a\nb\nc\n"
    assert first_touched(ours, "a\nB\nc\n", {1}, may_add=False) is None
    assert first_touched(ours, "a\nB\nC\n", {1}, may_add=False) == 2
    assert first_touched(ours, "a\nc\n", set(), may_add=False) == 1  # removed
    assert first_touched(ours, "a\nx\nb\nc\n", set(), may_add=True) is None
    assert first_touched(ours, "a\nx\nb\nc\n", set(), may_add=False) == 1


@pytest.mark.parametrize("text", ["a\nb\n", "a\r\nb\r\n", "a\rb\r", "a\r\nb\nc\r", "a\nb", "", "x"])
def test_line_ends_split_and_join_back_to_the_same_text(text: str) -> None:
    ours, ends, whole = split_ends(text)
    assert "\r" not in ours and (not ours or ours.endswith("\n"))
    assert len(ends) == ours.count("\n")
    assert join_ends(ours, ends, whole, ours) == text


def test_lines_changed_or_added_take_the_ends_around_them() -> None:
    ours, ends, whole = split_ends("a\rb\r\nc\n")
    assert join_ends(ours, ends, whole, "a\nB\nnew\nc\n") == "a\rB\r\nnew\r\nc\n"
    assert join_ends(ours, ends, whole, "top\na\nb\nc\n") == "top\ra\rb\r\nc\n"
    ours, ends, whole = split_ends("a\r\nb")
    assert join_ends(ours, ends, whole, "a\nb\nc\n") == "a\r\nb\r\nc"
