"""Tests of simulator/formats/wiki.py: wiki.json and the ``current`` pointer, byte for byte
as zread writes them, and the checks a decoded one passes."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from simulator.formats.bounds import BOM, LIMITS, FormatError
from simulator.formats.ids import LEVELS, go_time, slug
from simulator.formats.wiki import (
    CURRENT_PREFIX,
    WIKI_JSON,
    PageEntry,
    WikiIndex,
    decode_current,
    decode_wiki,
    encode_current,
    encode_wiki,
    page_file,
    wiki_index,
)
from simulator.scenario.wiki import Page

# The sample zread writes (docs: ZREAD-FACTS), byte for byte.
WIKI_SAMPLE = """{
  "id": "2026-04-06-130213",
  "generated_at": "2026-04-06T19:02:13.183259466Z",
  "language": "zh",
  "pages": [
    {
      "slug": "1-xiang-mu-gai-lan",
      "title": "项目概览",
      "file": "1-xiang-mu-gai-lan.md",
      "section": "入门指南",
      "level": "Beginner"
    },
    {
      "slug": "10-protobufxie-yi-ji-cheng",
      "title": "Protobuf协议集成",
      "file": "10-protobufxie-yi-ji-cheng.md",
      "section": "核心框架",
      "group": "网络通信",
      "level": "Intermediate"
    }
  ]
}""".encode()

NAME = "/work/p/.zread/wiki/versions/2026-04-06-130213/wiki.json"


def catalog_pages() -> list[Page]:
    return [
        Page(1, "项目概览", slug(1, "项目概览"), "入门指南", "", "Beginner"),
        Page(
            10,
            "Protobuf协议集成",
            slug(10, "Protobuf协议集成"),
            "核心框架",
            "网络通信",
            "Intermediate",
        ),
    ]


def _sample(**change: Any) -> bytes:
    """The sample with keys changed: ``page_<key>`` changes its second page."""
    doc = json.loads(WIKI_SAMPLE)
    for key, value in change.items():
        if key.startswith("page_"):
            doc["pages"][1][key.removeprefix("page_")] = value
        else:
            doc[key] = value
    return json.dumps(doc, ensure_ascii=False).encode()


def _refusal(data: bytes, name: str = NAME) -> str:
    with pytest.raises(FormatError) as caught:
        decode_wiki(data, name)
    message = str(caught.value)
    assert message.startswith(f"{name}: ")
    assert "\n" not in message
    assert isinstance(caught.value, ValueError)
    return message


# -- wiki.json: encode and decode ---------------------------------------------------------


def test_the_names_and_levels() -> None:
    assert WIKI_JSON == "wiki.json"
    assert CURRENT_PREFIX == "versions/"
    assert LEVELS == ("Beginner", "Intermediate", "Advanced")
    assert page_file("1-overview") == "1-overview.md"


def test_the_sample_decodes_and_re_encodes_byte_identical() -> None:
    index = decode_wiki(WIKI_SAMPLE)
    assert encode_wiki(index) == WIKI_SAMPLE
    assert (index.id, index.generated_at, index.language) == (
        "2026-04-06-130213",
        "2026-04-06T19:02:13.183259466Z",
        "zh",
    )
    first, second = index.pages
    assert first == PageEntry(
        slug="1-xiang-mu-gai-lan",
        title="项目概览",
        file="1-xiang-mu-gai-lan.md",
        section="入门指南",
        level="Beginner",
    )
    assert first.group == "" and second.group == "网络通信"


def test_wiki_index_of_catalog_pages_encodes_as_the_sample() -> None:
    generated_at = go_time(dt.datetime(2026, 4, 6, 19, 2, 13), 183_259_466)
    index = wiki_index("2026-04-06-130213", generated_at, "zh", catalog_pages())
    assert index == decode_wiki(WIKI_SAMPLE)
    data = encode_wiki(index)
    assert data == WIKI_SAMPLE
    assert not data.endswith(b"\n")
    assert list(json.loads(data)) == ["id", "generated_at", "language", "pages"]
    assert list(json.loads(data)["pages"][1]) == [
        "slug",
        "title",
        "file",
        "section",
        "group",
        "level",
    ]


@pytest.mark.parametrize(("language", "written"), [("zh", "zh"), ("en", "en"), ("fr", "en")])
def test_wiki_index_writes_zh_or_en(language: str, written: str) -> None:
    index = wiki_index("i", "2026-01-01T00:00:00Z", language, [])
    assert index.language == written
    assert index.pages == []


def test_wiki_index_names_each_page_file_after_its_slug() -> None:
    pages = [Page(n, f"Page {n}", slug(n, f"Page {n}"), "S", "", "Advanced") for n in (1, 2, 3)]
    index = wiki_index("i", "2026-01-01T00:00:00Z", "en", pages)
    assert [(p.slug, p.file) for p in index.pages] == [
        ("1-page-1", "1-page-1.md"),
        ("2-page-2", "2-page-2.md"),
        ("3-page-3", "3-page-3.md"),
    ]
    assert decode_wiki(encode_wiki(index)) == index


def test_encode_wiki_escapes_as_go_does() -> None:
    title = 'Build & <Release> "x" \\ \u2028\u2029\x01\n\t é 漢'
    index = WikiIndex(
        id="i",
        generated_at="2026-01-01T00:00:00Z",
        language="en",
        pages=[PageEntry(slug="1-a", title=title, file="1-a.md", section="S", level="Advanced")],
    )
    data = encode_wiki(index)
    assert (
        b'"title": "Build \\u0026 \\u003cRelease\\u003e \\"x\\" \\\\ \\u2028\\u2029\\u0001\\n\\t '
        + "é 漢".encode()
        + b'"'
    ) in data
    assert decode_wiki(data) == index


def test_an_empty_wiki_encodes_as_go_does() -> None:
    index = WikiIndex(id="i", generated_at="2026-01-01T00:00:00Z", language="en", pages=[])
    assert encode_wiki(index) == (
        b'{\n  "id": "i",\n  "generated_at": "2026-01-01T00:00:00Z",\n'
        b'  "language": "en",\n  "pages": []\n}'
    )


def test_decode_wiki_accepts_a_bom_and_white_space() -> None:
    assert decode_wiki(BOM + b"\r\n" + WIKI_SAMPLE + b"\n") == decode_wiki(WIKI_SAMPLE)


@pytest.mark.parametrize(
    "generated_at",
    [
        "2026-04-06T19:02:13Z",
        "2026-04-06T19:02:13.5Z",
        "2026-04-06T19:02:13.123456789Z",
        "2026-04-06T13:02:13-06:00",
        "2026-04-06T21:02:13.1+02:00",
    ],
)
def test_decode_wiki_accepts_rfc3339_times(generated_at: str) -> None:
    assert decode_wiki(_sample(generated_at=generated_at)).generated_at == generated_at


def test_decode_wiki_names_the_file_by_default() -> None:
    with pytest.raises(FormatError, match=r"^wiki\.json: id '\.\./x' is not a directory name$"):
        decode_wiki(_sample(id="../x"))


# -- wiki.json: what is refused -----------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": "../x"}, "id '../x' is not a directory name"),
        ({"id": ""}, "id '' is not a directory name"),
        ({"id": "a/b"}, "id 'a/b' is not a directory name"),
        ({"id": "a\nb"}, "id 'a\\nb' is not a directory name"),
        ({"generated_at": "yesterday"}, "generated_at 'yesterday' is not RFC 3339"),
        (
            {"generated_at": "2026-04-06 19:02:13Z"},
            "generated_at '2026-04-06 19:02:13Z' is not RFC 3339",
        ),
        (
            {"generated_at": "2026-04-06T19:02:13"},
            "generated_at '2026-04-06T19:02:13' is not RFC 3339",
        ),
        (
            {"generated_at": "2026-04-06T19:02:13.1234567890Z"},
            "generated_at '2026-04-06T19:02:13.1234567890Z' is not RFC 3339",
        ),
        (
            {"page_slug": "../x", "page_file": "../x.md"},
            "pages[1]: slug '../x' is not a file name",
        ),
        ({"page_slug": "a b", "page_file": "a b.md"}, "pages[1]: slug 'a b' is not a file name"),
        ({"page_slug": "", "page_file": ".md"}, "pages[1]: slug '' is not a file name"),
        (
            {"page_file": "../../x.md"},
            "pages[1]: file '../../x.md' is not '10-protobufxie-yi-ji-cheng.md'",
        ),
        (
            {"page_file": "10-protobufxie-yi-ji-cheng"},
            "pages[1]: file '10-protobufxie-yi-ji-cheng' is not '10-protobufxie-yi-ji-cheng.md'",
        ),
        (
            {"page_slug": "1-xiang-mu-gai-lan", "page_file": "1-xiang-mu-gai-lan.md"},
            "pages[1]: slug '1-xiang-mu-gai-lan' is listed twice",
        ),
        ({"extra": 1}, "extra: unknown key"),
        ({"page_extra": 1}, "pages[1].extra: unknown key"),
        ({"language": "fr"}, "language: 'fr' is not one of the allowed values"),
        ({"page_level": "Expert"}, "pages[1].level: 'Expert' is not one of the allowed values"),
        ({"page_group": 3}, "pages[1].group: expected a string, got an integer"),
        ({"pages": {}}, "pages: expected an array, got an object"),
    ],
)
def test_decode_wiki_refuses_a_wrong_document(change: dict[str, Any], message: str) -> None:
    assert _refusal(_sample(**change)) == f"{NAME}: {message}"


@pytest.mark.parametrize("data", [b"", b"{", b"wiki", BOM, b"\xff\xfe{}"])
def test_decode_wiki_refuses_what_is_not_json(data: bytes) -> None:
    assert "not JSON" in _refusal(data)


def test_decode_wiki_refuses_what_is_not_an_object() -> None:
    assert _refusal(b"[]") == f"{NAME}: expected an object, got an array"


def test_decode_wiki_refuses_a_missing_key() -> None:
    doc = json.loads(WIKI_SAMPLE)
    del doc["pages"][0]["section"]
    assert "pages[0].section: missing" in _refusal(json.dumps(doc).encode())


def test_decode_wiki_refuses_a_file_over_8_mib() -> None:
    padded = WIKI_SAMPLE + b" " * (LIMITS["wiki.json"] - len(WIKI_SAMPLE))
    assert decode_wiki(padded) == decode_wiki(WIKI_SAMPLE)
    assert _refusal(padded + b" ") == f"{NAME}: larger than 8 MiB, the limit for wiki.json"


@pytest.mark.parametrize("depth", [33, 100_000])
def test_decode_wiki_refuses_a_document_nested_too_deep(depth: int) -> None:
    data = _sample().replace(b'"pages": [', b'"pages": ' + b"[" * depth, 1)
    data = data[:-1] + b"]" * (depth - 1) + b"}"
    assert _refusal(data) == f"{NAME}: nested deeper than 32 levels"


def test_a_deep_title_string_is_not_nesting() -> None:
    index = decode_wiki(_sample(page_title="[" * 100 + "{" * 100))
    assert index.pages[1].title == "[" * 100 + "{" * 100


# -- current ------------------------------------------------------------------------------


def test_encode_current_is_exact() -> None:
    assert encode_current("2026-04-06-130213") == b"versions/2026-04-06-130213"


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", " x", "x\n", "a\\b"])
def test_encode_current_refuses_what_is_not_an_id(bad: str) -> None:
    with pytest.raises(ValueError, match="not a version id"):
        encode_current(bad)


@pytest.mark.parametrize(
    "data",
    [
        b"versions/2026-04-06-130213",
        b"versions/2026-04-06-130213\n",
        b"\xef\xbb\xbfversions/2026-04-06-130213",
        b"  \r\n\tversions/2026-04-06-130213 \r\n",
        b"2026-04-06-130213",
        b"\xef\xbb\xbf 2026-04-06-130213\n",
    ],
)
def test_decode_current_accepts_what_readers_accept(data: bytes) -> None:
    assert decode_current(data) == "2026-04-06-130213"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   \n",
        b"\xef\xbb\xbf",
        b"versions/",
        b"versions/a/b",
        b"../../etc/passwd",
        b"versions/..",
        b"two words",
        b"\xff\xfe",
        b"versions/a\x00b",
    ],
)
def test_decode_current_of_garbage_is_none(data: bytes) -> None:
    assert decode_current(data) is None


def test_current_round_trip() -> None:
    assert decode_current(encode_current("2026-01-02-030405")) == "2026-01-02-030405"


def test_a_current_at_4_kib_is_read_and_one_over_it_is_a_format_error() -> None:
    at_limit = b"versions/2026-04-06-130213".ljust(4 * 1024)
    assert decode_current(at_limit) == "2026-04-06-130213"
    name = "/work/p/.zread/wiki/current"
    with pytest.raises(FormatError) as caught:
        decode_current(at_limit + b"\n", name)
    assert str(caught.value) == f"{name}: larger than 4 KiB, the limit for current"
    with pytest.raises(FormatError, match=r"^current: larger than 4 KiB"):
        decode_current(b"x" * 5000)
