"""Where secrets the user gives us are kept: the OS keyring when one works, else a file only the user can
read (headless Linux boxes have no keyring backend). Used for the API keys of remote endpoints
(core/remote/key_store.py) and the Hugging Face token (core/models/token_store.py).
"""

from __future__ import annotations

from pathlib import Path

from core.system.disk import write_text_atomically

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
    """Write `text` to `path` (its folder made if missing), readable by this user only from before the first
    byte, and replaced whole (core.system.disk.write_text_atomically: a crash never leaves half a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, text, private=True)
