"""`specexec chat --mcp-config FILE`: the terminal's side of the tool loop (core.tools.loop): the servers started
from the file, the y/a/N question per call on stderr, the results noted on stderr, Ctrl-C stopping a running
tool. The answer itself stays on stdout."""

from __future__ import annotations

import concurrent.futures
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import InvalidSettingError
from core.tools.config import ServerConfig
from core.tools.connection import ToolResult
from core.tools.loop import Approvals, Decision, PendingCall
from core.tools.toolbox import Toolbox

SHOWN_CHARS = 300  # of a call's arguments or result, on stderr


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " ..."


@dataclass
class TerminalTools:
    """A chat's tools in the terminal. `read_line`: the next line of input (None at its end); `note`: a line on
    stderr; `stop_requested`: whether Ctrl-C was pressed (polled while a tool runs)."""

    toolbox: Toolbox
    fmt: str | None
    read_line: Callable[[str], str | None]
    note: Callable[[str], None]
    approvals: Approvals = field(default_factory=Approvals)

    @classmethod
    def start(
        cls,
        configs: list[ServerConfig],
        path: str,
        allow_all: bool,
        read_line: Callable[[str], str | None],
        note: Callable[[str], None],
    ) -> TerminalTools:
        """The servers of `configs` (read from `path` by core.tools.config.read_config_file), started: each
        failure noted; InvalidSettingError when none gives a tool."""
        toolbox = Toolbox(configs)
        for name, error in toolbox.start().items():
            note(f"(MCP server {name!r} left out: {error})" + (f"\n{error.details}" if error.details else ""))
        if not toolbox.tools:
            toolbox.close()
            raise InvalidSettingError(f"no tools: none of the MCP servers in {path} started or listed a tool")
        note(f"(tools: {', '.join(toolbox.tools)})")
        return cls(toolbox, None, read_line, note, Approvals(allow_all=allow_all))

    def approve(self, call: PendingCall) -> Decision:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        self.note(f"tool call: {call.name} {_short(arguments)} (MCP server {call.server})")
        answer = self.read_line("allow? [y]es once / [a]lways for this tool / [N]o: ")
        choice = (answer or "").strip().lower()
        if choice in ("a", "always"):
            return "always"
        if choice in ("y", "yes"):
            return "once"
        self.note(f"(denied: {call.name})")
        return "deny"

    def show_result(self, call: PendingCall, result: ToolResult) -> None:
        label = "failed" if result.is_error else "gave"
        self.note(f"[{call.name} {label}: {_short(result.text)}]")

    def wait(self, future: concurrent.futures.Future, stop_requested: Callable[[], bool]) -> ToolResult | None:
        """A running call's result; None once Ctrl-C (stop_requested, checked every 0.1 s) cancelled it."""
        while True:
            try:
                return future.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                if stop_requested():
                    future.cancel()
                    self.note("(tool stopped)")
                    return None
            except concurrent.futures.CancelledError:
                return None

    def close(self) -> None:
        self.toolbox.close()


def prompt_reader(interactive: bool) -> Callable[[str], str | None]:
    """How a y/a/N answer is read: input() at a terminal, else the next line of stdin (None at its end)."""

    def read(prompt: str) -> str | None:
        if interactive:
            try:
                return input(prompt)
            except (EOFError, KeyboardInterrupt):
                print(file=sys.stderr)
                return None
        print(prompt, file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        return None if line == "" else line.rstrip("\r\n")

    return read
