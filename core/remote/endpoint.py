"""A remote endpoint: where an OpenAI-compatible server answers, and how to call it.

The address comes from a person (typed or pasted into the model manager, or `specexec chat --remote`), so it
is checked before anything is sent: http or https only, a host, no user name or password in it (the key has
its own field and must not end up in logs), no query or fragment. What people paste varies, so
`normalise_base_url` accepts the usual forms and returns the API root every request is built on:

    192.168.1.20:8765                       -> http://192.168.1.20:8765/v1
    http://gpu-box:8000/                    -> http://gpu-box:8000/v1
    http://localhost:11434/v1/              -> http://localhost:11434/v1
    https://example.com/api/v1/chat/completions -> https://example.com/api/v1

A path other than / is kept as it is (some servers live under /api/v1 or /openai/v1).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from core.errors import InvalidSettingError

MAX_URL_LENGTH = 2048
_ROUTE_SUFFIXES = ("/chat/completions", "/completions", "/models")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def normalise_base_url(text: str) -> str:
    """The API root for an address a person gave (see the module docstring).

    Raises:
        InvalidSettingError: the address is empty, too long, not http(s), has no host, a bad port, or carries
            a user name, password, query or fragment.
    """
    text = (text or "").strip()
    if not text:
        raise InvalidSettingError("the server address is empty: enter one such as http://192.168.1.20:8765")
    if len(text) > MAX_URL_LENGTH:
        raise InvalidSettingError(f"the server address is longer than {MAX_URL_LENGTH} characters")
    if _CONTROL.search(text):
        raise InvalidSettingError("the server address contains spaces or control characters")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidSettingError(f"the server address must start with http:// or https://, not {parts.scheme}://")
    if parts.username is not None or parts.password is not None:
        raise InvalidSettingError("put the API key in its own field, not in the server address (user:password@...)")
    if parts.query or parts.fragment:
        raise InvalidSettingError("the server address must not have a query (?...) or a fragment (#...)")
    try:
        port = parts.port
    except ValueError:
        raise InvalidSettingError(f"the port in {text!r} is not a number from 1 to 65535") from None
    if not parts.hostname:
        raise InvalidSettingError(f"the server address {text!r} has no host name")
    if port == 0:
        raise InvalidSettingError("port 0 is not a port a server can listen on")
    path = parts.path.rstrip("/")
    for suffix in _ROUTE_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    path = path or "/v1"
    return urlunsplit((scheme, parts.netloc.lower(), path, "", ""))  # no user info: the netloc is host:port


def checked_key(key: str | None) -> str | None:
    """The key without the spaces and line ends around it (a paste), None when empty. It travels as an HTTP
    header, so anything but printable ASCII inside it is refused (the message never repeats the key).

    Raises:
        InvalidSettingError: the key holds a space, a control or a non-ASCII character.
    """
    key = (key or "").strip()
    if key and not all(33 <= ord(character) <= 126 for character in key):
        raise InvalidSettingError(
            "the API key holds a space, a line break or a character that cannot be sent: copy it again from the server"
        )
    return key or None


def is_private_host(host: str) -> bool:
    """Whether `host` is this machine or a private network address (where plain http is the norm)."""
    if host.lower() == "localhost" or host.lower().endswith((".local", ".lan", ".home.arpa")):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


@dataclass(frozen=True)
class Endpoint:
    """A server to talk to. base_url: as normalise_base_url returns it; api_key: None or "" for servers that
    need none; name: what people call it ("GPU box"), shown in the status bar."""

    base_url: str
    api_key: str | None = None
    name: str = ""

    @classmethod
    def from_address(cls, address: str, api_key: str | None = None, name: str = "") -> "Endpoint":
        """An endpoint from what a person typed (InvalidSettingError when the address or the key is
        unusable)."""
        return cls(normalise_base_url(address), checked_key(api_key), name.strip())

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    @property
    def label(self) -> str:
        """The name, or the host and port when it has none."""
        return self.name or urlsplit(self.base_url).netloc

    @property
    def key_in_clear(self) -> bool:
        """A key would travel unencrypted over a network that is not this machine's or a private one."""
        return bool(self.api_key) and self.base_url.startswith("http://") and not is_private_host(self.host)

    def __repr__(self) -> str:  # never the key: endpoints end up in logs and diagnostics
        return f"Endpoint({self.base_url!r}, name={self.name!r}, key={'set' if self.api_key else 'none'})"
