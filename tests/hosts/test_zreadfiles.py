"""Tests of simulator/hosts/zreadfiles.py: zread's paths and the exact bytes of its files,
and the atomic, locked writes (with several real processes)."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from simulator.hosts import zreadfiles as zf
from simulator.scenario import wiki
from simulator.scenario.wiki import Page

# The samples zread writes (docs: ZREAD-FACTS), byte for byte.
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

CONFIG_SAMPLE = b"""language: zh
doc_language: zh
llm:
    provider: z.ai
    model: glm-5
    api_key: ""
    base_url: https://open.bigmodel.cn/api/paas/v4
concurrency:
    max_concurrent: 1
    max_retries: 0
"""


# -- paths --------------------------------------------------------------------------------


def test_user_paths(tmp_path: Path) -> None:
    assert zf.user_dir(tmp_path) == tmp_path / ".zread"
    assert zf.config_path(tmp_path) == tmp_path / ".zread" / "config.yaml"
    assert zf.login_path(tmp_path) == tmp_path / ".zread" / "login.json"
    assert zf.log_path(tmp_path) == tmp_path / ".zread" / "log" / "zread.log"


def test_project_paths(tmp_path: Path) -> None:
    wiki_root = tmp_path / ".zread" / "wiki"
    assert zf.project_dir(tmp_path) == tmp_path / ".zread"
    assert zf.wiki_dir(tmp_path) == wiki_root
    assert zf.current_path(tmp_path) == wiki_root / "current"
    assert zf.versions_dir(tmp_path) == wiki_root / "versions"
    assert zf.drafts_dir(tmp_path) == wiki_root / "drafts"
    assert zf.version_dir(tmp_path, "2026-04-06-130213") == (
        wiki_root / "versions" / "2026-04-06-130213"
    )
    assert zf.wiki_json_path(zf.drafts_dir(tmp_path)) == wiki_root / "drafts" / "wiki.json"
    assert zf.page_file("1-overview") == "1-overview.md"


def test_paths_accept_strings() -> None:
    assert zf.wiki_dir("/p") == Path("/p/.zread/wiki")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b", "a b", "x\n"])
def test_a_version_dir_is_one_plain_component(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="not a version id"):
        zf.version_dir(tmp_path, bad)


# -- current ------------------------------------------------------------------------------


def test_encode_current_is_exact() -> None:
    assert zf.encode_current("2026-04-06-130213") == b"versions/2026-04-06-130213"


@pytest.mark.parametrize("bad", ["", "..", "a/b", " x"])
def test_encode_current_refuses_what_is_not_an_id(bad: str) -> None:
    with pytest.raises(ValueError, match="not a version id"):
        zf.encode_current(bad)


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
    assert zf.decode_current(data) == "2026-04-06-130213"


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
def test_decode_current_refuses_garbage(data: bytes) -> None:
    assert zf.decode_current(data) is None


def test_current_round_trip() -> None:
    assert zf.decode_current(zf.encode_current("2026-01-02-030405")) == "2026-01-02-030405"


# -- version ids and Go time --------------------------------------------------------------


def test_version_id_is_local_wall_clock() -> None:
    assert zf.version_id(dt.datetime(2026, 4, 6, 13, 2, 13, 999_999)) == "2026-04-06-130213"
    aware = dt.datetime(2026, 4, 6, 13, 2, 13, tzinfo=dt.timezone(dt.timedelta(hours=-6)))
    assert zf.version_id(aware) == "2026-04-06-130213"
    assert zf.version_id is wiki.version_id


def test_next_free_id_takes_the_next_free_second() -> None:
    at = dt.datetime(2026, 12, 31, 23, 59, 58, 500_000)
    assert zf.next_free_id(at, []) == "2026-12-31-235958"
    taken = ["2026-12-31-235958", "2026-12-31-235959", "other"]
    assert zf.next_free_id(at, taken) == "2027-01-01-000000"
    assert zf.next_free_id(at, iter(taken)) == "2027-01-01-000000"


def test_parse_version_id() -> None:
    assert zf.parse_version_id("2026-04-06-130213") == dt.datetime(2026, 4, 6, 13, 2, 13)
    assert zf.parse_version_id("2026-02-30-000000") is None
    assert zf.parse_version_id("20260406-130213-abcdef") is None
    assert zf.parse_version_id("2026-04-06-130213\n") is None


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (183_259_466, "2026-04-06T19:02:13.183259466Z"),
        (183_259_460, "2026-04-06T19:02:13.18325946Z"),
        (500_000_000, "2026-04-06T19:02:13.5Z"),
        (1, "2026-04-06T19:02:13.000000001Z"),
        (0, "2026-04-06T19:02:13Z"),
    ],
)
def test_go_time_is_rfc3339nano(nanos: int, text: str) -> None:
    assert zf.go_time(dt.datetime(2026, 4, 6, 19, 2, 13, tzinfo=dt.UTC), nanos) == text


def test_go_time_converts_to_utc_and_defaults_to_microseconds() -> None:
    local = dt.datetime(2026, 4, 6, 13, 2, 13, 183_259, tzinfo=dt.timezone(-dt.timedelta(hours=6)))
    assert zf.go_time(local) == "2026-04-06T19:02:13.183259Z"
    assert zf.go_time(dt.datetime(2026, 4, 6, 19, 2, 13)) == "2026-04-06T19:02:13Z"
    assert zf.go_time(local, 7) == "2026-04-06T19:02:13.000000007Z"


@pytest.mark.parametrize("nanos", [-1, 1_000_000_000])
def test_go_time_refuses_nanos_out_of_range(nanos: int) -> None:
    with pytest.raises(ValueError, match="nanos"):
        zf.go_time(dt.datetime(2026, 1, 1), nanos)


def test_go_time_ns() -> None:
    stamp = dt.datetime(2026, 4, 6, 19, 2, 13, tzinfo=dt.UTC).timestamp()
    assert zf.go_time_ns(int(stamp) * 10**9 + 183_259_466) == "2026-04-06T19:02:13.183259466Z"


# -- wiki.json ----------------------------------------------------------------------------


def test_the_sample_decodes_and_re_encodes_byte_identical() -> None:
    index = zf.decode_wiki(WIKI_SAMPLE)
    assert zf.encode_wiki(index) == WIKI_SAMPLE
    assert (index.id, index.generated_at, index.language) == (
        "2026-04-06-130213",
        "2026-04-06T19:02:13.183259466Z",
        "zh",
    )
    first, second = index.pages
    assert first.group == "" and second.group == "网络通信"


def test_encode_wiki_from_catalog_pages() -> None:
    pages = [
        Page(1, "项目概览", wiki.slug(1, "项目概览"), "入门指南", "", "Beginner"),
        Page(
            10,
            "Protobuf协议集成",
            wiki.slug(10, "Protobuf协议集成"),
            "核心框架",
            "网络通信",
            "Intermediate",
        ),
    ]
    index = zf.WikiIndex(
        id="2026-04-06-130213",
        generated_at=zf.go_time(dt.datetime(2026, 4, 6, 19, 2, 13), 183_259_466),
        language="zh",
        pages=[zf.page_entry(p) for p in pages],
    )
    data = zf.encode_wiki(index)
    assert data == WIKI_SAMPLE
    assert not data.endswith(b"\n")
    assert list(json.loads(data)) == ["id", "generated_at", "language", "pages"]


def test_page_entry_refuses_an_unknown_level() -> None:
    with pytest.raises(ValueError, match="not a level"):
        zf.page_entry(Page(1, "A", "1-a", "S", "", "Expert"))


def test_encode_wiki_escapes_as_go_does() -> None:
    title = 'Build & <Release> "x" \\ \u2028\u2029\x01\n\t é 漢'
    index = zf.WikiIndex(
        id="i",
        generated_at="2026-01-01T00:00:00Z",
        language="en",
        pages=[zf.PageEntry(slug="1-a", title=title, file="1-a.md", section="S", level="Advanced")],
    )
    data = zf.encode_wiki(index)
    assert (
        b'"title": "Build \\u0026 \\u003cRelease\\u003e \\"x\\" \\\\ \\u2028\\u2029\\u0001\\n\\t '
        + "é 漢".encode()
        + b'"'
    ) in data
    assert zf.decode_wiki(data) == index


def test_an_empty_wiki_encodes_as_go_does() -> None:
    index = zf.WikiIndex(id="i", generated_at="2026-01-01T00:00:00Z", language="en", pages=[])
    assert zf.encode_wiki(index) == (
        b'{\n  "id": "i",\n  "generated_at": "2026-01-01T00:00:00Z",\n'
        b'  "language": "en",\n  "pages": []\n}'
    )


def test_decode_wiki_accepts_a_bom_and_white_space() -> None:
    assert zf.decode_wiki(b"\xef\xbb\xbf" + WIKI_SAMPLE + b"\n") == zf.decode_wiki(WIKI_SAMPLE)


def _sample(**change: Any) -> bytes:
    doc = json.loads(WIKI_SAMPLE)
    for key, value in change.items():
        if key.startswith("page_"):
            doc["pages"][1][key.removeprefix("page_")] = value
        else:
            doc[key] = value
    return json.dumps(doc, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"[]", "Expected `object`"),
        (_sample(extra=1), "unknown field `extra`"),
        (_sample(page_extra=1), r"unknown field `extra` - at `\$.pages\[1\]`"),
        (_sample(language="fr"), "language"),
        (_sample(page_level="Expert"), "level"),
        (_sample(page_group=3), "group"),
        (_sample(id=""), "id"),
        (_sample(id="../x"), "id"),
        (_sample(generated_at="yesterday"), "generated_at"),
        (_sample(page_file="../../x.md"), "file"),
        (_sample(page_slug="1-xiang-mu-gai-lan", page_file="1-xiang-mu-gai-lan.md"), "twice"),
        (_sample(page_slug="a/b", page_file="a/b.md"), "slug"),
    ],
)
def test_decode_wiki_refuses_other_shapes(data: bytes, problem: str) -> None:
    with pytest.raises(zf.WikiFileError, match=problem) as caught:
        zf.decode_wiki(data)
    assert str(caught.value).startswith("wiki.json: ")
    assert isinstance(caught.value, ValueError)


def test_decode_wiki_refuses_a_missing_key() -> None:
    doc = json.loads(WIKI_SAMPLE)
    del doc["pages"][0]["section"]
    with pytest.raises(zf.WikiFileError, match="missing required field `section`"):
        zf.decode_wiki(json.dumps(doc).encode())


# -- slugs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "title", "expected"),
    [
        (
            12,
            "UI框架设计（Ctrl/Handler/Panel/Template）",
            "12-uikuang-jia-she-ji-ctrl-handler-panel-template",
        ),
        (10, "Protobuf协议集成", "10-protobufxie-yi-ji-cheng"),
        (1, "项目概览", "1-xiang-mu-gai-lan"),
        (3, "default_config", "3-default_config"),
        (1, "Overview", "1-overview"),
        (2, "Quick Start", "2-quick-start"),
    ],
)
def test_slug_reproduces_zreads_samples(n: int, title: str, expected: str) -> None:
    assert zf.slug(n, title) == expected
    assert zf.slug is wiki.slug


def test_the_number_keeps_slugs_of_one_wiki_apart() -> None:
    titles = ["Quick Start", "quick start", "Quick-Start!", "QUICK   START"]
    assert len({wiki.slug(1, t)[2:] for t in titles}) == 1
    slugs = [wiki.slug(n, t) for n, t in enumerate(titles, start=1)]
    assert len(set(slugs)) == len(slugs)


# -- config.yaml --------------------------------------------------------------------------


def test_the_config_sample_round_trips_byte_identical() -> None:
    doc = zf.read_config(CONFIG_SAMPLE)
    assert doc == zf.default_config()
    assert zf.encode_config(doc) == CONFIG_SAMPLE


def test_config_values_are_the_config_commands_fields() -> None:
    values = zf.config_values(zf.read_config(CONFIG_SAMPLE))
    assert values == {
        "language": "zh",
        "doc_language": "zh",
        "max_concurrent": "1",
        "max_retries": "0",
        "llm_provider": "z.ai",
        "llm_base_url": "https://open.bigmodel.cn/api/paas/v4",
        "llm_model": "glm-5",
        "llm_api_key": "",
    }
    assert list(values) == list(zf.CONFIG_KEYS)


def test_config_values_leave_out_what_the_file_lacks() -> None:
    doc = zf.read_config(b"llm:\n    api_key: sk-1\nextra: 1\n")
    assert zf.config_values(doc) == {"llm_api_key": "sk-1"}
    assert zf.config_values({}) == {}
    assert zf.config_values({"llm": "not a map"}) == {}


def test_config_values_as_go_reads_them_into_strings() -> None:
    doc = zf.read_config(b"language: no\ndoc_language: true\nllm:\n    api_key:\n    model: 4.5\n")
    assert zf.config_values(doc) == {
        "language": "no",
        "doc_language": "true",
        "llm_model": "4.5",
        "llm_api_key": "",
    }


def test_config_values_refuse_a_map_where_a_value_is() -> None:
    with pytest.raises(zf.ConfigFileError, match=r"llm\.model"):
        zf.config_values({"llm": {"model": {"a": 1}}})


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"- a\n- b\n", "expected a mapping, got list"),
        (b"just text\n", "expected a mapping, got str"),
        (b"a: [\n", "not valid YAML"),
        (b"a: b: c\n", "not valid YAML"),
    ],
)
def test_read_config_refuses_what_is_not_a_mapping(data: bytes, problem: str) -> None:
    with pytest.raises(zf.ConfigFileError, match=problem) as caught:
        zf.read_config(data)
    assert "\n" not in str(caught.value)


def test_read_config_of_an_empty_file_and_a_bom() -> None:
    assert zf.read_config(b"") == {}
    assert zf.read_config(b"\n# nothing\n") == {}
    assert zf.read_config(b"\xef\xbb\xbf" + CONFIG_SAMPLE) == zf.default_config()


def test_update_config_writes_back_into_the_same_shape() -> None:
    doc = zf.read_config(CONFIG_SAMPLE)
    new = zf.update_config(
        doc,
        {"llm_api_key": "sk-new", "max_concurrent": "8", "language": "en", "llm_model": "glm-5"},
    )
    assert doc == zf.default_config(), "the input is not changed"
    assert zf.encode_config(new) == CONFIG_SAMPLE.replace(
        b'api_key: ""', b"api_key: sk-new"
    ).replace(b"max_concurrent: 1", b"max_concurrent: 8").replace(
        b"language: zh\ndoc", b"language: en\ndoc"
    )
    assert new["concurrency"]["max_concurrent"] == 8


def test_update_config_keeps_unknown_keys_after_the_known_ones() -> None:
    data = (
        b"telemetry: false\nllm:\n    timeout: 30\n    model: glm-5\nlanguage: en\n"
        b"proxy:\n    url: http://p\n    hosts:\n        - a\n        - b\n"
    )
    new = zf.update_config(zf.read_config(data), {"llm_provider": "openai", "max_retries": "3"})
    assert zf.encode_config(new) == (
        b"language: en\nllm:\n    provider: openai\n    model: glm-5\n    timeout: 30\n"
        b"concurrency:\n    max_retries: 3\ntelemetry: false\n"
        b"proxy:\n    url: http://p\n    hosts:\n        - a\n        - b\n"
    )


def test_update_config_leaves_an_unchanged_value_as_written() -> None:
    doc = zf.read_config(b'concurrency:\n    max_retries: "2"\n')
    assert zf.update_config(doc, {"max_retries": "2"}) == doc
    assert zf.update_config(doc, {"max_retries": "3"}) == {"concurrency": {"max_retries": 3}}


def test_update_config_on_a_fresh_install_and_a_null_map() -> None:
    assert zf.update_config({}, {"llm_model": "m"}) == {"llm": {"model": "m"}}
    assert zf.update_config({"llm": None}, {"llm_model": "m"}) == {"llm": {"model": "m"}}


def test_update_config_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="not config fields: nope"):
        zf.update_config({}, {"nope": "x"})
    with pytest.raises(zf.ConfigFileError, match="max_retries: expected an integer"):
        zf.update_config({}, {"max_retries": "many"})
    with pytest.raises(zf.ConfigFileError, match="llm: expected a mapping"):
        zf.update_config({"llm": "glm"}, {"llm_model": "m"})


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("", b'api_key: ""'),
        ("no", b'api_key: "no"'),
        ("123", b'api_key: "123"'),
        ("it's: here", b'api_key: "it\'s: here"'),
        ("密钥 sk", "api_key: 密钥 sk".encode()),
        ("x" * 200 + " y" * 100, b"api_key: " + b"x" * 200 + b" y" * 100),
    ],
)
def test_encode_config_quotes_as_yaml_v3_does(value: str, line: bytes) -> None:
    data = zf.encode_config({"llm": {"api_key": value}})
    assert data == b"llm:\n    " + line + b"\n"
    assert zf.config_values(zf.read_config(data)) == {"llm_api_key": value}


# -- login.json ---------------------------------------------------------------------------


def test_login_round_trip_and_layout() -> None:
    at = dt.datetime(2026, 4, 6, 19, 2, 13, 183_259, tzinfo=dt.UTC)
    data = zf.encode_login("octocat", "global", "glm-4.6", logged_in_at=at)
    assert data == (
        b'{\n  "username": "octocat",\n  "region": "global",\n  "model": "glm-4.6",\n'
        b'  "logged_in_at": "2026-04-06T19:02:13.183259Z"\n}'
    )
    record = zf.decode_login(data)
    assert (record.username, record.region, record.model) == ("octocat", "global", "glm-4.6")
    assert record.logged_in_at == "2026-04-06T19:02:13.183259Z"


def test_login_defaults_to_now() -> None:
    record = zf.decode_login(zf.encode_login("a", "b", "c"))
    when = dt.datetime.fromisoformat(record.logged_in_at.replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.UTC) - when).total_seconds()) < 60


def test_decode_login_reads_any_object() -> None:
    record = zf.decode_login(b'\xef\xbb\xbf{"token": "t", "username": "u"}\n')
    assert (record.username, record.region, record.model) == ("u", "", "")


@pytest.mark.parametrize("data", [b"", b"[]", b'{"username": 3}', b"nope"])
def test_decode_login_refuses_what_is_not_an_object(data: bytes) -> None:
    with pytest.raises(zf.LoginFileError, match=r"^login\.json: "):
        zf.decode_login(data)


# -- write_atomic, locked, append_log ------------------------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_write_atomic_writes_the_bytes_with_the_mode(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "a" / "b" / "config.yaml"
    old_umask = os.umask(0o077 if mode == 0o644 else 0)
    try:
        zf.write_atomic(target, b"one")
        zf.write_atomic(target, b"two", mode)
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.yaml"]


def test_write_atomic_leaves_nothing_behind_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "current"
    zf.write_atomic(target, b"old")
    (tmp_path / "sub").mkdir()
    with pytest.raises(IsADirectoryError):
        zf.write_atomic(tmp_path / "sub", b"new")
    with pytest.raises(TypeError):
        zf.write_atomic(target, "text")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "sub"]


def test_locked_makes_the_lock_file_and_excludes_threads(tmp_path: Path) -> None:
    directory = tmp_path / ".zread"
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def holder() -> None:
        with zf.locked(directory):
            order.append("first in")
            inside.set()
            release.wait(5)
            order.append("first out")

    thread = threading.Thread(target=holder)
    thread.start()
    assert inside.wait(5)
    with pytest.raises(TimeoutError, match="still locked"), zf.locked(directory, timeout=0.05):
        pass  # pragma: no cover
    release.set()
    with zf.locked(directory, timeout=5) as lock:
        order.append("second in")
    thread.join(5)
    assert order == ["first in", "first out", "second in"]
    assert lock == directory / zf.LOCK_NAME and lock.exists()


def test_locked_releases_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), zf.locked(tmp_path):
        raise RuntimeError
    with zf.locked(tmp_path, timeout=0.5):
        pass


WORKER = """
import sys
from pathlib import Path
from simulator.hosts import zreadfiles as zf

directory, rounds = Path(sys.argv[1]), int(sys.argv[2])
target = directory / "counter.json"
for _ in range(rounds):
    with zf.locked(directory):
        count = int(target.read_bytes()) if target.exists() else 0
        zf.write_atomic(target, str(count + 1).encode(), 0o600)
"""


def test_many_processes_lose_no_update_and_tear_no_file(tmp_path: Path) -> None:
    processes, rounds = 4, 40
    target = tmp_path / "counter.json"
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(rounds)])
        for _ in range(processes)
    ]
    seen: list[bytes] = []
    try:
        # Unlocked readers see a whole file every time: the old one or the new one.
        while any(w.poll() is None for w in workers):
            if target.exists():
                seen.append(target.read_bytes())
            time.sleep(0.001)
    finally:
        codes = [w.wait(60) for w in workers]
    assert codes == [0] * processes
    assert int(target.read_bytes()) == processes * rounds
    assert all(data.isdigit() for data in seen)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "counter.json"]


def test_append_log_appends_whole_lines(tmp_path: Path) -> None:
    log = zf.log_path(tmp_path)
    zf.append_log(log, "first")
    zf.append_log(log, "second\n")
    zf.append_log(log, "multi\nline\r\ntext")
    assert log.read_text() == "first\nsecond\nmulti line text\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_append_log_from_threads_never_interleaves(tmp_path: Path) -> None:
    log = tmp_path / "log" / "zread.log"

    def write(n: int) -> None:
        for i in range(50):
            zf.append_log(log, f"writer {n} line {i} " + "x" * 200)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = log.read_text().splitlines()
    assert len(lines) == 200
    assert all(line.endswith("x" * 200) and line.startswith("writer ") for line in lines)


# -- links -------------------------------------------------------------------------------


def test_write_atomic_through_a_link_replaces_the_file_it_names(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "config.yaml"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "config.yaml"
    link.symlink_to(target)
    zf.write_atomic(link, b"new", 0o600)
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("write", ["write_atomic", "append_log"])
def test_a_link_to_nothing_is_refused_and_its_target_not_created(
    tmp_path: Path, write: str
) -> None:
    link = tmp_path / "file"
    link.symlink_to(tmp_path / "missing" / "file")
    writes = {
        "write_atomic": lambda: zf.write_atomic(link, b"x"),
        "append_log": lambda: zf.append_log(link, "x"),
    }
    with pytest.raises(zf.DanglingLinkError, match=r"file: a symbolic link to .*missing/file"):
        writes[write]()
    assert not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_lock_file_is_never_followed_through_a_link(tmp_path: Path) -> None:
    (tmp_path / zf.LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="Too many levels of symbolic links"), zf.locked(tmp_path):
        pass
    assert not (tmp_path / "elsewhere").exists()
