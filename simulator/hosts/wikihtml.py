"""The HTML of the wiki server: the index, each page, the 404 page.

Owns: :func:`render_markdown`, a page's markdown as HTML (CommonMark with tables, by
markdown-it-py, imported at the first render: raw HTML escaped, links to pages pointed
at their paths, other relative links kept as text, mermaid blocks as
``<pre class="mermaid">``; a page longer than :data:`RENDERED_MAX` is shown as its
text in a ``<pre>``, since markdown-it is pure Python and takes seconds on some long
inputs, ~10 µs a character for a run of ``[``); :func:`index_html` and
:func:`page_html`, the documents around it; :data:`NOT_FOUND`; and :func:`page_path`,
where a page is served.

Must not: read a file, serve anything, or link to a file of the project (the server
serves none).
"""

from __future__ import annotations

import functools
import html
from typing import TYPE_CHECKING, Final
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    from collections.abc import Sequence, Set

    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

    from simulator.formats.wiki import WikiPage as SitePage


def page_path(slug: str) -> str:
    """The path a page is served at."""
    return "/" + quote(slug, safe="")


# -- markdown ----------------------------------------------------------------------


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """Links to pages go to ``/<slug>``; other relative targets (source citations such
    as ``src/app.py#L1-L9``) keep their text, with the target as a title, and no href:
    the server serves no file of the project."""
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    parts = urlsplit(href)
    if href and not (parts.scheme or parts.netloc or href.startswith(("/", "#"))):
        target = unquote(parts.path).removeprefix("./").removesuffix(".md")
        slugs: Set[str] = env["slugs"]
        if target in slugs:
            fragment = f"#{parts.fragment}" if parts.fragment else ""
            token.attrSet("href", page_path(target) + fragment)
        else:
            token.attrs.pop("href", None)
            token.attrSet("class", "source")
            token.attrSet("title", href)
    return renderer.renderToken(tokens, idx, options, env)


def _is_mermaid(token: Token) -> bool:
    return token.info.strip().split(maxsplit=1)[:1] == ["mermaid"]


@functools.cache
def _markdown_it() -> MarkdownIt:
    """One parser for the process (markdown-it keeps no state between renders)."""
    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    assert isinstance(md.renderer, RendererHTML)
    default_fence = md.renderer.rules["fence"]

    def fence(
        renderer: RendererHTML,
        tokens: Sequence[Token],
        idx: int,
        options: OptionsDict,
        env: EnvType,
    ) -> str:
        # A mermaid block stays its text, in <pre class="mermaid">; others as usual.
        if _is_mermaid(tokens[idx]):
            return f'<pre class="mermaid">{_esc(tokens[idx].content)}</pre>\n'
        return str(default_fence(tokens, idx, options, env))

    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("fence", fence)
    return md


RENDERED_MAX: Final = 256 << 10
"""The longest markdown, in characters, rendered as markdown (zread's pages are tens of
KiB); a longer page is shown as its text."""


def render_markdown(text: str, slugs: Set[str]) -> str:
    """``text`` (a page's markdown) as HTML: raw HTML is escaped, links to a slug of
    ``slugs`` point at its page, fenced code and mermaid blocks are ``<pre>``; past
    :data:`RENDERED_MAX` characters, the text itself, escaped, in a ``<pre>``."""
    if len(text) > RENDERED_MAX:
        return (
            f'<p class="note">This page is longer than {RENDERED_MAX >> 10} Ki characters: '
            "its markdown is shown as it is.</p>\n"
            f'<pre class="markdown">{_esc(text)}</pre>\n'
        )
    return str(_markdown_it().render(text, {"slugs": slugs}))


# -- the pages ---------------------------------------------------------------------


def _document(title: str, main: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_esc(title)}</title>\n</head>\n<body>\n{main}</body>\n</html>\n"
    )


def _entry(page: SitePage) -> str:
    level = f' <span class="level">{_esc(page.level)}</span>' if page.level else ""
    return f'<li><a href="{_esc(page_path(page.slug))}">{_esc(page.title)}</a>{level}</li>\n'


def index_html(project: str, version: str, pages: Sequence[SitePage]) -> str:
    """Every page in order; a heading wherever the section (or the group) changes."""
    parts: list[str] = []
    section: str | None = None
    group: str | None = None
    for page in pages:
        if page.section != section or page.group != group:
            if section is not None:
                parts.append("</ul>\n")
            if page.section != section:
                if section is not None:
                    parts.append("</section>\n")
                parts.append(f"<section>\n<h2>{_esc(page.section or 'Pages')}</h2>\n")
                section = page.section
            if page.group:
                parts.append(f"<h3>{_esc(page.group)}</h3>\n")
            group = page.group
            parts.append("<ul>\n")
        parts.append(_entry(page))
    if section is not None:
        parts.append("</ul>\n</section>\n")
    listing = "".join(parts) or "<p>This wiki has no pages.</p>\n"
    main = (
        f"<main>\n<h1>{_esc(project)}</h1>\n"
        f'<p class="version">Version <code>{_esc(version)}</code></p>\n'
        f"<nav>\n{listing}</nav>\n</main>\n"
    )
    return _document(f"{project} wiki", main)


def page_html(project: str, version: str, page: SitePage, body: str) -> str:
    """One page: its title, where it sits in the wiki, ``body`` (its rendered markdown)."""
    about = " / ".join(_esc(part) for part in (page.section, page.group) if part)
    if page.level:
        about = f"{about} · {_esc(page.level)}" if about else _esc(page.level)
    main = (
        f'<nav><a href="/">{_esc(project)}</a> / {_esc(page.title)}</nav>\n'
        f"<main>\n<article>\n<h1>{_esc(page.title)}</h1>\n"
        + (f'<p class="about">{about}</p>\n' if about else "")
        + body
        + "</article>\n</main>\n"
        f'<footer><a href="/">Index</a> · version <code>{_esc(version)}</code></footer>\n'
    )
    return _document(f"{page.title} - {project}", main)


NOT_FOUND: Final = _document(
    "404 Not Found", '<main>\n<h1>Not found</h1>\n<p><a href="/">The index</a></p>\n</main>\n'
).encode()
