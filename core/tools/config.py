"""MCP server settings in the shape chat apps share (Claude Desktop's `mcpServers`, LM Studio's mcp.json, Jan):

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                              "env": {"TOKEN": "..."}},
                    "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

A server runs a command (stdio) or is reached at a URL (streamable HTTP). The text may come from a file someone
sent, so everything is checked before a process starts or a connection opens: sizes, types, names, no NUL or
line breaks where they would split an argument or a header, http(s) URLs only. A "disabled": true server is
read but not started (LM Studio's and Claude's convention).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from core.errors import InvalidSettingError
from core.system import json_text
from core.system.text_files import read_text_file

MAX_CONFIG_BYTES = 1_000_000
MAX_SERVERS = 64
MAX_ARGS = 256
MAX_FIELD_CHARS = 8_192  # one argument, value or URL
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an HTTP token (RFC 9110)


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: `command` + `args` + `env` (stdio) or `url` + `headers` (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def where(self) -> str:
        """What the user recognises: the command line or the URL (no secrets: env and headers are left out)."""
        return " ".join((self.command or "", *self.args)) if self.command is not None else str(self.url)

    def to_json(self) -> dict:
        """The server's entry in an `mcpServers` object (what parse_servers reads back)."""
        entry: dict = (
            {"command": self.command, "args": list(self.args)} if self.command is not None else {"url": self.url}
        )
        if self.env:
            entry["env"] = dict(self.env)
        if self.headers:
            entry["headers"] = dict(self.headers)
        if not self.enabled:
            entry["disabled"] = True
        return entry


def _text(value: object, where: str, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidSettingError(f"{where} must be a string")
    if not value and not allow_empty:
        raise InvalidSettingError(f"{where} must not be empty")
    if len(value) > MAX_FIELD_CHARS:
        raise InvalidSettingError(f"{where} is longer than {MAX_FIELD_CHARS} characters")
    if "\x00" in value:
        raise InvalidSettingError(f"{where} contains a NUL character")
    return value


def _single_line(value: object, where: str, allow_empty: bool = False) -> str:
    text = _text(value, where, allow_empty)
    if "\r" in text or "\n" in text:
        raise InvalidSettingError(f"{where} must be one line")
    return text


def _mapping(value: object, where: str, key_pattern: re.Pattern, key_kind: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidSettingError(f"{where} must be an object of {key_kind} names to strings")
    if len(value) > MAX_ARGS:
        raise InvalidSettingError(f"{where} has more than {MAX_ARGS} entries")
    checked = {}
    for key, item in value.items():
        if not key_pattern.fullmatch(key):
            raise InvalidSettingError(f"{where}: {key!r} is not a valid {key_kind} name")
        checked[key] = _single_line(item, f"{where}.{key}", allow_empty=True)
    return checked


def check_url(url: object, where: str = "url") -> str:
    """An http(s) URL with a host, one line (file:, javascript: and the like are refused)."""
    text = _single_line(url, where).strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidSettingError(f"{where} must be an http:// or https:// address, got {text!r}")
    return text


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidSettingError(
            f"server name {name!r}: use 1-64 letters, digits, spaces, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def parse_server(name: object, entry: object) -> ServerConfig:
    """One `mcpServers` entry, checked.

    Raises:
        InvalidSettingError: a field of the wrong type or shape (the message names it).
    """
    name = check_name(name)
    where = f"mcpServers.{name}"
    if not isinstance(entry, dict):
        raise InvalidSettingError(f"{where} must be an object with a 'command' or a 'url'")
    kind = entry.get("type", entry.get("transport"))
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp", "sse"):
        raise InvalidSettingError(f"{where}.type {kind!r} is not one of stdio, http, streamable-http")
    if kind == "sse":
        raise InvalidSettingError(
            f"{where}: the old SSE transport is not supported; give the server's streamable "
            "HTTP address (usually ending in /mcp)"
        )
    enabled = entry.get("disabled", False) is not True and entry.get("enabled", True) is not False
    if ("command" in entry) == ("url" in entry or "serverUrl" in entry):
        raise InvalidSettingError(f"{where} needs either a 'command' (a program to run) or a 'url' (an HTTP server)")
    if "command" in entry:
        args = entry.get("args", [])
        if not isinstance(args, list) or len(args) > MAX_ARGS:
            raise InvalidSettingError(f"{where}.args must be a list of at most {MAX_ARGS} strings")
        return ServerConfig(
            name=name,
            command=_single_line(entry["command"], f"{where}.command").strip(),
            args=tuple(_text(a, f"{where}.args[{i}]", allow_empty=True) for i, a in enumerate(args)),
            env=_mapping(entry.get("env"), f"{where}.env", ENV_NAME, "environment variable"),
            enabled=enabled,
        )
    return ServerConfig(
        name=name,
        url=check_url(entry.get("url", entry.get("serverUrl")), f"{where}.url"),
        headers=_mapping(entry.get("headers"), f"{where}.headers", HEADER_NAME, "header"),
        enabled=enabled,
    )


def parse_servers(text: str) -> list[ServerConfig]:
    """Every server of an `mcpServers` JSON text (a bare {name: entry} object is read too, as pasted from a
    README that shows only the inside).

    Raises:
        InvalidSettingError: not JSON, too big, or an entry that fails its checks.
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise InvalidSettingError(f"the MCP settings are larger than {MAX_CONFIG_BYTES // 1000} kB")
    try:
        data = json_text.loads(text)
    except ValueError as error:
        raise InvalidSettingError(f"the MCP settings are not valid JSON ({error})") from error
    if not isinstance(data, dict):
        raise InvalidSettingError('the MCP settings must be a JSON object: {"mcpServers": {"name": {...}}}')
    servers = data.get("mcpServers", data.get("servers", data))
    if not isinstance(servers, dict):
        raise InvalidSettingError("'mcpServers' must be an object of server names to settings")
    if len(servers) > MAX_SERVERS:
        raise InvalidSettingError(f"more than {MAX_SERVERS} MCP servers")
    return [parse_server(name, entry) for name, entry in servers.items()]


def read_config_file(path: str | Path) -> list[ServerConfig]:
    """The servers of an mcp.json file (size checked before it is read).

    Raises:
        FileNotFoundError: no such file.
        InvalidSettingError: too big, or not valid settings.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"MCP settings file not found: {path}")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise InvalidSettingError(f"{path} is larger than {MAX_CONFIG_BYTES // 1000} kB: not an MCP settings file")
    return parse_servers(read_text_file(path))
