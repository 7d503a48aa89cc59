"""simulator.hosts.disksite: a version served from the project's files, never through
a link, in real directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.hosts.disksite import DiskSite
from simulator.virtual import start


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_browse_never_serves_a_linked_page(
    home: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0")
    version_id = (project / ".zread/wiki/current").read_text().removeprefix("versions/")
    site = DiskSite.open(project, version_id)
    assert site is not None
    page = site.pages[0]
    assert site.markdown(page.slug)
    page_path = project / ".zread/wiki/versions" / version_id / page.file
    page_path.unlink()
    page_path.symlink_to(secret)
    assert site.markdown(page.slug) is None
    assert f"{page_path}: not served" in capsys.readouterr().err
    assert DiskSite.open(project, "../../..") is None


def test_a_version_that_is_not_one_plain_name_is_no_site(
    home: Path, project: Path, tmp_path: Path
) -> None:
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    version_id = (project / ".zread/wiki/current").read_text().removeprefix("versions/")
    # a wiki.json one level up, where ".." would lead
    outside = project / ".zread/wiki/versions"
    (outside / "wiki.json").write_bytes((outside / version_id / "wiki.json").read_bytes())
    assert DiskSite.open(project, f"{version_id}/..") is None
    assert DiskSite.open(project, "..") is None
    assert DiskSite.open(project, version_id) is not None
