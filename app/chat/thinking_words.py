"""How long a thinking model thought, in the words the chat and its exports use. Qt-free."""

from __future__ import annotations

from typing import Any

from core.system import json_text


def duration_words(seconds: float) -> str:
    """ "a moment", "12 s", "2 min 5 s": how long a model thought, as people say it."""
    whole = round(seconds)
    if whole < 1:
        return "a moment"
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def thought_summary(stats: dict[str, Any]) -> str:
    """ "Thought for 12 s" from an answer's stats; "Thoughts" where the time was never measured (an answer cut
    off by a crash while the model thought)."""
    seconds = stats.get("thinking_seconds")
    if json_text.is_number(seconds):
        return "Thought for " + duration_words(seconds)
    return "Thoughts"
