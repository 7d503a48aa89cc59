"""JSON as zread writes its files: Go's ``json.MarshalIndent(v, "", "  ")``.

Owns: :func:`encode`, the one encoder of every JSON file the simulator writes in
zread's place (wiki.json, login.json), so a title ``A & <B>`` is ``A \\u0026 \\u003cB\\u003e``
whoever writes it.

msgspec encodes and indents; then the characters Go escapes and msgspec does not
(``<``, ``>``, ``&``, U+2028, U+2029) are escaped the way Go does. They can only occur
inside strings, so escaping them in the whole document is safe. Everything else
msgspec writes as Go does (non-ASCII raw, ``\\b \\f \\n \\r \\t``, other control
characters as ``\\u00xx``), and with no trailing newline.

Must not: do I/O.
"""

from __future__ import annotations

from typing import Final

import msgspec

_GO_ESCAPES: Final = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def encode(value: object) -> bytes:
    """``value`` as Go's ``json.MarshalIndent(value, "", "  ")`` writes it."""
    data = msgspec.json.format(msgspec.json.encode(value), indent=2)
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data
