"""simulator.hosts.pages: what a page written into a project cites, in real directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simulator.hosts.pages import Keyed, page_bytes, project_sources
from simulator.scenario import wiki


def test_project_sources_lists_text_files_with_their_lines(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "logo.png").write_bytes(b"\x89PNG\0\0\0")
    assert project_sources(project) == [("README.md", 3), ("src/app.py", 40)]


def test_project_sources_never_reads_through_a_link(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("a\nb\n")
    (project / "linked.txt").symlink_to(secret)
    (project / "src" / "outside").symlink_to(tmp_path, target_is_directory=True)
    assert project_sources(project) == [("README.md", 3), ("src/app.py", 40)]


def test_project_sources_reads_a_bounded_number_of_files(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):
        (project / f"blob{n:02}.bin").write_bytes(b"\0" * 100)  # read, never cited
    os.mkfifo(project / "pipe")  # never waited on
    monkeypatch.setattr("simulator.hosts.pages._MAX_FILES_READ", 10)
    # README.md sorts first; the budget then goes on the blobs, and src/ is never read
    assert project_sources(project) == [("README.md", 3)]
    monkeypatch.setattr("simulator.hosts.pages._MAX_FILES_READ", 4000)
    assert project_sources(project) == [("README.md", 3), ("src/app.py", 40)]


def test_project_sources_count_newline_terminated_lines(project: Path) -> None:
    # splitlines() would also break at the form feeds, the lone CRs and U+2028
    (project / "src" / "getopt.c").write_bytes(b"int a;\n\f\f\f\f\n\x0c/* b */\n")
    (project / "mac.txt").write_bytes(b"one\rtwo\rthree\r")
    (project / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree")  # no newline at the end
    (project / "sep.md").write_text("a\u2028b\x1c\x85c\n", encoding="utf-8")
    assert project_sources(project) == [
        ("README.md", 3),
        ("dos.txt", 3),
        ("mac.txt", 1),
        ("sep.md", 1),
        ("src/app.py", 40),
        ("src/getopt.c", 3),
    ]


def test_a_page_cites_the_sources_and_reads_as_browse_draws_it() -> None:
    catalog = wiki.catalog(0, "acme/widget", 3)
    links = Keyed((p.title, p.slug) for p in catalog)
    sources = Keyed([("src/app.py", 40)])
    first = page_bytes(catalog[0], "en", 0, links, sources)
    assert first == page_bytes(catalog[0], "en", 0, Keyed(links), Keyed(sources))
    text = first.decode()
    assert not text.startswith("# ") and "Sources: [src/app.py](src/app.py#L" in text
    assert f"]({catalog[0].slug})" not in text  # never a link to itself
    assert page_bytes(catalog[0], "en", 1, links, sources) != first  # another seed
    expected = wiki.page_markdown(catalog[0], language="en", seed=0, others=links, sources=sources)
    assert text == expected


def test_a_keyed_tuple_hashes_once_and_equals_its_tuple() -> None:
    key = Keyed([("a", "1-a"), ("b", "2-b")])
    assert hash(key) == hash(tuple(key)) and key == (("a", "1-a"), ("b", "2-b"))
    assert key._hash == hash(key)  # kept: the next lookup does not hash the pages again
