"""simulator.hosts.disksite: a version served from the project's files, never through
a link, in real directories."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from simulator.hosts.disksite import DiskSite
from simulator.virtual import start
from tests.e2e.helpers import run_starved


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


def generated_site(home: Path, project: Path) -> tuple[DiskSite, Path]:
    """The site of a wiki a generate run wrote into ``project``, and its version's folder."""
    session = start("generate", "-y", speed=0, home=home, project=project)
    session.wait_done()
    session.close()
    version_id = (project / ".zread/wiki/current").read_text().removeprefix("versions/")
    site = DiskSite.open(project, version_id)
    assert site is not None
    return site, project / ".zread/wiki/versions" / version_id


def test_a_refused_page_is_named_once_with_why(
    home: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, pages = generated_site(home, project)
    assert len(site.pages) >= 4
    files = [pages / page.file for page in site.pages[:4]]
    (tmp_path / "elsewhere.md").write_text("planted")
    files[0].unlink()
    files[0].symlink_to(tmp_path / "elsewhere.md")
    files[1].unlink()
    files[2].unlink()
    files[2].mkdir()
    files[3].write_bytes(b"\xff\xfe not UTF-8")
    for _ in range(2):  # asked again: no second line
        assert [site.markdown(page.slug) for page in site.pages[:4]] == [None] * 4
    assert capsys.readouterr().err.splitlines() == [
        f"zread-sim: browse: {files[0]}: not served: a link",
        f"zread-sim: browse: {files[1]}: not served: missing",
        f"zread-sim: browse: {files[2]}: not served: not a regular file",
        f"zread-sim: browse: {files[3]}: not served: not UTF-8",
    ]


def test_a_page_behind_a_linked_version_is_refused(
    home: Path, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, version = generated_site(home, project)
    version.rename(tmp_path / "moved")
    version.symlink_to(tmp_path / "moved")
    assert site.markdown(site.pages[0].slug) is None
    assert capsys.readouterr().err == (
        f"zread-sim: browse: {version / site.pages[0].file}: not served: reached through a link\n"
    )


def test_out_of_descriptors_a_version_is_not_taken_for_missing(home: Path, project: Path) -> None:
    _, folder = generated_site(home, project)
    done = run_starved(
        "from pathlib import Path\nfrom simulator.hosts.disksite import DiskSite",
        "try:\n"
        f"    print(DiskSite.open(Path({str(project)!r}), {folder.name!r}))\n"
        "except OSError as err:\n"
        "    print('raised', err.errno)\n",
        spare=1,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"raised {errno.EMFILE}\n"  # not None: the drawn wiki stands in


def test_out_of_descriptors_a_page_is_no_refusal_line(home: Path, project: Path) -> None:
    site, folder = generated_site(home, project)
    slug = site.pages[0].slug
    done = run_starved(
        "from pathlib import Path\nfrom simulator.hosts.disksite import DiskSite\n"
        f"site = DiskSite.open(Path({str(project)!r}), {folder.name!r})",
        "try:\n"
        f"    print(site.markdown({slug!r}))\n"
        "except OSError as err:\n"
        "    print('raised', err.errno)\n",
        spare=0,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"raised {errno.EMFILE}\n"  # the server answers 500
    assert done.stderr == ""  # no "not served: ..." line: the page is fine
