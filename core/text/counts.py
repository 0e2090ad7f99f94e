"""Token counts as people read them, the one rule for every count the CLI prints and the app shows:
thousands separated ("20,036 tokens", as the chat's context meter shows "0 / 4,096"), and one token singular.
The API server's errors keep OpenAI's own wording (plain digits), which clients match."""

from __future__ import annotations


def token_count(count: int) -> str:
    """20036 -> "20,036 tokens"; 1 -> "1 token"."""
    return f"{count:,} token{'' if count == 1 else 's'}"
