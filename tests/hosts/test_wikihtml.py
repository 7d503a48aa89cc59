"""Tests for simulator.hosts.wikihtml: the HTML of the index, of a page, of the 404
page, and a page's markdown rendered; no server involved (tests/hosts/test_wikiserver.py
reads the same pages over HTTP)."""

from __future__ import annotations

import re

from simulator.hosts.wikihtml import NOT_FOUND, index_html, page_html, page_path, render_markdown

from .test_wikiserver import Entry

entry = Entry


def test_a_page_path_is_its_slug_quoted_whole() -> None:
    assert page_path("1-overview") == "/1-overview"
    assert page_path("a/b c?d#e") == "/a%2Fb%20c%3Fd%23e"
    assert page_path("项目") == "/%E9%A1%B9%E7%9B%AE"


def test_markdown_is_rendered_safely() -> None:
    text = render_markdown(
        '<script>alert(1)</script>\n\n<b onclick="x">b</b> [js](javascript:alert(1)) '
        "[data](data:text/html,hi) [up](../../etc/passwd) ![img](x.png)\n",
        {"1-a"},
    )
    assert "<script>" not in text and "<b " not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert 'href="javascript:' not in text and 'href="data:' not in text
    assert '<a class="source" title="../../etc/passwd">up</a>' in text


def test_links_to_pages_tolerate_a_dot_md_and_a_leading_dot_slash() -> None:
    text = render_markdown(
        "[a](1-a) [b](1-a.md) [c](./1-a) [d](/1-a) [e](#here) [f](2-b)\n", {"1-a"}
    )
    assert text.count('href="/1-a"') == 4
    assert 'href="#here"' in text
    assert '<a class="source" title="2-b">f</a>' in text


def test_the_index_heads_each_section_and_group_where_it_changes() -> None:
    pages = (
        entry("1-a", "A", "One", "", "Beginner"),
        entry("2-b", "B", "One", "G"),
        entry("3-c", "C", "Two", "G"),
        entry("4-d", "D", "One"),
    )
    text = index_html("acme/<w>", "v-1", pages)
    assert "<title>acme/&lt;w&gt; wiki</title>" in text
    assert "<h1>acme/&lt;w&gt;</h1>" in text
    assert '<p class="version">Version <code>v-1</code></p>' in text
    assert re.findall(r"<h2>([^<]*)</h2>", text) == ["One", "Two", "One"]
    assert re.findall(r"<h3>([^<]*)</h3>", text) == ["G", "G"]
    assert re.findall(r'href="/([^"]+)"', text) == ["1-a", "2-b", "3-c", "4-d"]
    assert '<span class="level">Beginner</span>' in text
    assert text.count("<ul>") == text.count("</ul>") == 4
    assert text.count("<section>") == text.count("</section>") == 3


def test_an_empty_index_says_so() -> None:
    text = index_html("p", "v", ())
    assert "<p>This wiki has no pages.</p>" in text
    assert "<section>" not in text


def test_a_page_has_its_place_in_the_wiki_escaped() -> None:
    page = entry("3-x", 'T <b>&"q"</b>', "Core", "Storage", "Advanced")
    text = page_html("acme/w", "v-2", page, "<p>body</p>\n")
    assert "<h1>T &lt;b&gt;&amp;&quot;q&quot;&lt;/b&gt;</h1>" in text
    assert '<p class="about">Core / Storage · Advanced</p>' in text
    assert "<p>body</p>" in text
    assert "version <code>v-2</code>" in text
    assert "<b>" not in text
    bare = page_html("acme/w", "v-2", entry("1-a", "A"), "")
    assert 'class="about"' not in bare


def test_the_not_found_page_links_the_index() -> None:
    assert b"<h1>Not found</h1>" in NOT_FOUND
    assert b'<a href="/">' in NOT_FOUND
