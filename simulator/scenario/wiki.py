"""The simulated wiki: its catalog, slugs, page markdown, version ids and dates, from the seed.

Owns: drawing a code wiki that reads like one ("Architecture Overview", "Request
Lifecycle", ... or, in Chinese, "项目概览", "Protobuf协议集成", ...), the same for a
given seed, project, version and language whichever command asks, so generate's
catalog is the one browse serves; the pages a scenario lists by hand
(``[[world.project.pages]]``); each page's slug (zread's: ``<n>-`` and the slugified
title, which the vm's ``tasks[].slug``, the page file and wiki.json all use); the
markdown of a page as zread writes it; and the ids and dates of the scenario's earlier
wikis. Slugs and version ids are :mod:`simulator.formats.ids`' (re-exported here).

The wiki's language is the config's ``language`` (:func:`wiki_language`: ``zh...`` is
Chinese, anything else English), as zread takes it from ``config.yaml``. A Chinese
wiki has Chinese titles; its section and group names are Chinese too, except in about
one wiki in three (drawn), where they are English, as zread's often are.

Page bodies for the browse server (:func:`page_body`) come from faker, seeded, with a
small provider of code-wiki vocabulary. faker costs ~150 ms to import and ~15 MB, so
only those bodies use it, imported on the first draw; one instance is kept per process,
re-seeded before every use so no draw depends on an earlier one. Everything else
(titles, markdown, ids, dates) comes from ``random`` seeded the same way, from
vocabularies written here in both languages (faker's sentences are English only).
Catalogs and bodies are cached: thousands of sessions with one seed draw the wiki once.

Must not: do I/O or read the clock (dates are drawn, never "now").
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from simulator.formats.ids import LEVELS, slug, version_id
from simulator.scenario.world import PageSpec

if TYPE_CHECKING:
    from simulator.scenario.world import World

__all__ = [
    "LANGUAGES",
    "Language",
    "Page",
    "Version",
    "catalog",
    "page_body",
    "page_markdown",
    "slug",
    "version_id",
    "versions",
    "wiki_language",
    "world_catalog",
]

Language = Literal["en", "zh"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
"""The languages a wiki may be written in (wiki.json's ``language``)."""

# -- vocabulary ----------------------------------------------------------------------------
# A topic: (English title, Chinese title, tier, group). Tier 0 is the Beginner section,
# 1 the Intermediate one, 2 the Advanced one; the group is a key of _GROUPS ("": none).

_OVERVIEW = ("Overview", "项目概览")
_TOPICS: tuple[tuple[str, str, int, str], ...] = (
    ("Quick Start", "快速开始", 0, ""),
    ("Getting Started", "上手指南", 0, ""),
    ("Installation", "安装与环境配置", 0, ""),
    ("Project Structure", "项目结构", 0, ""),
    ("Configuration", "配置说明", 0, ""),
    ("Command-Line Interface", "命令行界面（CLI）", 0, ""),
    ("Glossary", "术语表", 0, ""),
    ("Contributing", "贡献指南", 0, ""),
    ("Architecture Overview", "架构总览", 1, "arch"),
    ("API Reference", "API参考", 1, "arch"),
    ("Request Lifecycle", "请求生命周期", 1, "net"),
    ("HTTP Routing", "HTTP路由设计", 1, "net"),
    ("Protobuf Integration", "Protobuf协议集成", 1, "net"),
    ("Authentication", "身份认证与鉴权", 1, "net"),
    ("Data Model", "数据模型", 1, "data"),
    ("Storage Backends", "存储后端", 1, "data"),
    ("Caching Layer", "Redis缓存层", 1, "data"),
    ("Database Migrations", "数据库迁移", 1, "data"),
    ("Error Handling", "错误处理", 1, "runtime"),
    ("Concurrency Model", "并发模型", 1, "runtime"),
    ("Event Bus", "事件总线", 1, "runtime"),
    ("Scheduler", "任务调度器", 1, "runtime"),
    ("Plugin System", "插件系统", 1, "ext"),
    ("UI Framework Design", "UI框架设计（Ctrl/Handler/Panel/Template）", 1, "ext"),
    ("Internationalization", "国际化（i18n）", 1, "ext"),
    ("Logging and Observability", "日志与可观测性", 2, "ops"),
    ("Build and Release", "构建与发布", 2, "ops"),
    ("Deployment", "Docker部署", 2, "ops"),
    ("Testing Strategy", "测试策略", 2, ""),
    ("Security Model", "安全模型", 2, ""),
    ("Performance Tuning", "性能调优", 2, ""),
    ("Troubleshooting", "故障排查", 2, ""),
)
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("The {Noun} Module", "{Noun}模块"),
    ("{Noun} Service", "{Noun}服务"),
    ("How {Noun}s Are Resolved", "{Noun}的解析流程"),
    ("{Noun} Pipeline", "{Noun}处理管线"),
    ("Working with {Noun}s", "使用{Noun}"),
    ("{Noun} Internals", "{Noun}内部实现"),
)
_NOUNS: tuple[tuple[str, str, str], ...] = (
    ("Router", "路由器", "net"),
    ("Parser", "解析器", "data"),
    ("Session", "会话", "net"),
    ("Worker", "工作线程", "runtime"),
    ("Index", "索引", "data"),
    ("Renderer", "渲染器", "ext"),
    ("Adapter", "适配器", "ext"),
    ("Registry", "注册中心", "arch"),
    ("Transport", "传输层", "net"),
    ("Queue", "消息队列", "runtime"),
    ("Manifest", "清单文件", "arch"),
    ("Resolver", "依赖解析器", "arch"),
    ("Snapshot", "快照", "data"),
    ("Gateway", "网关", "net"),
    ("Codec", "编解码器", "net"),
)
_GROUPS: dict[str, tuple[str, str]] = {
    "arch": ("Architecture", "架构设计"),
    "net": ("Networking", "网络通信"),
    "data": ("Data and Storage", "数据与存储"),
    "runtime": ("Runtime", "运行机制"),
    "ext": ("Extensibility", "扩展机制"),
    "ops": ("Operations", "运维部署"),
}
_SECTIONS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("Getting Started", "入门指南"), ("Introduction", "快速入门")),
    (("Core Architecture", "核心框架"), ("Deep Dive", "深入解析"), ("Core Concepts", "核心概念")),
    (("Advanced Topics", "进阶主题"), ("Operations and Tuning", "高级特性")),
)


class Page(msgspec.Struct, frozen=True, gc=False):  # strings and ints: no cycles
    """One catalog entry: a page of the wiki, as wiki.json lists it.

    ``id`` is the 1-based catalog order (the ``n`` of the slug), ``group`` is ``""``
    when the page has none, ``level`` one of ``Beginner``, ``Intermediate``,
    ``Advanced``.
    """

    id: int
    title: str
    slug: str
    section: str = ""
    group: str = ""
    level: str = "Beginner"


class Version(msgspec.Struct, frozen=True, gc=False):
    """A wiki version as browse lists it."""

    id: str
    timestamp: str
    is_current: bool


_FAKER_LOCK = threading.Lock()
"""Held while the shared faker instance is seeded and drawn from: the browse server
draws page bodies from its own threads."""


@functools.cache
def _faker() -> Any:
    from faker import Faker

    return Faker("en_US")


def _rng(seed: int, *parts: object) -> random.Random:
    return random.Random(":".join(map(str, ("zread-sim", seed, "wiki", *parts))))


# -- slugs, ids, language ------------------------------------------------------------------


def wiki_language(config_language: str) -> Language:
    """The wiki's language for a config ``language``: ``zh`` (``zh``, ``zh-CN``,
    ``zh_TW``...) or ``en`` (anything else)."""
    return "zh" if config_language.strip().lower().startswith("zh") else "en"


# -- the catalog ---------------------------------------------------------------------------


def catalog(
    seed: int,
    project: str,
    pages: int | Sequence[PageSpec],
    version: int = 0,
    language: Language = "en",
) -> tuple[Page, ...]:
    """The pages of ``project``'s wiki, ids 1..N in catalog order.

    ``pages`` is a count (titles drawn from the seed, ``Overview`` first, the Beginner
    section, then the Intermediate one with its pages by group, then the Advanced one)
    or the pages themselves (a section or level left empty is filled in by position).
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    return _catalog(
        seed, project, pages if isinstance(pages, int) else tuple(pages), version, language
    )


def world_catalog(world: World, seed: int, version: int = 0) -> tuple[Page, ...]:
    """The catalog of ``world``'s project, in the language of its config."""
    project = world.project
    return catalog(seed, project.name, project.pages, version, wiki_language(world.config.language))


@functools.lru_cache(maxsize=256)
def _catalog(
    seed: int, project: str, pages: int | tuple[PageSpec, ...], version: int, language: Language
) -> tuple[Page, ...]:
    rng = _rng(seed, project, version)
    # Whether a Chinese wiki names its sections in English is the wiki's draw, and the
    # section names themselves: drawn before anything else, so every catalog of one
    # seed, project and version agrees on them whatever its size.
    english_sections = rng.random() < 1 / 3
    section_choice = [rng.randrange(len(options)) for options in _SECTIONS]
    group_order = list(_GROUPS)
    rng.shuffle(group_order)
    lang = 0 if language == "en" or english_sections else 1

    def section(tier: int) -> str:
        return _SECTIONS[tier][section_choice[tier]][lang]

    def group(key: str) -> str:
        return _GROUPS[key][lang] if key else ""

    if not isinstance(pages, int):
        count = len(pages)
        return tuple(_listed_page(n, spec, count, section) for n, spec in enumerate(pages, start=1))
    # (title, tier, group key) of each page, drawn in a language-free way so the English
    # and the Chinese catalog of one seed are translations of each other.
    text = 0 if language == "en" else 1
    chosen: list[tuple[str, int, str]] = [(_OVERVIEW[text], 0, "")] if pages else []
    topics = list(_TOPICS)
    rng.shuffle(topics)
    for en, zh, tier, key in topics:
        if len(chosen) == pages:
            break
        chosen.append((zh if text else en, tier, key))
    seen: set[tuple[int, int]] = set()
    while len(chosen) < pages:
        pattern, noun = rng.randrange(len(_PATTERNS)), rng.randrange(len(_NOUNS))
        title = _PATTERNS[pattern][text].format(Noun=_NOUNS[noun][text])
        if (pattern, noun) in seen:
            title = f"{title} {len(chosen) + 1}"
        seen.add((pattern, noun))
        chosen.append((sys.intern(title), 1, _NOUNS[noun][2]))
    rank = {key: i + 1 for i, key in enumerate(group_order)}
    ordered = sorted(chosen, key=lambda c: (c[1], rank.get(c[2], 0)))
    sections = [section(tier) for tier in range(len(_SECTIONS))]
    groups = {key: group(key) for key in ("", *_GROUPS)}
    # Titles and slugs are interned: the catalogs of thousands of sessions (a load test)
    # hold the same few thousand, ~5 KB a 50-page catalog.
    return tuple(
        Page(n, title, sys.intern(slug(n, title)), sections[tier], groups[key], LEVELS[tier])
        for n, (title, tier, key) in enumerate(ordered, start=1)
    )


def _listed_page(n: int, spec: PageSpec, count: int, section: Callable[[int], str]) -> Page:
    """A page a scenario listed; its tier, when it gives no level, from its position."""
    if spec.level:
        tier = LEVELS.index(spec.level)
    elif n == 1 or n <= count // 4:
        tier = 0
    elif n > count - count // 5:
        tier = 2
    else:
        tier = 1
    return Page(
        n, spec.title, slug(n, spec.title), spec.section or section(tier), spec.group, LEVELS[tier]
    )


# -- page text -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def page_body(seed: int, project: str, page: Page, version: int = 0) -> tuple[str, ...]:
    """The paragraphs of a page, drawn from the seed (plain text, not markup)."""
    fake = _faker()
    with _FAKER_LOCK:
        fake.seed_instance(_rng(seed, project, version, page.id).getrandbits(64))
        module = re.sub(r"^\d+-", "", page.slug).replace("-", "_") or "core"
        paragraphs = [
            f"This page describes {page.title.lower()} in {project}. "
            + " ".join(fake.sentences(nb=3)),
            f"The code lives in `src/{module}/` and is exercised by `tests/test_{module}.py`. "
            + fake.paragraph(nb_sentences=4),
            fake.paragraph(nb_sentences=5),
        ]
    return tuple(paragraphs)


_CITABLE = re.compile(r"[^\s()\[\]<>#%\\`\"]+")
"""A path a markdown link can carry as it is: a reader takes the path between ``(`` and
``#`` literally, so nothing that would need escaping is cited."""

# The markdown vocabulary: {title} is the page's title, {file} a cited file, {link} a
# link to another page. A sentence with {file} is used only when the page cites files.
_TEXT: dict[Language, dict[str, tuple[str, ...]]] = {
    "en": {
        "intro": (
            "This page explains {title} in this repository: what it is for, where it "
            "lives in the code and how the rest of the project relies on it.",
            "{title} is one of the pieces a newcomer meets first. This page walks "
            "through its responsibilities, its main types and the decisions behind them.",
            "This page describes {title}: the problem it solves, the modules that "
            "implement it and the conventions its code follows.",
        ),
        "headings": (
            "Purpose and Scope",
            "How It Works",
            "Key Components",
            "Data Flow",
            "Configuration",
            "Error Handling",
            "Extension Points",
            "Design Decisions",
        ),
        "sentences": (
            "The implementation keeps each step small, so a change in one place rarely "
            "ripples into another.",
            "Inputs are validated once, at the boundary, and the inner code trusts them.",
            "State that outlives a single call is kept in one place and passed explicitly.",
            "Errors are returned to the caller with enough context to act on them.",
            "Defaults are chosen so the common case needs no configuration at all.",
            "The public surface is deliberately narrow; helpers stay private to their module.",
            "Tests exercise the same entry points that callers use, not the internals.",
            "Where performance matters, the code favours predictable work over clever tricks.",
            "The entry point is `{file}`, which wires the pieces together.",
            "Most of the logic is in `{file}`; read it top to bottom for the full picture.",
            "`{file}` defines the types the rest of this page refers to.",
        ),
        "see": ("See {link} for the details.", "{link} builds on what is described here."),
        "diagram": ("The diagram below shows how the parts fit together.",),
        "related": ("Related Pages",),
        "nodes": ("Caller", "Entry point", "Core logic", "Storage", "Result"),
    },
    "zh": {
        "intro": (
            "本页介绍本项目中的{title}：它的用途、在代码中的位置，以及项目其他部分如何依赖它。",
            "{title}是新成员最先接触的部分之一。本页梳理它的职责、主要类型以及背后的设计考量。",
            "本页说明{title}：它要解决的问题、实现它的模块，以及相关代码遵循的约定。",
        ),
        "headings": (
            "目的与范围",
            "工作原理",
            "核心组件",
            "数据流",
            "配置方式",
            "错误处理",
            "扩展点",
            "设计决策",
        ),
        "sentences": (
            "实现中每一步都保持简短，因此一处的修改很少波及其他地方。",
            "输入只在边界处校验一次，内部代码直接信任这些数据。",
            "跨越单次调用的状态集中保存在一处，并通过参数显式传递。",
            "错误连同足够的上下文一起返回给调用方，便于调用方处理。",
            "默认值经过挑选，常见场景无需任何额外配置。",
            "公开接口刻意保持精简，辅助函数只在各自模块内部使用。",
            "测试覆盖的是调用方实际使用的入口，而不是内部细节。",
            "在性能敏感的地方，代码更看重可预期的开销，而不是取巧的写法。",
            "入口位于 `{file}`，由它把各个部分组装起来。",
            "主要逻辑集中在 `{file}` 中，从头到尾阅读即可了解全貌。",
            "`{file}` 定义了本页提到的各个类型。",
        ),
        "see": ("详见{link}。", "{link}在本页内容的基础上进一步展开。"),
        "diagram": ("下图展示了各部分之间的协作关系。",),
        "related": ("相关页面",),
        "nodes": ("调用方", "入口", "核心逻辑", "存储", "结果"),
    },
}


def page_markdown(
    page: Page,
    *,
    language: Language,
    seed: int,
    others: Sequence[tuple[str, str]],
    sources: Sequence[tuple[str, int]],
) -> str:
    """The markdown of ``page`` as zread writes it into ``<slug>.md``.

    No leading ``# `` heading: a paragraph, then ``## `` sections, a mermaid block in
    most pages (every page above Beginner), links to other pages as ``[Title](slug)``
    (``others`` are ``(title, slug)``; the page's own slug is never linked) and
    ``Sources: [path](path#L<a>-L<b>)`` lines citing files of ``sources``
    (``(relative path, line count)``) with ``1 <= a <= b <= line count``. A source that
    cannot be cited is left out: an empty file, an absolute path, one with a ``..``
    part, or one with a character a markdown link or code span would need escaped
    (white space, parentheses, brackets, ``<>``, ``#``, ``%``, backslash, backtick,
    double quote). No sources, no ``Sources:`` lines. The same arguments give the
    same text; ``language`` picks English or Chinese.
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
    words = _TEXT[language]
    rng = random.Random(f"zread-sim:{seed}:markdown:{language}:{page.id}:{page.slug}")
    citable = _citable_sources(tuple(sources))

    def pick_links(count: int) -> list[tuple[str, str]]:
        """Up to ``count`` of ``others`` but the page itself, in their order (sampled
        by index: a wiki of thousands of pages is not copied for every page)."""
        picked = rng.sample(range(len(others)), min(len(others), count + 1))
        chosen = [i for i in picked if others[i][1] != page.slug][:count]
        return [others[i] for i in sorted(chosen)]

    def cite() -> list[tuple[str, int, int]]:
        if not citable:
            return []
        picked = rng.sample(range(len(citable)), min(len(citable), rng.randint(1, 2)))
        cited = []
        for index in sorted(picked):
            path, lines = citable[index]
            start = 1 if rng.random() < 0.4 else rng.randint(1, lines)
            end = min(lines, start + rng.randint(4, 80))
            cited.append((path, start, end))
        return cited

    plain = [s for s in words["sentences"] if "{file}" not in s]
    unused: list[str] = []

    def paragraph(cited: list[tuple[str, int, int]]) -> str:
        # Sentences are drawn without replacement across the page, so none repeats
        # before all have been used.
        chosen: list[str] = []
        for _ in range(rng.randint(2, 3)):
            if not unused:
                unused.extend(rng.sample(plain, len(plain)))
            chosen.append(unused.pop())
        if cited:
            with_file = [s for s in words["sentences"] if "{file}" in s]
            chosen.insert(rng.randrange(len(chosen) + 1), rng.choice(with_file))
        sep = "" if language == "zh" else " "
        return sep.join(s.format(file=cited[0][0]) if "{file}" in s else s for s in chosen)

    def sources_line(cited: list[tuple[str, int, int]]) -> str:
        return "Sources: " + ", ".join(f"[{p}]({p}#L{a}-L{b})" for p, a, b in cited)

    blocks = [rng.choice(words["intro"]).format(title=page.title)]
    headings = rng.sample(words["headings"], rng.randint(2, 4))
    diagram_at = (
        rng.randrange(len(headings)) if page.level != "Beginner" or rng.random() < 0.6 else None
    )
    for index, heading in enumerate(headings):
        blocks.append(f"## {heading}")
        cited = cite()
        text = paragraph(cited)
        see = pick_links(1) if rng.random() < 0.5 else []
        for link_title, target in see:
            sep = "" if language == "zh" else " "
            text += sep + rng.choice(words["see"]).format(link=f"[{link_title}]({target})")
        blocks.append(text)
        if index == diagram_at:
            blocks.append(words["diagram"][0])
            blocks.append(_mermaid(rng, words["nodes"], page.title, cited))
        if cited:
            blocks.append(sources_line(cited))
    related = pick_links(3)
    if related:
        blocks.append(f"## {words['related'][0]}")
        blocks.append("\n".join(f"- [{title}]({target})" for title, target in related))
    return "\n\n".join(blocks) + "\n"


@functools.lru_cache(maxsize=16)
def _citable_sources(sources: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The sources a page may cite (kept: every page of a wiki is given the same list)."""
    return tuple(
        (path, lines)
        for path, lines in sources
        if lines >= 1
        and _CITABLE.fullmatch(path) is not None
        and not path.startswith("/")
        and ".." not in path.split("/")
    )


def _mermaid(
    rng: random.Random, nodes: tuple[str, ...], title: str, cited: list[tuple[str, int, int]]
) -> str:
    """A small flowchart: the page's subject between a caller and a result, with the
    files cited nearby as its parts."""
    labels = [nodes[0], title, *(path.rsplit("/", 1)[-1] for path, _, _ in cited)]
    labels += [*nodes[2 : 2 + max(0, 4 - len(labels))], nodes[-1]]
    quoted = [label.replace('"', "#quot;") for label in labels]
    direction = rng.choice(("TD", "LR"))
    lines = [f"```mermaid\nflowchart {direction}"]
    lines += [f'    N{i}["{label}"]' for i, label in enumerate(quoted)]
    lines += [f"    N{i} --> N{i + 1}" for i in range(len(quoted) - 1)]
    return "\n".join(lines) + "\n```"


# -- versions ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _drawn_versions(seed: int, count: int) -> tuple[tuple[str, str], ...]:
    """Ids and dates of ``count`` versions, drawn with ``random`` (faker is not needed).

    The ids are zread's (``YYYY-MM-DD-HHMMSS``, here of the UTC date), a second later
    when two draws fall on the same second, so they stay unique."""
    rng = _rng(seed, "versions")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    stamps = sorted(start + dt.timedelta(seconds=rng.randrange(300 * 86400)) for _ in range(count))
    drawn: list[tuple[str, str]] = []
    for i, stamp in enumerate(stamps):
        if i and stamp <= stamps[i - 1]:
            stamps[i] = stamp = stamps[i - 1] + dt.timedelta(seconds=1)
        drawn.append((version_id(stamp), stamp.strftime("%Y-%m-%dT%H:%M:%SZ")))
    return tuple(drawn)


def versions(world: World, seed: int) -> tuple[Version, ...]:
    """The world's wiki versions, oldest first, with drawn ids and dates where empty."""
    drawn = _drawn_versions(seed, len(world.wikis))
    listed = [
        Version(wiki.id or drawn_id, wiki.timestamp or drawn_stamp, wiki.current)
        for wiki, (drawn_id, drawn_stamp) in zip(world.wikis, drawn, strict=True)
    ]
    return tuple(sorted(listed, key=lambda v: v.timestamp))
