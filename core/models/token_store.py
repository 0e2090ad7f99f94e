"""Where the Hugging Face token for gated models is kept: the OS keyring when one works, else a file only the
user can read (mode 0600) in the config folder (headless Linux boxes have no keyring backend).

The token is looked up in this order: HF_TOKEN, the stored token, then huggingface_hub's own login
(`hf auth login`), so people who already logged in with the hub's tools need nothing more.

A token is sent as an HTTP header, so one with whitespace or control characters inside (a paste gone wrong)
is refused when saved and when read, wherever it comes from; the refusal never repeats the token. Spaces
and line ends around it (a pasted newline) are dropped.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.errors import InvalidTokenError
from core.system.locations import config_dir
from core.system.secret_store import KEYRING_SERVICE, usable_keyring, write_private_file

KEYRING_USER = "huggingface-token"
TOKEN_FILE_NAME = "hf-token"


def token_file(environ: dict[str, str] | None = None) -> Path:
    return config_dir(environ) / TOKEN_FILE_NAME


def checked_token(token: str, source: str) -> str:
    """`token` without the spaces and line ends around it.

    Raises:
        InvalidTokenError: it is empty, or holds anything but printable ASCII without spaces (`source` says
            where it came from, for the message).
    """
    token = token.strip()
    if not token:
        raise InvalidTokenError(
            f"the Hugging Face token {source} is empty: paste the token from https://huggingface.co/settings/tokens"
        )
    if not all(33 <= ord(character) <= 126 for character in token):
        raise InvalidTokenError(
            f"the Hugging Face token {source} holds a space, a line break, a control character or a non-ASCII "
            "character, so it cannot be sent. Copy the token again from https://huggingface.co/settings/tokens "
            "and give it with `specexec models login`."
        )
    return token


def save_token(token: str) -> str:
    """Store `token`; returns where, in words ("the system keyring" or the file's path).

    Raises:
        InvalidTokenError: see `checked_token` (a ValueError).
    """
    token = checked_token(token, "given")
    keyring = usable_keyring()
    if keyring is not None:
        try:
            keyring.set_password(KEYRING_SERVICE, KEYRING_USER, token)
            return "the system keyring"
        except Exception:  # noqa: BLE001 - a listed backend can fail (locked, no D-Bus): use the file
            pass
    path = token_file()
    write_private_file(path, token + "\n")
    return str(path)


def stored_token() -> str | None:
    """The token saved by `specexec models login`, if any.

    Raises:
        InvalidTokenError: the stored token is malformed (see `checked_token`).
    """
    keyring = usable_keyring()
    if keyring is not None:
        try:
            token = keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
        except Exception:  # noqa: BLE001 - an unusable keyring: the file may still hold a token
            token = None
        if token:
            return checked_token(token, "in the system keyring")
    try:
        token = token_file().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return checked_token(token, f"in {token_file()}") if token.strip() else None


def delete_token() -> bool:
    """Forget the stored token (keyring and file). True when there was one."""
    removed = False
    keyring = usable_keyring()
    if keyring is not None:
        try:
            if keyring.get_password(KEYRING_SERVICE, KEYRING_USER):
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
                removed = True
        except Exception:  # noqa: BLE001 - nothing usable to delete from
            pass
    try:
        token_file().unlink()
        removed = True
    except FileNotFoundError:
        pass
    return removed


def current_token() -> str | None:
    """The token to send to the hub: HF_TOKEN, else ours, else huggingface_hub's stored login.

    Raises:
        InvalidTokenError: the token found first is malformed (see `checked_token`).
    """
    if os.environ.get("HF_TOKEN", "").strip():
        return checked_token(os.environ["HF_TOKEN"], "in HF_TOKEN")
    token = stored_token()
    if token:
        return token
    from huggingface_hub import get_token

    token = get_token()
    return checked_token(token, "from huggingface_hub's login (`hf auth login`)") if token else None
