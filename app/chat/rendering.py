"""How an answer's Markdown is drawn into a QTextDocument: the body font, line height, tight lists, shaded
inline code and thin-bordered tables, all from the theme's roles (a theme switch renders again)."""

from __future__ import annotations

from collections.abc import Iterator

from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFragment,
    QTextFrameFormat,
    QTextTable,
)

from app.theme.tokens import SPACE, TYPE

# GitHub dialect (tables, fenced code, task lists); raw HTML in an answer is shown as text, not interpreted.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)


def set_markdown(document: QTextDocument, text: str) -> None:
    """`text` as Markdown in `document`, each image a link to where it points instead. To lay an image out,
    Qt reads the file it names, whatever the answer (or a tool's result it quotes) put there: a device that
    never ends (/dev/zero, a pipe) hangs the window, a big file fills the memory, and on Windows a share on
    another computer (\\\\host\\x.png) is handed the user's sign-in. So images are taken out in a document that
    is never laid out (nothing is read while it is built), and the result copied in. A local model draws no
    images anyway; the link says what the answer pointed at, and opens in the browser only if it is a web
    address (MessageWidget._link)."""
    if "![" not in text:  # every Markdown image starts so (raw HTML is off): the common case, as Qt reads it
        document.setMarkdown(text, MARKDOWN_FEATURES)
        return
    scratch = QTextDocument()
    scratch.setMarkdown(text, MARKDOWN_FEATURES)
    images = [
        (fragment.position(), fragment.length(), fragment.charFormat().toImageFormat().name())
        for fragment in fragments(scratch)
        if fragment.charFormat().isImageFormat()
    ]
    for position, length, source in reversed(images):  # from the end, so earlier positions stay put
        cursor = selection(scratch, position, length)
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(source)
        link.setFontUnderline(True)
        link.setForeground(QGuiApplication.palette().link())  # as Qt draws the answer's own links
        cursor.insertText(f"[image: {source.rstrip('/').rsplit('/', 1)[-1] or source}]", link)
    document.clear()
    QTextCursor(document).insertFragment(QTextDocumentFragment(scratch))


def fragments(document: QTextDocument) -> Iterator[QTextFragment]:
    """Every run of text in one format in `document`, block by block, in order."""
    block = document.begin()
    while block.isValid():
        runs = block.begin()
        while not runs.atEnd():
            fragment = runs.fragment()
            if fragment.isValid():
                yield fragment
            runs += 1
        block = block.next()


def selection(document: QTextDocument, position: int, length: int) -> QTextCursor:
    """A cursor over `length` characters of `document` from `position`."""
    cursor = QTextCursor(document)
    cursor.setPosition(position)
    cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
    return cursor


def body_font_size() -> float:
    """Answers and your messages: a step above the controls' font."""
    return QGuiApplication.font().pointSizeF() * TYPE.body


def fixed_font(points: float) -> QFont:
    """A fixed-pitch font at `points`, with the application font's settings (hinting, antialiasing): code and
    a tool call's arguments and result, at a size that follows the app's text size."""
    font = QFont(QGuiApplication.font())
    font.setFamilies(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families())
    font.setFixedPitch(True)
    font.setPointSizeF(points)
    return font


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
    for fragment in fragments(document):
        if fragment.charFormat().fontFixedPitch():
            selection(document, fragment.position(), fragment.length()).mergeCharFormat(shade)


def style_tables(document: QTextDocument, border: str, header: str) -> None:
    """Tables with thin single borders in the theme's colour, room in their cells and the header row shaded in
    `header` (setMarkdown's default is a dark double border and no shade)."""
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
            look.setCellPadding(SPACE.xs + 1)
            look.setHeaderRowCount(1)
            frame.setFormat(look)
            drop_empty_last_rows(frame)
            tighten_cells(frame)
            shade_header(frame, header)


def drop_empty_last_rows(table: QTextTable) -> None:
    """An answer stopped in the middle of a table ends with a row begun but not written ("|"): no empty row
    under the table for it."""

    def empty(row: int) -> bool:
        return all(
            table.cellAt(row, c).firstPosition() == table.cellAt(row, c).lastPosition() for c in range(table.columns())
        )

    while table.rows() > 1 and empty(table.rows() - 1):
        table.removeRows(table.rows() - 1, 1)


def tighten_cells(table: QTextTable, percent: int = 115) -> None:
    """Table rows a line tall, not the prose's airy line height (37 px rows read as a spreadsheet)."""
    spacing = QTextBlockFormat()
    spacing.setLineHeight(percent, QTextBlockFormat.LineHeightTypes.ProportionalHeight.value)
    cursor = table.cellAt(0, 0).firstCursorPosition()
    cursor.setPosition(
        table.cellAt(table.rows() - 1, table.columns() - 1).lastPosition(), QTextCursor.MoveMode.KeepAnchor
    )
    cursor.mergeBlockFormat(spacing)


def shade_header(table: QTextTable, background: str) -> None:
    """The header row on a shade, as chat apps draw tables."""
    for column in range(table.columns()):
        cell = table.cellAt(0, column)
        look = cell.format()
        look.setBackground(QColor(background))
        cell.setFormat(look)
