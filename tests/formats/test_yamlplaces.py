"""Tests of simulator/formats/yamlplaces.py: where each key, anchor and alias of a YAML
text is written."""

from __future__ import annotations

from simulator.formats.yamlplaces import places

TEXT = """\
# top
language: &l en   # the lang
doc_language: *l
language: fr
base: &d
  model: m
  hosts: [*l, b]
llm: *d
nul: ~
block: |
  a
  b
z: 1
"""


def test_each_time_a_key_is_written_is_a_place_the_last_in_force() -> None:
    found = places(TEXT)
    assert found is not None
    written = found.written[("language",)]
    assert [(p.key_line, p.kind) for p in written] == [(1, "scalar"), (3, "scalar")]
    assert found.last(("language",)) is written[-1]
    assert found.twice == {3: ("language", 1)}
    assert found.last(("missing",)) is None


def test_an_anchored_scalar_has_its_text_and_the_aliases_naming_it() -> None:
    found = places(TEXT)
    assert found is not None
    scalar = found.written[("language",)][0].scalar
    assert scalar is not None and scalar.anchor == "l" and scalar.text == "en"
    assert found.aliases_of(scalar) == [(2, 14, 16), (6, 10, 12)]
    alias = found.last(("doc_language",))
    assert alias is not None and alias.kind == "alias" and alias.named == (scalar, 14, 16)


def test_a_path_through_an_alias_of_a_map_is_where_the_map_is_written() -> None:
    found = places(TEXT)
    assert found is not None
    assert found.resolve(("llm", "model")) == ("base", "model")
    assert found.lines(("llm", "model")) == {5}


def test_the_lines_a_new_value_may_change() -> None:
    found = places(TEXT)
    assert found is not None
    assert found.lines(("language",)) == {3}  # the one in force
    assert found.lines(("block",)) == {9, 10, 11}  # a block scalar's every line
    assert found.lines(("nul", "model")) == {8}  # a null the map takes the place of
    assert found.lines(("z", "model")) == {12}
    assert found.lines(("missing", "model")) == set()


def test_quoted_and_tagged_scalars_have_their_text_without_properties() -> None:
    found = places("a: &x 'é 中文'  # c\nb: !!str &y 5\nc: &z\n  two lines\n")
    assert found is not None
    texts = [found.written[(k,)][0].scalar for k in "abc"]
    assert [s.text if s else None for s in texts] == ["'é 中文'", "5", None]


def test_line_ends_of_every_kind_count_as_one() -> None:
    found = places("a: 1\r\nb: 2\rc: 3\n")
    assert found is not None
    assert [found.written[(k,)][0].key_line for k in "abc"] == [0, 1, 2]


def test_other_line_breaks_are_not_mapped() -> None:
    assert places("a: 1\u2028b\n") is None
    assert places("a: 1\x85\n") is None
