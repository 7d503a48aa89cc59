"""SplicedList: its JSON is always that of its items, however they were edited."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.eventbytes import encode_part
from simulator.core.spliced import SplicedList


class Item(msgspec.Struct):
    n: int
    text: str = ""


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 12),
    st.lists(st.lists(st.tuples(st.integers(0, 11), st.text(max_size=6)), max_size=5), max_size=6),
)
def test_the_fragment_is_the_items_json_after_any_edits(
    count: int, rounds: list[list[tuple[int, str]]]
) -> None:
    items = SplicedList([Item(i, "<&>\u2028") for i in range(count)])
    assert items.json_fragment() == encode_part(list(items))
    for edits in rounds:
        for index, text in edits:
            if index < count:
                items.edit(index).text = text
        assert items.json_fragment() == encode_part(list(items))


def test_edit_past_the_end_marks_nothing() -> None:
    items = SplicedList([Item(0)])
    first = items.json_fragment()
    with pytest.raises(IndexError):
        items.edit(1)
    assert items.json_fragment() is first
    assert len(items) == 1 and items[0].n == 0
