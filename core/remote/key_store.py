"""API keys of remote endpoints, kept like the Hugging Face token (core/system/secret_store.py): in the OS keyring
when one works, else in `endpoint-keys.json` in the config folder, a file only the user can read. Keys are
filed under the endpoint's normalised base URL, so the app and `specexec chat --remote URL` find the same
key, and a key is never sent to an address it was not saved for.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.system.locations import config_dir
from core.system.secret_store import KEYRING_SERVICE, usable_keyring, write_private_file

KEYS_FILE_NAME = "endpoint-keys.json"


def keys_file() -> Path:
    return config_dir() / KEYS_FILE_NAME


def _keyring_user(base_url: str) -> str:
    return f"endpoint-key:{base_url}"


def _file_keys() -> dict[str, str]:
    try:
        data = json.loads(keys_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return (
        {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) else {}
    )


def _write_file_keys(keys: dict[str, str]) -> None:
    if keys:
        write_private_file(keys_file(), json.dumps(keys, indent=1, sort_keys=True) + "\n")
    else:
        keys_file().unlink(missing_ok=True)


def save_key(base_url: str, key: str) -> str:
    """Keep `key` for the endpoint at `base_url`; returns where, in words. An empty key forgets it."""
    key = key.strip()
    if not key:
        delete_key(base_url)
        return "nowhere (no key)"
    keyring = usable_keyring()
    if keyring is not None:
        try:
            keyring.set_password(KEYRING_SERVICE, _keyring_user(base_url), key)
            return "the system keyring"
        except Exception:  # noqa: BLE001 - a listed backend can fail (locked, no D-Bus): use the file
            pass
    keys = _file_keys()
    keys[base_url] = key
    _write_file_keys(keys)
    return str(keys_file())


def stored_key(base_url: str) -> str | None:
    """The key saved for `base_url`, if any."""
    keyring = usable_keyring()
    if keyring is not None:
        try:
            key = keyring.get_password(KEYRING_SERVICE, _keyring_user(base_url))
            if key:
                return key
        except Exception:  # noqa: BLE001 - an unusable keyring: the file may still hold the key
            pass
    return _file_keys().get(base_url) or None


def delete_key(base_url: str) -> bool:
    """Forget the key of `base_url` (keyring and file). True when there was one."""
    removed = False
    keyring = usable_keyring()
    if keyring is not None:
        try:
            if keyring.get_password(KEYRING_SERVICE, _keyring_user(base_url)):
                keyring.delete_password(KEYRING_SERVICE, _keyring_user(base_url))
                removed = True
        except Exception:  # noqa: BLE001 - nothing usable to delete from
            pass
    keys = _file_keys()
    if keys.pop(base_url, None) is not None:
        _write_file_keys(keys)
        removed = True
    return removed
