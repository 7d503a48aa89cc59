"""zread's files: where they are and their exact bytes.

Owns: the paths of zread's files on the user's side (``$HOME/.zread/``: ``config.yaml``,
``login.json``, ``log/zread.log``) and the project's (``<project>/.zread/wiki/``:
``current``, ``versions/<id>/``, ``drafts/``); encoding and decoding each of them as
zread does (the ``current`` pointer, ``wiki.json``, ``config.yaml``, ``login.json``);
version ids and Go's timestamps; and the small helpers that make writing them safe
when many processes share one HOME or one project: :func:`write_atomic` (a temporary
file in the same directory, fsync, rename), :func:`locked` (an exclusive ``flock`` on
a lock file) and :func:`append_log`.

Must not: decide what to write or when (that is the store built on this module), read
the scenario, or touch anything outside the paths it is given. Everything but the
three writing helpers (and the clock :func:`encode_login` reads when given no time) is
pure.

Choices where zread's own format is not known, or where zread is written in Go and
Python libraries differ:

- ``wiki.json`` is written as Go's ``json.MarshalIndent(v, "", "  ")`` writes it (the
  missing trailing newline says zread uses it): msgspec encodes and indents, then the
  characters Go escapes and msgspec does not (``<``, ``>``, ``&``, U+2028, U+2029) are
  escaped the way Go does. They can only occur inside strings, so escaping them in the
  whole document is safe. Everything else msgspec writes as Go does (non-ASCII raw,
  ``\\b \\f \\n \\r \\t``, other control characters as ``\\u00xx``).
- ``config.yaml`` is written as Go's ``gopkg.in/yaml.v3`` writes it (4-space indent,
  double quotes where quoting is needed, no line wrapping), through PyYAML with an
  emitter that prefers double quotes and indents lists. It is read with PyYAML's safe
  loader, except that only ``true``/``false`` are booleans (YAML 1.2, as yaml.v3 reads
  it), so ``language: no`` stays the string ``no``. Known keys are written in zread's
  order; keys it does not know are kept, after the known ones.
- ``login.json``'s real format is not known: the simulator writes
  ``{"username", "region", "model", "logged_in_at"}`` in the same JSON layout as
  wiki.json, and reads any JSON object (a real zread's file is "logged in" too).
- The lock file is ``.lock`` in the directory given to :func:`locked`: the store locks
  ``$HOME/.zread/`` for the user's files and ``<project>/.zread/`` for the wiki.
- The log is appended to with one ``write`` of a whole line (``O_APPEND``), mode 0600.
- A symbolic link among zread's files is where the user pointed it: a file that is a
  link to an existing file is written through it (the link stays a link, the file it
  names is replaced). A link to nothing is :class:`DanglingLinkError`, and nothing is
  created through it: zread's Go would create its target, which may be anywhere. The
  lock file is never a link (``O_NOFOLLOW``).

PyYAML (~30 ms to import) is imported only by the functions that read or write YAML.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import functools
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal, cast

import msgspec

from simulator.core.errors import ConfigurationError
from simulator.scenario.wiki import Page, slug, version_id
from simulator.scenario.world import LEVELS

__all__ = [
    "CONFIG_KEYS",
    "LOCK_NAME",
    "ConfigFileError",
    "DanglingLinkError",
    "LoginFileError",
    "LoginRecord",
    "PageEntry",
    "WikiFileError",
    "WikiIndex",
    "append_log",
    "config_path",
    "config_values",
    "current_path",
    "decode_current",
    "decode_login",
    "decode_wiki",
    "default_config",
    "drafts_dir",
    "encode_config",
    "encode_current",
    "encode_login",
    "encode_wiki",
    "go_time",
    "go_time_ns",
    "locked",
    "log_path",
    "login_path",
    "next_free_id",
    "page_entry",
    "page_file",
    "parse_version_id",
    "project_dir",
    "read_config",
    "slug",
    "update_config",
    "user_dir",
    "version_dir",
    "version_id",
    "versions_dir",
    "wiki_dir",
    "wiki_json_path",
    "write_atomic",
]

LOCK_NAME: Final = ".lock"
"""The lock file :func:`locked` takes, inside the directory it is given."""
WIKI_JSON: Final = "wiki.json"
CURRENT_PREFIX: Final = "versions/"
_BOM: Final = b"\xef\xbb\xbf"

# -- paths ---------------------------------------------------------------------------------


def user_dir(home: Path) -> Path:
    """``$HOME/.zread``: the user's zread directory."""
    return Path(home) / ".zread"


def config_path(home: Path) -> Path:
    """``$HOME/.zread/config.yaml``; absent on a fresh install."""
    return user_dir(home) / "config.yaml"


def login_path(home: Path) -> Path:
    """``$HOME/.zread/login.json``; present when logged in."""
    return user_dir(home) / "login.json"


def log_path(home: Path) -> Path:
    """``$HOME/.zread/log/zread.log``: zread's log."""
    return user_dir(home) / "log" / "zread.log"


def project_dir(project: Path) -> Path:
    """``<project>/.zread``: everything zread writes into a project is under it."""
    return Path(project) / ".zread"


def wiki_dir(project: Path) -> Path:
    """``<project>/.zread/wiki``."""
    return project_dir(project) / "wiki"


def current_path(project: Path) -> Path:
    """``<project>/.zread/wiki/current``: the pointer to the current version."""
    return wiki_dir(project) / "current"


def versions_dir(project: Path) -> Path:
    """``<project>/.zread/wiki/versions``: one directory per generated wiki."""
    return wiki_dir(project) / "versions"


def version_dir(project: Path, wiki_id: str) -> Path:
    """``<project>/.zread/wiki/versions/<id>``."""
    if not _is_component(wiki_id):
        raise ValueError(f"not a version id: {wiki_id!r}")
    return versions_dir(project) / wiki_id


def drafts_dir(project: Path) -> Path:
    """``<project>/.zread/wiki/drafts``: the wiki being generated."""
    return wiki_dir(project) / "drafts"


def wiki_json_path(directory: Path) -> Path:
    """``wiki.json`` in a version's directory or in ``drafts/``."""
    return Path(directory) / WIKI_JSON


def page_file(page_slug: str) -> str:
    """The file name of a page: ``<slug>.md``, beside wiki.json."""
    return f"{page_slug}.md"


def _is_component(name: str) -> bool:
    """One plain path component: no separator, not ``.``/``..``, no space or control
    character."""
    return (
        bool(name)
        and name not in (".", "..")
        and not any(c in "/\\" or c.isspace() or not c.isprintable() for c in name)
    )


# -- the current pointer -------------------------------------------------------------------


def encode_current(wiki_id: str) -> bytes:
    """The bytes of ``current``: ``versions/<id>``, no trailing newline, no BOM."""
    if not _is_component(wiki_id):
        raise ValueError(f"not a version id: {wiki_id!r}")
    return f"{CURRENT_PREFIX}{wiki_id}".encode()


def decode_current(data: bytes) -> str | None:
    """The id ``current`` points at, or None when it is empty or not a pointer.

    Accepts what readers accept: a UTF-8 BOM, white space around, ``versions/<id>`` or
    a bare ``<id>``.
    """
    try:
        text = data.removeprefix(_BOM).decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    wiki_id = text.removeprefix(CURRENT_PREFIX)
    return wiki_id if _is_component(wiki_id) else None


# -- version ids and times -----------------------------------------------------------------

_VERSION_ID: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2})(\d{2})(\d{2})")


def parse_version_id(wiki_id: str) -> dt.datetime | None:
    """The local (naive) time a zread version id names, or None for another id."""
    match = _VERSION_ID.fullmatch(wiki_id)
    if match is None:
        return None
    try:
        year, month, day, hour, minute, second = map(int, match.groups())
        return dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None


def next_free_id(local: dt.datetime, taken: Iterable[str]) -> str:
    """The id of the first whole second at or after ``local`` that ``taken`` does not
    hold: two runs never share an id."""
    used = set(taken)
    moment = local.replace(microsecond=0)
    while (candidate := version_id(moment)) in used:
        moment += dt.timedelta(seconds=1)
    return candidate


def go_time(utc: dt.datetime, nanos: int | None = None) -> str:
    """``utc`` as Go's ``time.RFC3339Nano`` writes a UTC time (``time.Time``'s JSON).

    ``nanos`` is the nanoseconds within the second (0..999999999) and replaces the
    datetime's microseconds; None takes them from the datetime. The fraction is
    written with its trailing zeros removed and left out when it is zero, as Go does:
    ``...T19:02:13.183259466Z``, ``...T19:02:13.5Z``, ``...T19:02:13Z``. A naive
    datetime is taken as UTC; an aware one is converted.
    """
    if utc.tzinfo is not None:
        utc = utc.astimezone(dt.UTC)
    if nanos is None:
        nanos = utc.microsecond * 1000
    if not 0 <= nanos <= 999_999_999:
        raise ValueError(f"nanos must be 0-999999999, not {nanos}")
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{utc:%Y-%m-%dT%H:%M:%S}{fraction}Z"


def go_time_ns(epoch_ns: int) -> str:
    """:func:`go_time` of a count of nanoseconds since the epoch (``time.time_ns()``)."""
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    return go_time(dt.datetime.fromtimestamp(seconds, dt.UTC), nanos)


# -- wiki.json -----------------------------------------------------------------------------

Level = Literal["Beginner", "Intermediate", "Advanced"]
_GO_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")


class WikiFileError(ConfigurationError, ValueError):
    """A wiki.json that is not zread's shape; the message names what is wrong.

    A file of the user's setup (exit 2 when it reaches the command line); also a
    :class:`ValueError`, as any malformed input is."""


class PageEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """One page of wiki.json, its keys in zread's order; ``group`` is omitted when empty."""

    slug: str
    title: str
    file: str
    section: str
    group: str = ""
    level: Level


class WikiIndex(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """wiki.json: a version's id, when it was generated (Go's UTC time), its language
    and its pages in catalog order."""

    id: str
    generated_at: str
    language: Literal["en", "zh"]
    pages: list[PageEntry]


_WIKI_DECODER = msgspec.json.Decoder(WikiIndex)
"""Made when the module is: its types are resolved once, while the module is whole."""


def page_entry(page: Page) -> PageEntry:
    """The wiki.json entry of a catalog page."""
    if page.level not in LEVELS:
        raise ValueError(f"page {page.slug}: not a level: {page.level!r}")
    level = cast(Level, page.level)
    return PageEntry(
        slug=page.slug,
        title=page.title,
        file=page_file(page.slug),
        section=page.section,
        group=page.group,
        level=level,
    )


_GO_ESCAPES: Final = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def _go_json(value: object) -> bytes:
    """``value`` as Go's ``json.MarshalIndent(value, "", "  ")`` writes it."""
    data = msgspec.json.format(msgspec.json.encode(value), indent=2)
    for raw, escaped in _GO_ESCAPES:
        data = data.replace(raw, escaped)
    return data


def encode_wiki(index: WikiIndex) -> bytes:
    """wiki.json's bytes: keys in zread's order, 2-space indent, non-ASCII raw, no
    trailing newline."""
    _check_wiki(index)
    return _go_json(index)


def decode_wiki(data: bytes) -> WikiIndex:
    """A wiki.json (a UTF-8 BOM and surrounding white space allowed), or
    :class:`WikiFileError` naming what is wrong: not JSON, a missing or unknown key, a
    wrong type, an unknown level or language, a page file that is not ``<slug>.md``,
    two pages with one slug."""
    try:
        index = _WIKI_DECODER.decode(data.removeprefix(_BOM))
    except msgspec.ValidationError as err:
        raise WikiFileError(f"wiki.json: {err}") from None
    except msgspec.DecodeError as err:
        raise WikiFileError(f"wiki.json: not JSON: {err}") from None
    _check_wiki(index)
    return index


def _check_wiki(index: WikiIndex) -> None:
    if not _is_component(index.id):
        raise WikiFileError(f"wiki.json: id {index.id!r} is not a directory name")
    if not _GO_TIME.fullmatch(index.generated_at):
        raise WikiFileError(f"wiki.json: generated_at {index.generated_at!r} is not RFC 3339")
    seen: set[str] = set()
    for i, page in enumerate(index.pages):
        where = f"wiki.json: pages[{i}]"
        if not _is_component(page.slug):
            raise WikiFileError(f"{where}: slug {page.slug!r} is not a file name")
        if page.file != page_file(page.slug):
            raise WikiFileError(f"{where}: file {page.file!r} is not {page_file(page.slug)!r}")
        if page.slug in seen:
            raise WikiFileError(f"{where}: slug {page.slug!r} is listed twice")
        seen.add(page.slug)


# -- config.yaml ---------------------------------------------------------------------------


class ConfigFileError(ConfigurationError, ValueError):
    """A config.yaml that cannot be used; the message names the problem.

    A file of the user's setup (exit 2 when it reaches the command line); also a
    :class:`ValueError`, as any malformed input is."""


CONFIG_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "language": ("language",),
    "doc_language": ("doc_language",),
    "max_concurrent": ("concurrency", "max_concurrent"),
    "max_retries": ("concurrency", "max_retries"),
    "llm_provider": ("llm", "provider"),
    "llm_base_url": ("llm", "base_url"),
    "llm_model": ("llm", "model"),
    "llm_api_key": ("llm", "api_key"),
}
"""Each field of ``zread config`` (by json_key, in the command's order) and where it
is in config.yaml."""
_INTEGER_KEYS: Final = frozenset({"max_concurrent", "max_retries"})
_ORDER: Final[dict[tuple[str, ...], tuple[str, ...]]] = {
    (): ("language", "doc_language", "llm", "concurrency"),
    ("llm",): ("provider", "model", "api_key", "base_url"),
    ("concurrency",): ("max_concurrent", "max_retries"),
}
"""The order zread writes its keys in, per map."""


def default_config() -> dict[str, Any]:
    """The config.yaml zread's defaults make (a fresh install writes it on first save)."""
    return {
        "language": "zh",
        "doc_language": "zh",
        "llm": {
            "provider": "z.ai",
            "model": "glm-5",
            "api_key": "",
            "base_url": "https://open.bigmodel.cn/api/paas/v4",
        },
        "concurrency": {"max_concurrent": 1, "max_retries": 0},
    }


@functools.cache
def _yaml() -> tuple[type[Any], type[Any]]:
    """The loader and dumper classes (PyYAML imported on first use)."""
    import yaml

    class Loader(yaml.SafeLoader):
        """The safe loader with YAML 1.2's booleans (``true``/``false`` only)."""

    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )

    class Dumper(yaml.SafeDumper):
        """yaml.v3's look: double quotes where quoting is needed, lists indented."""

        def choose_scalar_style(self) -> str:
            style: str = super().choose_scalar_style()
            return '"' if style == "'" else style

        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)

    return Loader, Dumper


def read_config(data: bytes) -> dict[str, Any]:
    """A config.yaml's document: a mapping (an empty file is an empty one), or
    :class:`ConfigFileError` naming the problem."""
    import yaml

    loader, _ = _yaml()
    try:
        doc = yaml.load(data, Loader=loader)  # a subclass of SafeLoader
    except yaml.YAMLError as err:
        raise ConfigFileError(f"config.yaml: not valid YAML: {err}".replace("\n", " ")) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigFileError(f"config.yaml: expected a mapping, got {type(doc).__name__}")
    return cast(dict[str, Any], doc)


def _get(doc: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = doc
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _text(key: str, value: Any) -> str:
    """A YAML value as the string ``zread config`` shows (Go decodes it into a string)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigFileError(f"config.yaml: {key}: expected a value, got {type(value).__name__}")


def config_values(doc: Mapping[str, Any]) -> dict[str, str]:
    """The ``zread config`` fields config.yaml gives, as strings, by json_key, in the
    command's order; a field the file does not have is left out (the scenario fills it)."""
    values: dict[str, str] = {}
    for key, path in CONFIG_KEYS.items():
        found, value = _get(doc, path)
        if found:
            values[key] = _text(".".join(path), value)
    return values


def update_config(doc: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``doc`` with ``values`` (by json_key) written where config.yaml keeps
    them; a value equal to the file's is left as the file has it, keys it does not name
    are kept, integers are written as integers."""
    unknown = sorted(set(values) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"not config fields: {', '.join(unknown)}")
    new: dict[str, Any] = _copy(doc)
    for key, value in values.items():
        path = CONFIG_KEYS[key]
        found, old = _get(new, path)
        if found and _text(".".join(path), old) == value:
            continue
        written: Any = value
        if key in _INTEGER_KEYS:
            try:
                written = int(value)
            except ValueError:
                raise ConfigFileError(f"{key}: expected an integer, got {value!r}") from None
        node = new
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigFileError(f"config.yaml: {part}: expected a mapping")
            node = child
        node[path[-1]] = written
    return new


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _ordered(doc: Mapping[str, Any], path: tuple[str, ...] = ()) -> dict[str, Any]:
    """``doc`` with zread's keys first, in zread's order, then the others as they came."""
    order = _ORDER.get(path, ())
    keys = [k for k in order if k in doc] + [k for k in doc if k not in order]
    return {
        k: _ordered(doc[k], (*path, k)) if isinstance(doc[k], Mapping) else doc[k] for k in keys
    }


def encode_config(doc: Mapping[str, Any]) -> bytes:
    """config.yaml's bytes in zread's layout: its keys in its order (the others after),
    nested maps indented by 4 spaces, strings quoted only when they must be, with
    double quotes, non-ASCII raw, no line wrapping."""
    import yaml

    _, dumper = _yaml()
    text: str = yaml.dump(
        _ordered(doc),
        Dumper=dumper,
        indent=4,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )
    return text.encode()


# -- login.json ----------------------------------------------------------------------------


class LoginFileError(ConfigurationError, ValueError):
    """A login.json that is not a JSON object.

    A file of the user's setup (exit 2 when it reaches the command line); also a
    :class:`ValueError`, as any malformed input is."""


class LoginRecord(msgspec.Struct, kw_only=True):
    """What login.json says (the simulator's format; other keys are ignored on read)."""

    username: str = ""
    region: str = ""
    model: str = ""
    logged_in_at: str = ""


_LOGIN_DECODER = msgspec.json.Decoder(LoginRecord)


def encode_login(
    username: str, region: str, model: str, *, logged_in_at: dt.datetime | None = None
) -> bytes:
    """login.json's bytes (the simulator's choice of format, wiki.json's layout);
    ``logged_in_at`` defaults to now, written as Go's UTC time."""
    when = logged_in_at if logged_in_at is not None else dt.datetime.now(dt.UTC)
    record = LoginRecord(username=username, region=region, model=model, logged_in_at=go_time(when))
    return _go_json(record)


def decode_login(data: bytes) -> LoginRecord:
    """What a login.json says: any JSON object (keys the simulator does not write are
    ignored, missing ones are empty), or :class:`LoginFileError`."""
    try:
        return _LOGIN_DECODER.decode(data.removeprefix(_BOM))
    except msgspec.ValidationError as err:
        raise LoginFileError(f"login.json: {err}") from None
    except msgspec.DecodeError as err:
        raise LoginFileError(f"login.json: not JSON: {err}") from None


# -- writing safely ------------------------------------------------------------------------


class DanglingLinkError(ConfigurationError, OSError):
    """One of zread's files is a symbolic link to nothing: nothing is written through it."""

    def __init__(self, path: Path) -> None:
        target = os.readlink(path)
        super().__init__(
            f"{path}: a symbolic link to {target}, which does not exist: "
            "nothing is written through it"
        )


def _through_link(path: Path) -> Path:
    """``path``, or the existing file it links to; :class:`DanglingLinkError` for a link
    to nothing (or to something that is not a regular file)."""
    if not path.is_symlink():
        return path
    target = path.resolve()
    if not target.is_file():
        raise DanglingLinkError(path)
    return target


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` at once: a reader sees the old file or the new
    one, never a part. The bytes go to a temporary file in the same directory (created
    if missing), are flushed to disk, get ``mode`` (whatever the umask), then the file
    is renamed over ``path`` and the directory flushed too. A ``path`` that is a link
    to an existing file replaces that file (see the module docstring)."""
    path = _through_link(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # pragma: no cover - a directory that cannot be opened for reading
        return
    try:
        os.fsync(fd)
    except OSError as err:  # pragma: no cover - file systems that refuse a directory fsync
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(directory: Path, *, timeout: float | None = None) -> Iterator[Path]:
    """Hold an exclusive lock on ``directory`` (created if missing) for the block.

    The lock is an ``flock`` on ``directory/.lock``: other processes, and other threads
    of this one, wait at the door; it goes when the block ends or the process dies. It
    is not re-entrant: a thread that already holds it must not ask again. With
    ``timeout`` (seconds), :class:`TimeoutError` when the lock cannot be had by then.
    Yields the lock file's path.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"{lock}: still locked after {timeout} s") from None
                    time.sleep(0.005)
        yield lock
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def append_log(path: Path, line: str) -> None:
    """Append ``line`` and a newline to the log at ``path`` (directories created, mode
    0600 when new), in one write, so lines of several processes never interleave.
    Line breaks inside ``line`` become spaces: one call, one line."""
    path = _through_link(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    text = " ".join(line.rstrip("\r\n").splitlines()) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        data = text.encode()
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
