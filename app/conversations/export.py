"""A conversation as Markdown (to read or share) or JSON (for programs). Qt-free.

JSON layout (a stable contract): {"title", "created_at", "exported_at", "settings": {...}, "messages":
[{"role", "content", "status", "created_at", "stats"}]} with times in ISO 8601, UTC. The messages are the
conversation as shown: for a turn with several answers, the one on screen.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from app.conversations.store import COMPLETE, Conversation, Message

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
        lines += [f"## {ROLE_NAMES.get(message.role, message.role)}{status}" + (f" · {when}" if when else ""), "",
                  message.content.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def to_json(conversation: Conversation, messages: list[Message], settings: dict[str, Any] | None = None) -> str:
    data = {
        "title": conversation.title,
        "created_at": _iso(conversation.created_at),
        "exported_at": _iso(time.time()),
        "settings": settings or {},
        "messages": [{"role": m.role, "content": m.content, "status": m.status, "created_at": _iso(m.created_at),
                      "stats": m.stats} for m in messages],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def suggested_file_name(title: str, kind: str) -> str:
    safe = "".join(c if c.isalnum() or c in " -_" else " " for c in title).strip()
    return ("-".join(safe.split())[:60] or "conversation") + FORMATS[kind]


def write_export(path: Path, text: str) -> None:
    """Write atomically, so an export over an old file never leaves half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
