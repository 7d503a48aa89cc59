"""Files as zread and its users write them, shared by the tests that read or save them."""

from __future__ import annotations

ZREAD_DEFAULT = b"""\
language: zh
doc_language: zh
llm:
    provider: z.ai
    model: glm-5
    api_key: ""
    base_url: https://open.bigmodel.cn/api/paas/v4
concurrency:
    max_concurrent: 1
    max_retries: 0
"""
"""The file a fresh install of zread writes (ZREAD-FACTS, "The user: $HOME/.zread/")."""

USER = """\
# zread settings, edited by hand

concurrency:   # how hard to push
  max_retries: 0
  max_concurrent: 2

defaults: &d
  timeout: 30
  hosts: [a, b]
llm:
  model: 'glm-5'  # single quoted
  provider: "z.ai"
  # the key goes below
  api_key: ""
  base_url: https://open.bigmodel.cn/api/paas/v4
profiles:
  main: *d
language: en
zz_unknown: yes
# the end
"""
"""A file a user wrote: comments at the top, inline and between keys, an anchor and
its alias, both quote styles, 2-space indentation, a key zread does not know, and the
keys in an order of the user's."""


def changed(text: str, old: str, new: str) -> bytes:
    """``text`` with the one line ``old`` replaced by ``new``, as bytes."""
    assert text.count(old) == 1
    return text.replace(old, new).encode()


def billion_laughs() -> bytes:
    """A few hundred bytes of YAML that expand to 10^9 nodes."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 9):
        name, previous = "abcdefghi"[level], "abcdefghi"[level - 1]
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return ("\n".join(lines) + "\n").encode()
