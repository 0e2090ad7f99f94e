"""Markdown helpers for the chat view (Qt-free): find fenced code blocks, add "Copy code" links under them,
and close a fence left open by an answer still streaming (so the partial code renders as code).

Qt's QTextDocument.setMarkdown (CommonMark + GitHub tables) does the rendering; this module only prepares
the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COPY_SCHEME = "specexec-copy"  # links "specexec-copy:N" copy code block N

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


def close_open_fence(text: str) -> str:
    """`text` with a closing fence added if its last code block is still open."""
    blocks = code_blocks(text)
    if blocks and blocks[-1].end_line is None:
        opening = text.split("\n")[blocks[-1].start_line].strip()
        fence = re.match(r"`+|~+", opening)
        return text + ("" if text.endswith("\n") else "\n") + (fence.group(0) if fence else "```")
    return text


def with_copy_links(text: str) -> str:
    """Markdown for display: every closed code block gets a "Copy code" link on the line after it; an open
    one (still streaming) is closed and gets no link yet."""
    blocks = code_blocks(text)
    if not blocks:
        return text
    ends = {b.end_line: i for i, b in enumerate(blocks) if b.end_line is not None}
    out: list[str] = []
    for number, line in enumerate(text.split("\n")):
        out.append(line)
        if number in ends:
            index = ends[number]
            label = f"Copy {blocks[index].language} code" if blocks[index].language else "Copy code"
            out.extend(["", f"[{label}]({COPY_SCHEME}:{index})", ""])
    return close_open_fence("\n".join(out))
