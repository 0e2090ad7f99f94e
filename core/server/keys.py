"""API keys: making one, and checking one in constant time. Light on purpose: the app's settings row imports
it without pulling in the HTTP stack."""

from __future__ import annotations

import hmac
import secrets


def new_api_key() -> str:
    """A new random key (192 bits) for a server that requires one."""
    return "sk-specexec-" + secrets.token_urlsafe(24)


def key_matches(given: str, expected: str) -> bool:
    """Whether `given` is `expected`, compared in constant time (no timing hints to a guesser)."""
    return hmac.compare_digest(given.encode(), expected.encode())
