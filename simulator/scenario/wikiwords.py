"""The words a simulated wiki is drawn from, in English and Chinese.

Owns: the languages a wiki may be written in (:data:`LANGUAGES`; :func:`wiki_language`
names the one a config's ``language`` asks for) and, for each, the
vocabulary :mod:`simulator.scenario.wiki` draws from: the topics of a code wiki's pages
with their tier and group (:data:`TOPICS`, :data:`OVERVIEW`), the patterns and nouns
that name more pages than there are topics, the names of groups and sections, and the
sentences, headings and labels of a page's markdown (:data:`TEXT`). Every entry is
written in both languages, a Chinese one being a translation of the English one, so
the English and the Chinese wiki of one seed are translations of each other.

Must not: draw, hold state or do I/O: it is data (the drawing is
:mod:`simulator.scenario.wiki`'s).
"""

from __future__ import annotations

from typing import Final, Literal

Language = Literal["en", "zh"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
"""The languages a wiki may be written in (wiki.json's ``language``)."""


def wiki_language(config_language: str) -> Language:
    """The wiki's language for a config ``language``: ``zh`` (``zh``, ``zh-CN``,
    ``zh_TW``...) or ``en`` (anything else)."""
    return "zh" if config_language.strip().lower().startswith("zh") else "en"


# -- the catalog ---------------------------------------------------------------------------

OVERVIEW: Final = ("Overview", "项目概览")
"""The title of the first page of every drawn catalog."""

# A topic: (English title, Chinese title, tier, group). Tier 0 is the Beginner section,
# 1 the Intermediate one, 2 the Advanced one; the group is a key of GROUPS ("": none).
TOPICS: tuple[tuple[str, str, int, str], ...] = (
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
# A pattern names a page once the topics are used up: (English, Chinese), {Noun} one of
# NOUNS: (English, Chinese, the group of the page it names).
PATTERNS: tuple[tuple[str, str], ...] = (
    ("The {Noun} Module", "{Noun}模块"),
    ("{Noun} Service", "{Noun}服务"),
    ("How {Noun}s Are Resolved", "{Noun}的解析流程"),
    ("{Noun} Pipeline", "{Noun}处理管线"),
    ("Working with {Noun}s", "使用{Noun}"),
    ("{Noun} Internals", "{Noun}内部实现"),
)
NOUNS: tuple[tuple[str, str, str], ...] = (
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
GROUPS: dict[str, tuple[str, str]] = {
    "arch": ("Architecture", "架构设计"),
    "net": ("Networking", "网络通信"),
    "data": ("Data and Storage", "数据与存储"),
    "runtime": ("Runtime", "运行机制"),
    "ext": ("Extensibility", "扩展机制"),
    "ops": ("Operations", "运维部署"),
}
"""A group's key, and its (English, Chinese) name."""

SECTIONS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("Getting Started", "入门指南"), ("Introduction", "快速入门")),
    (("Core Architecture", "核心框架"), ("Deep Dive", "深入解析"), ("Core Concepts", "核心概念")),
    (("Advanced Topics", "进阶主题"), ("Operations and Tuning", "高级特性")),
)
"""For each tier, the (English, Chinese) names its section may have."""

# -- a page's markdown ---------------------------------------------------------------------
# The markdown vocabulary: {title} is the page's title, {file} a cited file, {link} a
# link to another page. A sentence with {file} is used only when the page cites files.
TEXT: dict[Language, dict[str, tuple[str, ...]]] = {
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
