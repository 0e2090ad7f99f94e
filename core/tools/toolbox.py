"""The MCP servers of a chat, started together, their tools under names the model can write.

A model writes a call by name, so every tool gets one name across all servers: its own when that is a plain
identifier no other server uses, else "<server>__<tool>" made of letters, digits, '_' and '-' (what the
chat templates and OpenAI's function names accept). A server that will not start is reported and left out;
the others still serve. `update` applies new settings to running servers: those added or changed start, those
removed or changed stop (a call running on one ends with a line saying so), the unchanged ones keep running.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
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
        self.start_timeout, self.call_timeout = start_timeout, call_timeout
        self.connections = {c.name: ServerConnection(c, start_timeout, call_timeout) for c in configs if c.enabled}
        self.tools: dict[str, ToolInfo] = {}
        self.failures: dict[str, ToolServerError] = {}
        self._updating = threading.Lock()  # one start or update at a time

    def start(self) -> dict[str, ToolServerError]:
        """Start every server at once (each within its timeout); returns the failures by server name."""
        with self._updating:
            self.failures = self._start_all(self.connections)
            self._name_tools(self.connections)
            return self.failures

    def _start_all(self, connections: dict[str, ServerConnection]) -> dict[str, ToolServerError]:
        failures: dict[str, ToolServerError] = {}
        if not connections:
            return failures
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(connections))) as pool:
            started = {name: pool.submit(connection.start) for name, connection in connections.items()}
        for name, future in started.items():
            try:
                future.result()
            except ToolServerError as error:
                failures[name] = error
        return failures

    def update(self, configs: list[ServerConfig]) -> dict[str, ToolServerError]:
        """Run the enabled servers of `configs`: new or changed ones are started (while the old ones still
        serve), then swapped in; removed or changed ones are stopped; unchanged ones go on. Returns the
        failures of every server now listed."""
        with self._updating:
            wanted = {c.name: c for c in configs if c.enabled}
            kept = {n: c for n, c in self.connections.items() if n in wanted and c.config == wanted[n]}
            fresh = {
                n: ServerConnection(c, self.start_timeout, self.call_timeout)
                for n, c in wanted.items()
                if n not in kept
            }
            failures = {n: e for n, e in self.failures.items() if n in kept}
            failures.update(self._start_all(fresh))
            retired = [c for n, c in self.connections.items() if n not in kept]
            connections = {n: kept.get(n) or fresh[n] for n in wanted}
            self.failures = failures
            self.connections = connections
            self._name_tools(connections)
            for connection in retired:
                connection.close()
            return self.failures

    def _name_tools(self, connections: dict[str, ServerConnection]) -> None:
        listed = [
            tool for name, connection in connections.items() if name not in self.failures for tool in connection.tools
        ]
        counts: dict[str, int] = {}
        for tool in listed:
            counts[model_name(tool.name)] = counts.get(model_name(tool.name), 0) + 1
        tools: dict[str, ToolInfo] = {}
        for tool in listed:
            plain = model_name(tool.name)
            name = plain if counts[plain] == 1 and plain == tool.name else model_name(f"{tool.server}__{tool.name}")
            while name in tools:  # a qualified name that still collides (cut at 64 characters)
                name = name[: MAX_NAME - 2] + "_" + str(len(tools) % 10)
            tools[name] = tool
        self.tools = tools  # one assignment: a reader on another thread sees the old names or the new

    def names_for(self, servers_off: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
        """The model's names of the tools a chat may use: those of every running server but `servers_off`."""
        return frozenset(name for name, tool in self.tools.items() if tool.server not in servers_off)

    def definitions(self, names: set[str] | frozenset[str] | None = None) -> tuple[dict[str, Any], ...]:
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
        tool = self.tools.get(name)
        connection = self.connections.get(tool.server) if tool is not None else None
        if connection is None:
            done: concurrent.futures.Future = concurrent.futures.Future()
            done.set_result(ToolResult(f"the tool {name!r} is gone: its MCP server was removed in Settings", True))
            return done
        return connection.submit(tool.name, arguments)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return self.submit(name, arguments).result()

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
