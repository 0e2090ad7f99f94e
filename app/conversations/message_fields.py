"""What an answer's stats and tool calls may hold, checked where they are read. Qt-free.

Both come back from outside the running app: from the conversation database (which a crash, another program
or a damaged disk may have left in any state) and from a chat export someone imports (any JSON at all). The
chat view, the status bar, Make room and the exports format these values as numbers, words and flags; a value of
another type (a speed given as text, a result given as a list, NaN) would break the view of the whole chat. So
each is kept only when it is of the type the app writes: a stats field that is not is left out, as if never
measured; a call without its id or tool name, or with the id of another call of the answer, is left out (the
view and the next turn's history key calls by id), and its other fields are kept where they are of their type.

A call's status is one of app/chat/tool_turns.py's (another is left out). An answer that is no longer being
written cannot wait for an answer to a card or for a call to end, so a call it left asking or running (the app
died meanwhile, or the chat was exported then) is read as stopped, as Stop would have left it, never as a question
whose buttons no longer do anything.
"""

from __future__ import annotations

from typing import Any

from app.chat.tool_turns import OPEN_STATUSES, STATUSES, STOPPED
from core.system import json_text
from core.tools.loop import STOPPED_TEXT

COUNT, AMOUNT, FLAG, WORDS = "count", "amount", "flag", "words"
LARGEST_FIGURE = 10**12  # above any count of tokens or seconds (and a time.time()) an answer can have

STATS_FIELDS: dict[str, str] = {
    # the answer's speed (app.chat.answer_stats.AnswerStats.summary)
    "tokens": COUNT,
    "passes": COUNT,
    "tokens_per_s": AMOUNT,
    "tokens_per_pass": AMOUNT,
    "budget": COUNT,
    # the prompt as it was read, and where the answer waited (app.chat.controller)
    "prompt_tokens": COUNT,
    "reused_tokens": COUNT,
    "whole_conversation": FLAG,
    "expected_s": AMOUNT,
    "queued_behind": COUNT,
    # how it ended: finished, cut off, failed (the error in words, a hint, its kind), or Make room's offer
    "generated_tokens": COUNT,
    "reason": WORDS,
    "context_full": FLAG,
    "error": WORDS,
    "hint": WORDS,
    "kind": WORDS,
    "room_tokens": COUNT,
    "tool_note": WORDS,
    # thinking (a time.time() while it thinks, then how long) and the reader's own edit
    "thinking_started_at": AMOUNT,
    "thinking_seconds": AMOUNT,
    "edited": FLAG,
}

CALL_FIELDS: dict[str, type] = {  # what app/chat/tool_turns.py's call_record writes
    "id": str,
    "name": str,
    "arguments": dict,
    "arguments_text": str,
    "server": str,
    "status": str,
    "decision": str,
    "result": str,
    "is_error": bool,
}


def checked_stats(value: object) -> dict[str, Any]:
    """The fields of `value` (an answer's stats as read) that the app knows, each of its type."""
    if not isinstance(value, dict):
        return {}
    return {key: item for key, item in value.items() if key in STATS_FIELDS and _fits(item, STATS_FIELDS[key])}


def _fits(item: object, kind: str) -> bool:
    if kind == FLAG:
        return isinstance(item, bool)
    if kind == WORDS:
        return isinstance(item, str)
    if not json_text.is_number(item) or (kind == COUNT and not json_text.is_whole(item)):
        return False
    return 0 <= item <= LARGEST_FIGURE  # False for NaN and the infinities as well


def checked_rounds(value: object, finished: bool) -> list[dict[str, Any]]:
    """An answer's rounds of tool calls as read (app/conversations/store.py's docstring has their shape): each
    round's words and its whole calls, one per id; `finished`: the answer is no longer being written, so a call
    it left open is stopped (as Stop stops one: the model was told so)."""
    rounds, seen = [], set()
    for round_ in value if isinstance(value, list) else []:
        if not isinstance(round_, dict):
            continue
        calls = round_.get("calls")
        checked = []
        for call in calls if isinstance(calls, list) else []:
            if _whole_call(call) and call["id"] not in seen:
                seen.add(call["id"])
                checked.append(_checked_call(call, finished))
        words = {"content": round_["content"]} if isinstance(round_.get("content"), str) else {}
        rounds.append({**words, "calls": checked})
    return rounds


def _whole_call(call: object) -> bool:
    return isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(call.get("name"), str)


def _checked_call(call: dict[str, Any], finished: bool) -> dict[str, Any]:
    """The call's fields of their type (its readers take a missing one as empty)."""
    checked = {key: item for key, item in call.items() if key in CALL_FIELDS and isinstance(item, CALL_FIELDS[key])}
    if checked.get("status") not in STATUSES:
        checked.pop("status", None)
    if finished and checked.get("status") in OPEN_STATUSES:
        checked.update(status=STOPPED, result=STOPPED_TEXT, is_error=True)
    return checked
