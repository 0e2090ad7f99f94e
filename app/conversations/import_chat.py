"""A chat exported as JSON (app.conversations.export.to_json) read back, to move chats to another computer or
to keep one aside and bring it back. Qt-free.

The file comes from outside: it is read only if it is a regular file of at most MAX_IMPORT_BYTES, and every
field is checked against what an export writes before anything is stored; a file that is not such an export
is refused in words that say what it is not. The chat's settings go through the same reader as a stored
chat's (app.settings.schema), which keeps the valid ones and defaults the rest; an answer's stats and tool calls
through the store's (app.conversations.message_fields), which keeps what is of its type and the whole calls.
"""

from __future__ import annotations

import json
import reprlib
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from app.conversations.message_fields import checked_rounds, checked_stats
from app.conversations.store import COMPLETE, FAILED, INTERRUPTED, STOPPED, STREAMING, Message
from core.errors import TextEncodingError
from core.system import json_text
from core.system.text_files import decode_text

MAX_IMPORT_BYTES = 64 << 20  # an export of a very long chat is a few megabytes
ROLES = ("user", "assistant")  # what an export holds (the system prompt is in its settings)
STATUSES = (COMPLETE, STOPPED, INTERRUPTED, FAILED)
NOT_AN_EXPORT = "not a chat exported from SpecExec Desktop (Export as JSON…)"
_SHORT = reprlib.Repr()  # a wrong value quoted in a refusal: enough of it to recognise (the file is anyone's)
_SHORT.maxstring = _SHORT.maxother = 40


class ChatImportError(ValueError):
    """The file cannot be imported; the message says why, in words."""


@dataclass
class ImportedChat:
    """What Store.add_conversation stores (the messages' ids are given anew there)."""

    title: str
    created_at: float
    settings_json: str
    messages: list[Message]


def read_export(path: Path) -> ImportedChat:
    """The chat in the exported JSON file at `path`.

    Raises:
        ChatImportError: the file cannot be read, or is not an export as the app writes it.
    """
    name = path.name or str(path)
    try:
        if not path.is_file():  # a folder, a pipe or a device (which would never end), or gone
            raise ChatImportError(f"{name} is not a file that can be read")
        if path.stat().st_size > MAX_IMPORT_BYTES:
            raise ChatImportError(f"{name} is larger than a chat export ({MAX_IMPORT_BYTES >> 20} MB at most)")
        with path.open("rb") as handle:
            data = handle.read(MAX_IMPORT_BYTES + 1)
    except OSError as error:
        raise ChatImportError(f"{name} could not be read ({error.strerror or error})") from error
    if len(data) > MAX_IMPORT_BYTES:  # it grew since its size was read
        raise ChatImportError(f"{name} is larger than a chat export ({MAX_IMPORT_BYTES >> 20} MB at most)")
    try:
        record = json_text.loads(decode_text(data, name))
    except (TextEncodingError, ValueError) as error:
        raise ChatImportError(f"{name} is {NOT_AN_EXPORT}: it is not JSON") from error
    return parse_export(record, name)


def parse_export(record: object, name: str) -> ImportedChat:
    """An export's parsed JSON, checked field by field (ChatImportError naming the first that is wrong)."""

    def wrong(what: str) -> ChatImportError:
        return ChatImportError(f"{name} is {NOT_AN_EXPORT}: {what}")

    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        raise wrong("it has no list of messages")
    title = record.get("title")
    if not isinstance(title, str) or not title.strip():
        raise wrong("it has no title")
    settings = record.get("settings", {})
    if not isinstance(settings, dict):
        raise wrong("its settings are not an object")
    messages = [_message(entry, number, wrong) for number, entry in enumerate(record["messages"], 1)]
    if not messages:
        raise wrong("it has no messages")
    return ImportedChat(
        title=" ".join(title.split()),
        created_at=_time(record.get("created_at")) or time.time(),
        settings_json=json.dumps(settings),
        messages=messages,
    )


def _message(entry: object, number: int, wrong) -> Message:  # noqa: ANN001 - the caller's error maker
    if not isinstance(entry, dict):
        raise wrong(f"message {number} is not an object")
    role, content = entry.get("role"), entry.get("content")
    if role not in ROLES:
        raise wrong(f"message {number} has the role {_SHORT.repr(role)} (an export has {' and '.join(ROLES)})")
    if not isinstance(content, str):
        raise wrong(f"message {number} has no text")
    status = entry.get("status", COMPLETE)
    if status == STREAMING:  # exported while it was being written: cut off, as the app marks it
        status = INTERRUPTED
    if status not in STATUSES:
        raise wrong(f"message {number} has the status {_SHORT.repr(status)}")
    reasoning = entry.get("reasoning", "")
    if not isinstance(reasoning, str):
        raise wrong(f"message {number}'s thinking is not text")
    return Message(
        id=0,
        conversation_id=0,
        role=role,
        content=content,
        status=status,
        stats=checked_stats(entry.get("stats")),
        created_at=_time(entry.get("created_at")),
        reasoning=reasoning,
        tool_rounds=checked_rounds(entry.get("tool_rounds"), finished=True),
    )


def _time(value: object) -> float:
    """An export's ISO 8601 time as seconds since the epoch; 0 where it is missing or not a time."""
    if not isinstance(value, str):
        return 0.0
    try:
        return datetime.fromisoformat(value).timestamp()
    except (ValueError, OverflowError, OSError):
        return 0.0
