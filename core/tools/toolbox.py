"""The MCP servers of a chat, started together, their tools under names the model can write.

A model writes a call by name, so every tool gets one name across all servers: its own when that is a plain
identifier no other server uses, else "<server>__<tool>" made of letters, digits, '_' and '-' (what the
chat templates and OpenAI's function names accept). A server that will not start is reported and left out;
the others still serve.
"""

from __future__ import annotations

import concurrent.futures
import re
from typing import Any

from core.errors import ToolServerError
from core.tools.config import ServerConfig
from core.tools.connection import (
    CALL_TIMEOUT_S,
    START_TIMEOUT_S,
    ServerConnection,
    ToolInfo,
    ToolResult,
)

_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")
MAX_NAME = 64


def model_name(name: str) -> str:
    """`name` as a function name a template accepts: runs of other characters become '_', at most 64."""
    return _NOT_NAME.sub("_", name).strip("_")[:MAX_NAME] or "tool"


class Toolbox:
    """Connections to `configs`' enabled servers; `tools` maps the model's name for a tool to it."""

    def __init__(
        self, configs: list[ServerConfig], start_timeout: float = START_TIMEOUT_S, call_timeout: float = CALL_TIMEOUT_S
    ) -> None:
        self.connections = {c.name: ServerConnection(c, start_timeout, call_timeout) for c in configs if c.enabled}
        self.tools: dict[str, ToolInfo] = {}
        self.failures: dict[str, ToolServerError] = {}

    def start(self) -> dict[str, ToolServerError]:
        """Start every server at once (each within its timeout); returns the failures by server name."""
        self.failures = {}
        if not self.connections:
            return {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(self.connections))) as pool:
            started = {name: pool.submit(connection.start) for name, connection in self.connections.items()}
        for name, future in started.items():
            try:
                future.result()
            except ToolServerError as error:
                self.failures[name] = error
        self._name_tools()
        return self.failures

    def _name_tools(self) -> None:
        listed = [
            tool
            for name, connection in self.connections.items()
            if name not in self.failures
            for tool in connection.tools
        ]
        counts: dict[str, int] = {}
        for tool in listed:
            counts[model_name(tool.name)] = counts.get(model_name(tool.name), 0) + 1
        self.tools = {}
        for tool in listed:
            plain = model_name(tool.name)
            name = plain if counts[plain] == 1 and plain == tool.name else model_name(f"{tool.server}__{tool.name}")
            while name in self.tools:  # a qualified name that still collides (cut at 64 characters)
                name = name[: MAX_NAME - 2] + "_" + str(len(self.tools) % 10)
            self.tools[name] = tool

    def definitions(self, names: set[str] | None = None) -> tuple[dict[str, Any], ...]:
        """The tools (all, or those in `names`) as OpenAI function definitions, for the chat template."""
        return tuple(
            {
                "type": "function",
                "function": {"name": name, "description": tool.description, "parameters": tool.parameters},
            }
            for name, tool in self.tools.items()
            if names is None or name in names
        )

    def submit(self, name: str, arguments: dict[str, Any]) -> concurrent.futures.Future:
        """Call the tool the model knows as `name` (see ServerConnection.submit)."""
        tool = self.tools[name]
        return self.connections[tool.server].submit(tool.name, arguments)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return self.submit(name, arguments).result()

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
