"""Syntax colours for the code blocks of a rendered answer (Pygments).

`token_spans` is Qt-free: (start, length, colour, bold, italic) for each coloured token of a piece of code.
`highlight_code_blocks` applies them to a QTextDocument made by setMarkdown, whose fenced code blocks carry
the BlockCodeFence property and their language in BlockCodeLanguage. Unknown or missing languages stay plain
(no guessing: a wrong guess colours prose like code).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.util import ClassNotFound

LIGHT_STYLE = "friendly"
DARK_STYLE = "monokai"


@dataclass(frozen=True)
class Span:
    start: int
    length: int
    color: str  # "#rrggbb"
    bold: bool = False
    italic: bool = False


@functools.lru_cache(maxsize=64)
def _lexer(language: str):
    try:
        return get_lexer_by_name(language.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def token_spans(code: str, language: str, dark: bool) -> list[Span]:
    """Coloured spans of `code` in `language` (empty for an unknown language)."""
    lexer = _lexer(language) if language else None
    if lexer is None:
        return []
    style = get_style_by_name(DARK_STYLE if dark else LIGHT_STYLE)
    spans: list[Span] = []
    position = 0
    for token_type, value in lexer.get_tokens(code):
        look = style.style_for_token(token_type)
        if look["color"] and value.strip():
            spans.append(Span(position, len(value), f"#{look['color']}", bool(look["bold"]), bool(look["italic"])))
        position += len(value)
    return spans


def highlight_code_blocks(document, dark: bool) -> int:  # document: QTextDocument
    """Colour every fenced code block of `document`; returns how many blocks of code were coloured."""
    from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextFormat

    fence, language_property = QTextFormat.Property.BlockCodeFence, QTextFormat.Property.BlockCodeLanguage
    regions: list[tuple[int, str, list[str]]] = []  # (document position, language, lines)
    block = document.begin()
    previous_was_code = False
    while block.isValid():
        form = block.blockFormat()
        if form.hasProperty(fence):
            language = str(form.property(language_property) or "")
            if previous_was_code and regions and regions[-1][1] == language:
                regions[-1][2].append(block.text())
            else:
                regions.append((block.position(), language, [block.text()]))
            previous_was_code = True
        else:
            previous_was_code = False
        block = block.next()
    coloured = 0
    cursor = QTextCursor(document)
    for start, language, lines in regions:
        spans = token_spans("\n".join(lines), language, dark)
        for span in spans:
            look = QTextCharFormat()
            look.setForeground(QColor(span.color))
            if span.bold:
                look.setFontWeight(QFont.Weight.Bold)
            if span.italic:
                look.setFontItalic(True)
            cursor.setPosition(start + span.start)
            cursor.setPosition(start + span.start + span.length, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(look)
        coloured += bool(spans)
    return coloured
