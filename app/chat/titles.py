"""A chat's automatic title, made from its first message."""

from __future__ import annotations

import re

DEFAULT_TITLE = "New chat"
TITLE_LENGTH = 48


def title_from(text: str) -> str:
    """An automatic title from the first message: its first line without markdown marks, cut after the
    first sentence or at a word boundary near TITLE_LENGTH characters."""
    first = next(
        (line for line in text.strip().splitlines() if line.strip() and not line.strip().startswith("```")), ""
    )
    line = " ".join(re.sub(r"[#*_`>]+", " ", first).split())
    sentence = re.match(r"(.+?[.?!])(\s|$)", line)
    if sentence and len(sentence.group(1)) >= 12:
        line = sentence.group(1).rstrip(".")
    if len(line) <= TITLE_LENGTH:
        return line or DEFAULT_TITLE
    cut = line[: TITLE_LENGTH - 1].rsplit(" ", 1)[0]
    return (cut if len(cut) > TITLE_LENGTH // 2 else line[: TITLE_LENGTH - 1]) + "…"
