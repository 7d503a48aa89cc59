"""What a recording goes through before it is written: a cassette, its report.

Owns: :class:`Redactor` (API keys through a :class:`~simulator.core.secrets.Secrets`,
the tokens of URLs, and the user's ``--redact`` patterns) and
:func:`redact_url_tokens`. :mod:`simulator.tools.cassette` uses it for every line, the
argv, the cwd, the file paths and the report.

Must not: do I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from simulator.core.keynames import REDACTED
from simulator.core.secrets import Secrets


@functools.cache
def _url_token() -> re.Pattern[str]:
    """A URL query parameter whose name ends like a secret's, and its value (in plain
    text and in JSON, where Go writes ``&`` as ``\\u0026``)."""
    return re.compile(
        r"((?:[?&]|\\u0026|&amp;)"
        r"[A-Za-z0-9_.\-]*(?:state|code|token|secret|key|nonce|verifier|challenge|signature|sig"
        r"|password)=)"
        r"([^&#\s\"'\\<>]+)",
        re.IGNORECASE,
    )


def redact_url_tokens(text: str) -> str:
    """``text`` with the value of every URL query parameter named like a secret's
    (``state=``, ``code=``, ``…token=``, ``…key=`` …) hidden."""
    if "=" not in text:
        return text
    return _url_token().sub(lambda match: match.group(1) + REDACTED, text)


class Redactor:
    """What a recording (a cassette, its report) goes through before it is written:
    API keys (:attr:`secrets`, given ``keys`` to start with), URL tokens, and what the
    user's ``patterns`` (regular expressions) match. ValueError for a pattern that is
    not a regular expression or matches the empty string."""

    def __init__(self, patterns: Iterable[str] = (), keys: Iterable[str] = ()) -> None:
        self.secrets = Secrets(keys)
        compiled: list[re.Pattern[str]] = []
        for pattern in patterns:
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc})") from None
            if compiled[-1].match(""):
                raise ValueError("the pattern matches the empty string")
        self.patterns = tuple(compiled)

    def text(self, text: str) -> str:
        text = redact_url_tokens(self.secrets.redact_text(text))
        for pattern in self.patterns:
            text = pattern.sub(REDACTED, text)
        return text

    def line(self, raw: bytes) -> bytes:
        """One line (without its newline): API keys, URL tokens, the user's patterns."""
        text = self.secrets.redact_line(raw).decode("utf-8", "surrogateescape")
        return self.text(text).encode("utf-8", "surrogateescape")
