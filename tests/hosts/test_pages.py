"""simulator.hosts.pages: what a page written into a project cites, in real directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simulator.hosts.pages import page_bytes, project_sources
from simulator.scenario import wiki


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("".join(f"line {n}\n" for n in range(1, 41)))
    (path / "README.md").write_text("# widget\n\nA widget.\n")
    return path


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


def test_a_page_cites_the_sources_and_is_the_same_for_the_same_arguments() -> None:
    catalog = wiki.catalog(0, "acme/widget", 3)
    sources = (("src/app.py", 40),)
    first = page_bytes(catalog[0], "en", 0, catalog, sources)
    assert first == page_bytes(catalog[0], "en", 0, catalog, sources)
    text = first.decode()
    assert not text.startswith("# ") and "Sources: [src/app.py](src/app.py#L" in text
    assert page_bytes(catalog[0], "en", 1, catalog, sources) != first  # another seed
    expected = wiki.page_markdown(
        catalog[0],
        language="en",
        seed=0,
        others=[(p.title, p.slug) for p in catalog[1:]],
        sources=sources,
    )
    assert text == expected
