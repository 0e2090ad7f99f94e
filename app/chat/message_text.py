"""What a message says, on screen: prose through QTextBrowser.setMarkdown in views as tall as their text,
each code block a CodeCard coloured by Pygments with its language and a copy button."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QSizePolicy, QTextBrowser, QToolButton, QVBoxLayout, QWidget

from app.chat.highlight import highlight_document
from app.chat.markdown import segments
from app.chat.rendering import (
    body_font_size,
    fixed_font,
    set_line_height,
    set_markdown,
    shade_inline_code,
    style_tables,
    tighten_lists,
)
from app.theme.icons import themed
from app.theme.tokens import SPACE, TYPE, current
from app.window.labels import Label, plain_tip

COPIED_MS = 1500  # a copy button shows a tick this long


OPENED_SCHEMES = ("http", "https", "mailto")  # a link in an answer opens only if it is one of these


def link_words(url: QUrl) -> str:
    """What hovering a link says: where it really goes (its words may name another address) and whether a
    click opens it."""
    address = url.toString()
    if url.scheme() in OPENED_SCHEMES:
        return f"Opens {address}"
    return f"Not opened (not a web address): {address}"


class MarkdownView(QTextBrowser):
    """A read-only text view as tall as its content (the chat's scroll area does the scrolling); a link
    under the pointer says where it goes (`link_words`)."""

    link_activated = Signal(QUrl)

    def __init__(self, parent: QWidget | None = None, wrap: bool = True) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        if not wrap:
            self.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.anchorClicked.connect(self.link_activated)
        self.highlighted.connect(self._hovered)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def _fit(self, *_: object) -> None:
        height = int(self.document().size().height()) + 2 * self.frameWidth() + 2
        bar = self.horizontalScrollBar()
        if bar.isVisible() or (
            self.lineWrapMode() == QTextBrowser.LineWrapMode.NoWrap
            and self.document().idealWidth() > self.viewport().width()
        ):
            height += bar.sizeHint().height()
        if height != self.height():
            self.setFixedHeight(max(height, self.fontMetrics().height() + 8))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit()

    def _hovered(self, url: QUrl) -> None:
        self.setToolTip("" if url.isEmpty() else plain_tip(link_words(url)))


class CodeCard(QFrame):
    """One code block as a card: its language and a Copy button on a header strip, the code below in a
    fixed-pitch font, coloured for the card's theme, scrolling sideways rather than wrapping."""

    copied = Signal(str)  # what was copied ("python code")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeCard")
        self.code = ""
        self.language = ""
        self._dark: bool | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(1, 1, 1, 1)
        layout.setSpacing(0)
        header = QWidget()
        header.setObjectName("codeHeader")
        header.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        row = QHBoxLayout(header)
        row.setContentsMargins(SPACE.m, 2, 4, 2)
        self.language_label = Label()
        self.language_label.setObjectName("codeLanguage")
        self.copy_button = QToolButton()
        self.copy_button.setObjectName("codeCopy")
        self.copy_button.setText("Copy")
        self.copy_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.copy_button.setAccessibleName("Copy code")
        self.copy_button.setToolTip("Copy this code to the clipboard")
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self._copy_icon = themed(self.copy_button, "copy", "muted_text", size=14)
        self.copy_button.clicked.connect(self.copy)
        row.addWidget(self.language_label)
        row.addStretch(1)
        row.addWidget(self.copy_button)
        self.view = MarkdownView(wrap=False)
        self.view.setObjectName("codeText")
        self.view.setAccessibleName("Code")
        font = fixed_font(body_font_size() * 0.9)  # fixed-pitch fonts look larger at the same size
        self.view.setFont(font)
        self.view.document().setDefaultFont(font)
        self.view.document().setDocumentMargin(SPACE.m)
        layout.addWidget(header)
        layout.addWidget(self.view)

    def set_code(self, code: str, language: str) -> None:
        dark = current().dark
        if (code, language, dark) == (self.code, self.language, self._dark):
            return
        self.code, self.language, self._dark = code, language, dark
        self.language_label.setText(language or "code")
        self.view.setPlainText(code)
        highlight_document(self.view.document(), language, dark)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copied.emit(f"{self.language} code".strip())
        self._copy_icon.set("check")
        self.copy_button.setText("Copied")
        QTimer.singleShot(COPIED_MS, self._copy_done)

    def _copy_done(self) -> None:
        try:
            self._copy_icon.set("copy")
            self.copy_button.setText("Copy")
        except RuntimeError:  # the card went away meanwhile
            pass


class MessageBody(QWidget):
    """What a message says: plain text (yours, a placeholder, an error) in one view, or an answer's Markdown
    as prose views and code cards in order. Widgets are reused while an answer streams, so the text so far
    is not rebuilt from scratch on every render."""

    link_activated = Signal(QUrl)
    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(SPACE.s)
        self.parts: list[QWidget] = []
        self._texts: list[tuple[str, str, str]] = []  # (kind, text, language) shown by each part

    def _part(self, index: int, kind: str) -> QWidget:
        """The part at `index`, of `kind`; a part of another kind there (and all after it) is replaced."""
        if index < len(self.parts) and isinstance(self.parts[index], CodeCard) == (kind == "code"):
            return self.parts[index]
        self._drop_from(index)
        if kind == "code":
            part = CodeCard()
            part.copied.connect(self.copied)
        else:
            part = MarkdownView()
            part.link_activated.connect(self.link_activated)
            font = part.font()
            font.setPointSizeF(body_font_size())
            part.setFont(font)
            part.document().setDefaultFont(font)
        self.column.addWidget(part)
        self.parts.append(part)
        self._texts.append(("", "", ""))
        return part

    def _drop_from(self, index: int) -> None:
        for part in self.parts[index:]:
            self.column.removeWidget(part)
            part.hide()
            part.deleteLater()
        del self.parts[index:]
        del self._texts[index:]

    def clear(self) -> None:
        """No parts: the next render makes them anew (at the application's font size of then)."""
        self._drop_from(0)

    def set_plain(self, text: str) -> None:
        view = self._part(0, "plain")
        if self._texts[0] != ("plain", text, ""):
            view.setPlainText(text)
            set_line_height(view.document(), TYPE.body_line_height)
            self._texts[0] = ("plain", text, "")
        self._drop_from(1)

    def set_markdown(self, text: str, force: bool = False) -> None:
        colors = current()
        pieces = segments(text)
        for index, piece in enumerate(pieces):
            part = self._part(index, piece.kind)
            key = (piece.kind, piece.text, piece.language)
            if isinstance(part, CodeCard):
                part.set_code(piece.text, piece.language)
            elif force or self._texts[index] != key:
                set_markdown(part.document(), piece.text)
                set_line_height(part.document(), TYPE.body_line_height)
                tighten_lists(part.document())
                shade_inline_code(part.document(), colors.surface_alt)
                style_tables(part.document(), colors.border, colors.surface_alt)
            self._texts[index] = key
        if not pieces:
            self.set_plain("")
            return
        self._drop_from(len(pieces))

    def toPlainText(self) -> str:  # noqa: N802 - mirrors QTextEdit's name, which tests and callers expect
        return "\n".join(part.code if isinstance(part, CodeCard) else part.toPlainText() for part in self.parts)

    def code_cards(self) -> list[CodeCard]:
        return [part for part in self.parts if isinstance(part, CodeCard)]

    def ideal_width(self) -> int:
        """The width the text needs on one line per paragraph (for sizing your bubbles)."""
        if not self.parts or isinstance(self.parts[0], CodeCard):
            return self.width()
        probe = self.parts[0].document().clone(self)
        probe.setTextWidth(-1)
        width = int(probe.idealWidth())
        probe.deleteLater()
        return width
