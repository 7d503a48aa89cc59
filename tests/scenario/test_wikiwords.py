"""Tests of simulator/scenario/wikiwords.py: the languages, and vocabularies that are
whole in both of them."""

from __future__ import annotations

import re
import string

import pytest

from simulator.scenario import wikiwords
from simulator.scenario.wikiwords import (
    GROUPS,
    LANGUAGES,
    NOUNS,
    OVERVIEW,
    PATTERNS,
    SECTIONS,
    TEXT,
    TOPICS,
)

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize(
    ("value", "language"),
    [("zh", "zh"), ("zh-CN", "zh"), (" ZH_tw ", "zh"), ("en", "en"), ("fr", "en"), ("", "en")],
)
def test_wiki_language(value: str, language: str) -> None:
    assert wikiwords.wiki_language(value) == language
    assert wikiwords.wiki_language(value) in LANGUAGES


def test_every_title_is_english_then_chinese() -> None:
    pairs = [OVERVIEW, *((en, zh) for en, zh, _, _ in TOPICS), *PATTERNS]
    pairs += [(en, zh) for en, zh, _ in NOUNS]
    pairs += list(GROUPS.values())
    pairs += [names for options in SECTIONS for names in options]
    for en, zh in pairs:
        assert en.isascii() and not HAN.search(en), en
        assert HAN.search(zh), zh


def test_topics_name_a_tier_and_a_known_group() -> None:
    assert {tier for _, _, tier, _ in TOPICS} == set(range(len(SECTIONS)))
    assert {key for *_, key in TOPICS} <= {"", *GROUPS}
    assert {key for *_, key in NOUNS} <= set(GROUPS)
    assert len({en for en, *_ in TOPICS}) == len({zh for _, zh, *_ in TOPICS}) == len(TOPICS)


def test_patterns_take_one_noun_in_both_languages() -> None:
    for pattern in PATTERNS:
        for text in pattern:
            fields = [name for _, name, _, _ in string.Formatter().parse(text) if name]
            assert fields == ["Noun"], text


def test_the_markdown_words_are_whole_in_both_languages() -> None:
    assert set(TEXT) == set(LANGUAGES)
    english, chinese = TEXT["en"], TEXT["zh"]
    assert set(english) == set(chinese)
    for key in english:
        assert len(english[key]) == len(chinese[key]), key
    for language in LANGUAGES:
        words = TEXT[language]
        assert all("{title}" in intro for intro in words["intro"])
        assert all("{link}" in see for see in words["see"])
        # The sentences citing a file are the same ones in both languages.
        cites = [("{file}" in sentence) for sentence in words["sentences"]]
        assert cites == [("{file}" in sentence) for sentence in english["sentences"]]
        assert any(cites) and not all(cites)
        assert len(words["nodes"]) >= 3
