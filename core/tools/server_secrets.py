"""Secrets in an MCP server's `env` or `headers` (API keys, tokens, an Authorization header), kept like the other
keys (core/system/secret_store.py): in the OS keyring, the settings file holding only SECRET_REF in their place.

Which values count as secrets: an environment variable or header whose name contains KEY, TOKEN, SECRET,
PASSWORD, PASSWD, AUTH, CREDENTIAL or COOKIE (so `Authorization` and `API_KEY` are). Each is filed in the
keyring under the server's name, the field, and a digest of where the server is (its command line or URL): a
pasted server that takes an existing name but runs another program or talks to another address cannot
receive a secret saved for the first, as an endpoint key is never sent to an address it was not saved for.

Without a usable keyring (a headless Linux box) the value stays in the settings file, which the app writes
readable by the user only, and `store_secrets` says so in its warning: the server keeps working; refusing
would leave such machines without servers that need a key.
"""

from __future__ import annotations

import dataclasses
import hashlib

from core.errors import ToolServerError
from core.system.secret_store import KEYRING_SERVICE, usable_keyring
from core.tools.config import ServerConfig

SECRET_REF = "<in the system keyring>"
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE")
FIELDS = ("env", "headers")


def is_secret(name: str) -> bool:
    """Whether a variable or header of this name holds a secret (see the module docstring)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def keyring_user(config: ServerConfig, field: str, name: str) -> str:
    """Where one secret of `config` is filed: its server, field and name, bound to where the server is."""
    digest = hashlib.sha256(config.where.encode("utf-8")).hexdigest()[:16]
    return f"mcp:{config.name}:{field}:{name}:{digest}"


def _secret_items(config: ServerConfig):
    for field in FIELDS:
        for name, value in getattr(config, field).items():
            if is_secret(name) and value:
                yield field, name, value


def store_secrets(config: ServerConfig) -> tuple[ServerConfig, str]:
    """`config` as the settings file keeps it: each secret moved to the keyring, SECRET_REF in its place.
    Returns (that config, a warning in words: "" when every secret went to the keyring or there was none)."""
    keyring = usable_keyring()
    moved: dict[str, dict[str, str]] = {field: dict(getattr(config, field)) for field in FIELDS}
    kept = []
    for field, name, value in _secret_items(config):
        if value == SECRET_REF:
            continue
        try:
            if keyring is None:
                raise RuntimeError("no keyring")
            keyring.set_password(KEYRING_SERVICE, keyring_user(config, field, name), value)
        except Exception:  # noqa: BLE001 - a listed backend can fail (locked, no D-Bus): the file keeps it
            kept.append(name)
            continue
        moved[field][name] = SECRET_REF
    warning = (
        f"No usable system keyring: {', '.join(kept)} of MCP server {config.name!r} stays in the settings "
        "file (readable by you only)."
        if kept
        else ""
    )
    return dataclasses.replace(config, env=moved["env"], headers=moved["headers"]), warning


def resolve_secrets(config: ServerConfig) -> ServerConfig:
    """`config` with each SECRET_REF replaced by its secret from the keyring (done when the server starts).

    Raises:
        ToolServerError: a secret is not in the keyring (it was saved for another command or address, or the
            keyring is not usable here), in words that say what to do.
    """
    refs = [(field, name) for field in FIELDS for name, value in getattr(config, field).items() if value == SECRET_REF]
    if not refs:
        return config
    keyring = usable_keyring()
    values: dict[str, dict[str, str]] = {field: dict(getattr(config, field)) for field in FIELDS}
    for field, name in refs:
        secret = None
        if keyring is not None:
            try:
                secret = keyring.get_password(KEYRING_SERVICE, keyring_user(config, field, name))
            except Exception:  # noqa: BLE001 - an unusable keyring: said below
                secret = None
        if not secret:
            raise ToolServerError(
                f"MCP server {config.name!r} could not be started: its {name} is not in the system keyring "
                "(it was saved for another command or address, or the keyring is locked); "
                "add the server again in Settings with its key"
            )
        values[field][name] = secret
    return dataclasses.replace(config, env=values["env"], headers=values["headers"])


def secret_refs(config: ServerConfig) -> set[str]:
    """The keyring entries `config` (as the settings file keeps it) refers to."""
    return {
        keyring_user(config, field, name)
        for field in FIELDS
        for name, value in getattr(config, field).items()
        if value == SECRET_REF
    }


def forget_secrets(users: set[str]) -> None:
    """Delete these keyring entries (their servers were removed or replaced)."""
    keyring = usable_keyring()
    if keyring is None:
        return
    for user in users:
        try:
            keyring.delete_password(KEYRING_SERVICE, user)
        except Exception:  # noqa: BLE001 - already gone, or nothing usable to delete from
            pass
