"""An answer's tool calls as the chat stores and shows them (Qt-free): the rounds of app/conversations/store.py
(schema 5) built from the calls core.tools.loop reads, and turned back into the assistant and tool messages
the model saw.

A call's status: "asking" (the card waits for the user), "running", "done", "failed" (the tool's or the call's
error), "denied", "stopped" (Stop while it ran or was asked about). Its result is the text the model got.
"""

from __future__ import annotations

from typing import Any

from core.tools.connection import ToolResult
from core.tools.loop import (
    DENIED_TEXT,
    STOPPED_TEXT,
    PendingCall,
    assistant_message,
    tool_message,
)

ASKING, RUNNING, DONE, FAILED, DENIED, STOPPED = "asking", "running", "done", "failed", "denied", "stopped"
OPEN_STATUSES = (ASKING, RUNNING)
STATUSES = (ASKING, RUNNING, DONE, FAILED, DENIED, STOPPED)
TOOLS_CONFIG_NAME = "mcp.json"  # the app's MCP servers, in the config folder (the mcpServers shape)


def call_record(call: PendingCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments if call.arguments is not None else {},
        "arguments_text": call.arguments_text,
        "server": call.server or "",
        "status": ASKING,
        "decision": "",
        "result": "",
        "is_error": False,
    }


def finish_call(record: dict[str, Any], result: ToolResult, status: str | None = None) -> None:
    """The call's result (and status: done or failed unless given) written into its record."""
    record.update(result=result.text, is_error=result.is_error, status=status or (FAILED if result.is_error else DONE))


def deny_call(record: dict[str, Any]) -> None:
    finish_call(record, ToolResult(DENIED_TEXT, is_error=True), DENIED)


def stop_call(record: dict[str, Any]) -> None:
    finish_call(record, ToolResult(STOPPED_TEXT, is_error=True), STOPPED)


def pending(record: dict[str, Any]) -> PendingCall:
    """A stored call as the loop's PendingCall (for the messages the model reads)."""
    return PendingCall(
        record["id"],
        record["name"],
        record.get("arguments_text", ""),
        record.get("arguments") or {},
        record.get("server") or None,
    )


def rounds_to_messages(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rounds as the model saw them: each an assistant message with its calls, then one tool message per
    call (a call still open, which a reload of an interrupted answer may hold, is sent as stopped). Every call
    names its id and tool: `record` makes them so, and the store leaves out a damaged one when it reads it."""
    messages: list[dict[str, Any]] = []
    for round_ in rounds:
        calls = round_.get("calls", [])
        if not calls:
            continue
        messages.append(assistant_message(str(round_.get("content", "")), [pending(c) for c in calls]))
        for record in calls:
            text = record.get("result") if record.get("status") not in OPEN_STATUSES else STOPPED_TEXT
            messages.append(tool_message(pending(record), ToolResult(str(text or ""), bool(record.get("is_error")))))
    return messages
