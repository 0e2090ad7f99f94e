"""A conversation as Markdown (to read or share) or JSON (for programs). Qt-free.

JSON layout (a stable contract): {"title", "created_at", "exported_at", "settings": {...}, "messages":
[{"role", "content", "status", "created_at", "stats"}]} with times in ISO 8601, UTC; an answer of a thinking
model also has "reasoning" (its thinking, apart from "content"; how long it thought is stats' "thinking_seconds");
an answer that called tools has "tool_rounds" (app/conversations/store.py describes them).
The messages are the conversation as shown: for a turn with several answers, the one on screen.

In Markdown a thinking model's thinking comes before its answer as a collapsible section (`<details>`, which
GitHub and most Markdown viewers fold) whose lines are quoted, so a viewer without `<details>` still sets it
apart from the answer. Tool calls come before the answer too, each with its arguments and its result folded
the same way.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

from app.chat.thinking_words import thought_summary
from app.conversations.store import COMPLETE, Conversation, Message
from core.system.file_names import is_windows_device

FORMATS = {"markdown": ".md", "json": ".json"}
ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def to_markdown(conversation: Conversation, messages: list[Message], system_prompt: str = "") -> str:
    lines = [f"# {conversation.title}", "", f"_Exported from SpecExec Desktop on {_iso(time.time())}_", ""]
    if system_prompt.strip():
        lines += ["**System prompt:** " + system_prompt.strip(), ""]
    for message in messages:
        when = datetime.fromtimestamp(message.created_at).strftime("%Y-%m-%d %H:%M") if message.created_at else ""
        status = "" if message.status == COMPLETE else f" [{message.status}]"
        lines += [f"## {ROLE_NAMES.get(message.role, message.role)}{status}" + (f" · {when}" if when else ""), ""]
        if message.reasoning.strip():
            lines += thinking_section(message)
        lines += tool_section(message)
        lines += [message.content.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def thinking_section(message: Message) -> list[str]:
    """A thinking model's thinking as Markdown lines: folded under "Thought for 12 s", quoted."""
    quoted = [f"> {line}".rstrip() for line in message.reasoning.strip().splitlines()]
    summary = f"<summary>{thought_summary(message.stats or {})}</summary>"
    return ["<details>", summary, "", *quoted, "", "</details>", ""]


def tool_section(message: Message) -> list[str]:
    """An answer's tool calls as Markdown lines: per call its name and arguments, its result quoted and folded."""
    lines: list[str] = []
    for round_ in message.tool_rounds:
        if str(round_.get("content", "")).strip():
            lines += [str(round_["content"]).strip(), ""]
        for call in round_.get("calls", []):
            arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
            quoted = [f"> {line}".rstrip() for line in str(call.get("result", "")).splitlines()] or [">"]
            lines += [
                "<details>",
                f"<summary>Tool {escape(str(call.get('name', '?')))} ({escape(str(call.get('status', '?')))})</summary>",
                "",
                f"`{arguments}`",
                "",
                *quoted,
                "",
                "</details>",
                "",
            ]
    return lines


def to_json(conversation: Conversation, messages: list[Message], settings: dict[str, Any] | None = None) -> str:
    data = {
        "title": conversation.title,
        "created_at": _iso(conversation.created_at),
        "exported_at": _iso(time.time()),
        "settings": settings or {},
        "messages": [_json_message(m) for m in messages],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _json_message(message: Message) -> dict[str, Any]:
    data = {
        "role": message.role,
        "content": message.content,
        "status": message.status,
        "created_at": _iso(message.created_at),
        "stats": message.stats,
    }
    if message.reasoning:
        data["reasoning"] = message.reasoning
    if message.tool_rounds:
        data["tool_rounds"] = message.tool_rounds
    return data


def suggested_file_name(title: str, kind: str) -> str:
    """The export's file name offered for a chat: its title in letters, digits, - and _ (at most 60), never a
    device's name ('NUL.md' is the null device on Windows: the export would write nowhere)."""
    safe = "".join(c if c.isalnum() or c in " -_" else " " for c in title).strip()
    name = "-".join(safe.split())[:60] or "conversation"
    return (f"chat-{name}" if is_windows_device(name) else name) + FORMATS[kind]


def free_file_name(folder: Path, name: str) -> str:
    """`name`, or with "-2", "-3"… before its suffix, whichever is not yet taken in `folder`."""
    stem, suffix = Path(name).stem, Path(name).suffix
    candidate, number = name, 1
    while (folder / candidate).exists():
        number += 1
        candidate = f"{stem}-{number}{suffix}"
    return candidate
