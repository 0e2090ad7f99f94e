"""A chat's automatic title, made from its first message, and a branch's, made from its chat's."""

from __future__ import annotations

import re

from core.text.document_text import ATTACHED_BLOCK

DEFAULT_TITLE = "New chat"
TITLE_LENGTH = 48
BRANCH_MARK = " (branch)"


def title_from(text: str) -> str:
    """An automatic title from the first message: its first line without markdown marks, cut after the
    first sentence or at a word boundary near TITLE_LENGTH characters. Documents added to the message are
    passed over (their first line would be the file's name and the rest its contents), unless the message is
    nothing else: then the first file's name."""
    files = [match.group(1) for match in ATTACHED_BLOCK.finditer(text)]
    text = ATTACHED_BLOCK.sub("", text)
    if files and not text.strip():
        text = files[0]
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


def branch_title(title: str) -> str:
    """A branch's title: its chat's, marked as a branch once (a branch of a branch is not marked twice)."""
    return title if title.endswith(BRANCH_MARK) else title + BRANCH_MARK
