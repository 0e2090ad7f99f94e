"""A message's words around its text: sentences from error parts, the error itself, the time of a turn."""

from __future__ import annotations

import time
from datetime import datetime

from app.conversations.store import COMPLETE, INTERRUPTED, STOPPED, Message

WORDS_PER_TOKEN = 0.75  # an English word is about 1.3 tokens


def sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter, no trailing full stop (the caller adds one)."""
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:]


def error_text(message: Message) -> str:
    """A failed answer's error in plain sentences: what happened, then what to do."""
    stats = message.stats or {}
    text = sentence(stats.get("error") or "the engine reported an error") + "."
    if stats.get("hint"):
        text += " " + sentence(stats["hint"]) + "."
    return text


def unfinished(message: Message) -> bool:
    """Whether an answer ended before its end with words or thinking to go on from, so Continue is offered:
    cut off at the longest answer, stopped, or interrupted (the engine stopped). Not one cut off where the
    chat fills all the model keeps in mind (`context_full`: going on would only leave the chat's start out),
    nor one that failed (it would fail again)."""
    stats = message.stats or {}
    cut_off = message.status == COMPLETE and stats.get("reason") == "length" and not stats.get("context_full")
    return (
        message.role == "assistant"
        and (cut_off or message.status in (STOPPED, INTERRUPTED))
        and bool(message.content or message.reasoning)
    )


def format_time(timestamp: float, now: float | None = None) -> str:
    """ "14:02" today, "23 Nov 14:02" on another day (local time)."""
    if timestamp <= 0:
        return ""
    moment = datetime.fromtimestamp(timestamp)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    return moment.strftime("%H:%M") if moment.date() == today else moment.strftime("%d %b %H:%M").lstrip("0")


def speed_words(message: Message) -> str:
    """An answer's speed as people say it ("about 30 words a second"); "" for your messages and answers
    without figures. The exact tokens and tokens per second are on its tooltip."""
    stats = message.stats or {}
    if message.role != "assistant" or not stats.get("tokens") or not stats.get("tokens_per_s"):
        return ""
    return rate_words(stats["tokens_per_s"])


def rate_words(tokens_per_second: float) -> str:
    """A speed in tokens per second as people say it: "about 30 words a second", "about 40 words a minute".
    The answer's footer and the status bar say it the same way; the figures are on their tooltips."""
    words = tokens_per_second * WORDS_PER_TOKEN
    return (
        f"about {words:.0f} words a second"
        if words >= 1.5
        else "about a word a second"
        if words >= 0.5
        else f"about {60 * words:.0f} words a minute"
    )
