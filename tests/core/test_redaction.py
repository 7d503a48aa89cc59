"""simulator.core.redaction: what a recording writes goes through the keys, the URL
tokens and the user's patterns."""

from __future__ import annotations

import pytest

from simulator.core.redaction import Redactor, redact_url_tokens

KEY = "sk-SECRET-0123"


def test_url_tokens_are_hidden_and_the_rest_kept() -> None:
    url = "https://zread.ai/cb?client_id=zread&state=562958af\\u0026code=C0DE&x_token=T"
    assert (
        redact_url_tokens(url)
        == "https://zread.ai/cb?client_id=zread&state=***\\u0026code=***&x_token=***"
    )
    text = "no url"
    assert redact_url_tokens(text) is text


def test_the_redactor_of_a_recording() -> None:
    redactor = Redactor([r"hunter\d+"], keys=[KEY])
    assert redactor.text(f"{KEY} hunter2 ?state=abc") == "*** *** ?state=***"
    line = b'{"vm":{"fields":[{"json_key":"llm_api_key","value":"sk-from-an-event"}]}}'
    assert b"sk-from-an-event" not in redactor.line(line)
    assert redactor.text("later: sk-from-an-event") == "later: ***"
    with pytest.raises(ValueError, match="not a regular expression"):
        Redactor(["("])
    with pytest.raises(ValueError, match="empty string"):
        Redactor(["x*"])
