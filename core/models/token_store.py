"""Where the Hugging Face token for gated models is kept: the OS keyring when one works, else a file only the
user can read (mode 0600) in the config folder (headless Linux boxes have no keyring backend).

The token is looked up in this order: HF_TOKEN, the stored token, then huggingface_hub's own login
(`hf auth login`), so people who already logged in with the hub's tools need nothing more.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.models.locations import config_dir

KEYRING_SERVICE = "SpecExec Desktop"
KEYRING_USER = "huggingface-token"
TOKEN_FILE_NAME = "hf-token"


def token_file(environ: dict[str, str] | None = None) -> Path:
    return config_dir(environ) / TOKEN_FILE_NAME


def _keyring():
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


def save_token(token: str) -> str:
    """Store `token`; returns where, in words ("the system keyring" or the file's path)."""
    token = token.strip()
    if not token:
        raise ValueError("the token is empty: paste the token from https://huggingface.co/settings/tokens")
    keyring = _keyring()
    if keyring is not None:
        try:
            keyring.set_password(KEYRING_SERVICE, KEYRING_USER, token)
            return "the system keyring"
        except Exception:  # a listed backend can still fail (locked, no D-Bus session): fall back to the file
            pass
    path = token_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created 0600 from the start (never world-readable for a moment), then rewritten in place.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    return str(path)


def stored_token() -> str | None:
    """The token saved by `specexec models login`, if any."""
    keyring = _keyring()
    if keyring is not None:
        try:
            token = keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
            if token:
                return token
        except Exception:  # an unusable keyring: the file may still hold a token
            pass
    try:
        token = token_file().read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return token or None


def delete_token() -> bool:
    """Forget the stored token (keyring and file). True when there was one."""
    removed = False
    keyring = _keyring()
    if keyring is not None:
        try:
            if keyring.get_password(KEYRING_SERVICE, KEYRING_USER):
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
                removed = True
        except Exception:  # nothing usable to delete from
            pass
    try:
        token_file().unlink()
        removed = True
    except FileNotFoundError:
        pass
    return removed


def current_token() -> str | None:
    """The token to send to the hub: HF_TOKEN, else ours, else huggingface_hub's stored login."""
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"].strip()
    token = stored_token()
    if token:
        return token
    from huggingface_hub import get_token

    return get_token()
