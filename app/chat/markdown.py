"""Markdown helpers for the chat view (Qt-free): find fenced code blocks and cut an answer into prose and
code segments (a block still open while the answer streams counts as code already).

Qt's QTextDocument.setMarkdown (CommonMark + GitHub tables) renders the prose; code blocks become cards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


@dataclass(frozen=True)
class CodeBlock:
    language: str
    code: str
    start_line: int  # the opening fence's line
    end_line: int | None  # the closing fence's line; None while still open (streaming)


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of `text` in order (CommonMark fences: ``` or ~~~, closed by the same kind
    at least as long; an unclosed block runs to the end)."""
    blocks: list[CodeBlock] = []
    lines = text.split("\n")
    open_fence: tuple[str, int, str, int] | None = None  # (char, length, language, start line)
    body: list[str] = []
    for number, line in enumerate(lines):
        match = _FENCE.match(line.rstrip())
        if open_fence is None:
            if match:
                fence = match["fence"]
                open_fence = (fence[0], len(fence), match["info"].strip().split(" ")[0], number)
                body = []
            continue
        char, length, language, start = open_fence
        stripped = line.strip()
        if match and stripped and set(stripped) == {char} and len(stripped) >= length:
            blocks.append(CodeBlock(language, "\n".join(body), start, number))
            open_fence = None
        else:
            body.append(line)
    if open_fence is not None:
        blocks.append(CodeBlock(open_fence[2], "\n".join(body), open_fence[3], None))
    return blocks


@dataclass(frozen=True)
class Segment:
    """A piece of an answer: prose (Markdown) or one code block (its code and language)."""

    kind: str  # "prose" | "code"
    text: str
    language: str = ""


def segments(text: str) -> list[Segment]:
    """`text` cut into prose and code blocks, in order, for the chat to render prose as Markdown and each code
    block as a card of its own. A block still open (the answer is streaming) is a code segment already."""
    lines = text.split("\n")
    found: list[Segment] = []
    position = 0
    for block in code_blocks(text):
        prose = "\n".join(lines[position : block.start_line]).strip("\n")
        if prose.strip():
            found.append(Segment("prose", prose))
        found.append(Segment("code", block.code, block.language))
        position = len(lines) if block.end_line is None else block.end_line + 1
    rest = "\n".join(lines[position:]).strip("\n")
    if rest.strip():
        found.append(Segment("prose", rest))
    return found
