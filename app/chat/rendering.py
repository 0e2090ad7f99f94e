"""How an answer's Markdown is drawn into a QTextDocument: the body font, line height, tight lists, shaded
inline code and thin-bordered tables, all from the theme's roles (a theme switch renders again)."""

from __future__ import annotations

from PySide6.QtGui import (
    QColor, QGuiApplication, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument, QTextFrameFormat, QTextTable,
)

from app.theme.tokens import SPACE, TYPE

# GitHub dialect (tables, fenced code, task lists); raw HTML in an answer is shown as text, not interpreted.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)


def body_font_size() -> float:
    """Answers and your messages: a step above the controls' font."""
    return QGuiApplication.font().pointSizeF() * TYPE.body


def set_line_height(document: QTextDocument, percent: int) -> None:
    """Every block of `document` at `percent` of its font's height (answers read better with air)."""
    cursor = QTextCursor(document)
    cursor.select(QTextCursor.SelectionType.Document)
    spacing = QTextBlockFormat()
    spacing.setLineHeight(percent, QTextBlockFormat.LineHeightTypes.ProportionalHeight.value)
    cursor.mergeBlockFormat(spacing)


def tighten_lists(document: QTextDocument, gap: float = 2.0) -> None:
    """List items close together (setMarkdown spaces each like a paragraph); the list as a whole keeps the
    paragraph spacing above and below it."""
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        if block.textList() is not None:
            previous, following = block.previous(), block.next()
            look = block.blockFormat()
            if previous.isValid() and previous.textList() is not None:
                look.setTopMargin(gap)
            if following.isValid() and following.textList() is not None:
                look.setBottomMargin(gap)
            cursor.setPosition(block.position())
            cursor.setBlockFormat(look)
        block = block.next()


def shade_inline_code(document: QTextDocument, background: str) -> None:
    """Give `inline code` (setMarkdown's fixed-pitch fragments) a tinted background, like a chip (drawn with
    the document's font settings, which setMarkdown's fixed-pitch font would otherwise drop)."""
    shade = QTextCharFormat()
    shade.setBackground(QColor(background))
    shade.setFontStyleStrategy(document.defaultFont().styleStrategy())
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.isValid() and fragment.charFormat().fontFixedPitch():
                cursor.setPosition(fragment.position())
                cursor.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(shade)
            it += 1
        block = block.next()


def style_tables(document: QTextDocument, border: str) -> None:
    """Tables with thin single borders in the theme's colour and room in their cells (setMarkdown's default
    is a dark double border)."""
    frames = list(document.rootFrame().childFrames())
    while frames:
        frame = frames.pop()
        frames.extend(frame.childFrames())
        if isinstance(frame, QTextTable):
            look = frame.format()
            look.setBorder(1)
            look.setBorderBrush(QColor(border))
            look.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
            look.setBorderCollapse(True)
            look.setCellSpacing(0)
            look.setCellPadding(SPACE.s - 2)
            frame.setFormat(look)
