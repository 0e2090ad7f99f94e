"""Syntax colours for the code blocks of a rendered answer (Pygments).

`token_spans` is Qt-free: (start, length, colour, bold, italic) for each coloured token of a piece of code.
`highlight_document` applies them to a code card's QTextDocument. Unknown or missing languages stay plain
(no guessing: a wrong guess colours prose like code). The Pygments styles are picked for contrast on the
cards' backgrounds in each theme (every colour of "xcode" reaches 4.5:1 on the light card, of "one-dark" on the dark one).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.util import ClassNotFound

LIGHT_STYLE = "xcode"
DARK_STYLE = "one-dark"


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


def highlight_document(document, language: str, dark: bool) -> int:  # document: QTextDocument
    """Colour the code that fills `document` (a code card's) as `language`; returns how many spans were coloured."""
    from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor

    spans = token_spans(document.toPlainText(), language, dark)
    cursor = QTextCursor(document)
    cursor.beginEditBlock()
    for span in spans:
        look = QTextCharFormat()
        look.setForeground(QColor(span.color))
        if span.bold:
            look.setFontWeight(QFont.Weight.Bold)
        if span.italic:
            look.setFontItalic(True)
        cursor.setPosition(span.start)
        cursor.setPosition(span.start + span.length, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(look)
    cursor.endEditBlock()
    return len(spans)
