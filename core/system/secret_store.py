"""Where secrets the user gives us are kept: the OS keyring when one works, else a file only the user can
read (headless Linux boxes have no keyring backend). Used for the API keys of remote endpoints
(core/remote/key_store.py) and the Hugging Face token (core/models/token_store.py).
"""

from __future__ import annotations

import os
from pathlib import Path

KEYRING_SERVICE = "SpecExec Desktop"


def usable_keyring():
    """The keyring module when a real backend is present (priority > 0), else None."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None
    backend = keyring.get_keyring()
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return keyring


def write_private_file(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600: created that way from the start (never world-readable for a
    moment), then rewritten in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)
