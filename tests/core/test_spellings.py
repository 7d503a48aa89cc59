"""simulator.core.spellings: every JSON spelling of a string is matched, in valid JSON
or not, and escapes are undone level by level."""

from __future__ import annotations

import json
import re

import pytest

from simulator.core.spellings import flatten, levels, spelled, spelling, unescape

TEXT = 'sk/"é"\\\U0001f511<&>'


def spellings_of(text: str) -> list[str]:
    """The ways encoders write ``text`` in JSON, once and again inside a string."""
    once = [
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        json.dumps(text)[1:-1].replace("/", "\\/"),
        json.dumps(text)[1:-1].upper().replace("\\U", "\\u").replace("SK", "sk"),
        "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else json.dumps(c)[1:-1] for c in text),
        json.dumps(text, ensure_ascii=False)[1:-1].replace("<", "\\u003c").replace("&", "\\u0026"),
    ]
    return once + [json.dumps(form)[1:-1] for form in once]


@pytest.mark.parametrize("form", spellings_of(TEXT))
def test_every_spelling_is_matched_whole(form: str) -> None:
    pattern = re.compile(spelled(TEXT))
    line = b'{"a":"x ' + form.encode() + b' y"}'
    match = pattern.search(line)
    assert match is not None, form
    assert match.group() == form.encode()


@pytest.mark.parametrize("other", ["sk-/", "SK/", "sk\\u002e", "s k/", "sk"])
def test_another_string_is_not_matched(other: str) -> None:
    assert re.compile(spelled("sk/")).search(other.encode()) is None


def test_one_character_in_its_other_cases() -> None:
    pattern = re.compile(spelling("k", "K", "\u212a"))
    for form in (b"k", b"K", "\u212a".encode(), b"\\u006b", b"\\u004B", b"\\u212a", b"\\\\u212A"):
        assert pattern.fullmatch(form), form
    assert pattern.fullmatch(b"x") is None


def test_escapes_are_undone_one_level_at_a_time() -> None:
    inner = json.dumps({"k": TEXT})
    twice = json.dumps(inner).encode()
    found = list(levels(twice))
    assert len(found) == 4  # as written, one level undone, two, three (TEXT's own \)
    assert found[1] == b'"' + inner.encode() + b'"'
    assert TEXT.encode() in found[2]
    assert flatten(twice, 2) == found[2]
    assert flatten(b"no escape") == b"no escape"
    assert flatten(b"\\q \\u00e9 \\ud83d\\udd11") == "q é \U0001f511".encode()


def test_unescape_follows_the_quote() -> None:
    assert unescape(b"sk-\\u0053", b'"') == "sk-S"
    assert unescape(b"sk-\\\\u0053", b'\\"') == "sk-S"  # inside a JSON string holding JSON
    assert unescape(b"sk-\\\\u0053", b'"') == "sk-\\u0053"
    assert unescape(b"\xff", b'"') is None
