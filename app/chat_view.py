"""The conversation on screen: one MessageWidget per row of a MessageListModel, in a scroll area.

Markdown goes through QTextBrowser.setMarkdown. While an answer streams, a message re-renders on a timer
whose interval grows with the cost of the last render (at least 100 ms; three times the last render time), so
a long answer never ties up the UI thread; the final render happens at once when the answer ends.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QPalette, QTextBlockFormat, QTextCursor, QTextDocument, QTextFormat
from PySide6.QtWidgets import (
    QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QScrollArea, QSizePolicy, QTextBrowser,
    QVBoxLayout, QWidget,
)

from app import store as S
from app.markdown import COPY_SCHEME, code_blocks, with_copy_links
from app.models import MessageListModel
from app.store import Message

# GitHub dialect (tables, fenced code, task lists); raw HTML in an answer is shown as text, not interpreted.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)
MIN_RENDER_MS = 100
RENDER_COST_FACTOR = 3
STICK_TO_BOTTOM_PX = 48

STATUS_TAGS = {
    S.STREAMING: "…",
    S.STOPPED: "[stopped]",
    S.INTERRUPTED: "[interrupted]",
    S.FAILED: "[error]",
}


def shade_code_blocks(document: QTextDocument, palette: QPalette) -> None:
    """Give fenced code blocks a background (setMarkdown marks them with the BlockCodeFence property)."""
    shade = QTextBlockFormat()
    shade.setBackground(palette.color(QPalette.ColorRole.AlternateBase if palette.color(QPalette.ColorRole.Base).lightness() > 128
                                      else QPalette.ColorRole.Window))
    block = document.begin()
    cursor = None
    while block.isValid():
        if block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            cursor = cursor or QTextCursor(document)
            cursor.setPosition(block.position())
            cursor.mergeBlockFormat(shade)
        block = block.next()


class MarkdownView(QTextBrowser):
    """A read-only markdown view as tall as its content (the chat's scroll area does the scrolling)."""

    link_activated = Signal(QUrl)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.anchorClicked.connect(self.link_activated)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def _fit(self, *_: object) -> None:
        height = int(self.document().size().height()) + 2 * self.frameWidth() + 2
        bar = self.horizontalScrollBar()
        if bar.isVisible():
            height += bar.sizeHint().height()
        if height != self.height():
            self.setFixedHeight(max(height, self.fontMetrics().height() + 8))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit()


class MessageWidget(QFrame):
    """One message: who, the rendered text, and its actions (Copy; Edit for the user's messages)."""

    edit_submitted = Signal(int, str)  # message id, new text
    copied = Signal(str)  # what was copied (for the status bar)

    def __init__(self, message: Message, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message = message
        self.render_count = 0
        self.last_render_ms = 0.0
        self._rendered_text: str | None = None
        self._rendered_at = float("-inf")
        self.setObjectName("userMessage" if message.role == "user" else "assistantMessage")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(4)

        header = QHBoxLayout()
        self.who = QLabel("You" if message.role == "user" else "Assistant")
        self.who.setObjectName("messageAuthor")
        self.status_label = QLabel()
        self.status_label.setObjectName("messageStatus")
        header.addWidget(self.who)
        header.addWidget(self.status_label)
        header.addStretch(1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setAccessibleName("Copy message")
        self.copy_button.setToolTip("Copy this message as markdown")
        self.copy_button.clicked.connect(self.copy_text)
        header.addWidget(self.copy_button)
        self.edit_button: QPushButton | None = None
        if message.role == "user":
            self.edit_button = QPushButton("Edit")
            self.edit_button.setAccessibleName("Edit message and resend")
            self.edit_button.setToolTip("Edit this message and get a new answer")
            self.edit_button.clicked.connect(self.start_editing)
            header.addWidget(self.edit_button)
        layout.addLayout(header)

        self.body = MarkdownView()
        self.body.setAccessibleName("Your message" if message.role == "user" else "Answer")
        self.body.link_activated.connect(self._link)
        layout.addWidget(self.body)

        self.editor: QPlainTextEdit | None = None
        self.edit_row: QWidget | None = None

        self.footer = QLabel()
        self.footer.setObjectName("messageFooter")
        self.footer.setWordWrap(True)
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.footer)

        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self.render)
        self.set_message(message)

    # -- content -------------------------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self.message.status == S.STREAMING

    def set_message(self, message: Message) -> None:
        self.message = message
        tag = STATUS_TAGS.get(message.status, "")
        self.status_label.setText(tag)
        self.status_label.setAccessibleName(f"Status: {message.status}")
        self.footer.setText(self._footer_text(message))
        self.footer.setVisible(bool(self.footer.text()))
        self.body.setAccessibleDescription(message.content[:200])
        if self.streaming:
            self._throttled_render()
        else:
            self._render_timer.stop()
            self.render()

    def _throttled_render(self) -> None:
        """Render now if the last render is old enough, else once when it is (leading and trailing edge)."""
        interval_ms = max(MIN_RENDER_MS, RENDER_COST_FACTOR * self.last_render_ms)
        waited_ms = (time.perf_counter() - self._rendered_at) * 1000
        if waited_ms >= interval_ms:
            self._render_timer.stop()
            self.render()
        elif not self._render_timer.isActive():
            self._render_timer.start(int(interval_ms - waited_ms) + 1)

    def _footer_text(self, message: Message) -> str:
        stats = message.stats or {}
        parts = []
        if message.status == S.INTERRUPTED:
            parts.append("[interrupted] " + (stats.get("error") or "the answer was cut off"))
        elif message.status == S.FAILED:
            error = stats.get("error", "the engine reported an error")
            parts.append(f"Error: {error}" + (f" - {stats['hint']}" if stats.get("hint") else ""))
        elif message.status == S.STOPPED:
            parts.append("Stopped")
        if message.role == "assistant" and stats.get("tokens"):
            parts.append(
                f"{stats['tokens']} tokens · {stats.get('tokens_per_s', 0):.1f} tokens/s · "
                f"{stats.get('tokens_per_pass', 0):.2f} tokens/pass"
            )
        return "   ".join(parts)

    def render(self) -> None:
        text = self.message.content
        if text == self._rendered_text:
            return
        started = time.perf_counter()
        if not text and self.streaming:
            self.body.setPlainText("…")
        elif self.message.role == "user":  # what the user typed is shown as typed
            self.body.setPlainText(text)
        else:
            self.body.document().setMarkdown(with_copy_links(text), MARKDOWN_FEATURES)
            shade_code_blocks(self.body.document(), self.palette())
        self._rendered_text = text
        self._rendered_at = time.perf_counter()
        self.last_render_ms = (self._rendered_at - started) * 1000
        self.render_count += 1

    def copy_text(self) -> None:
        QGuiApplication.clipboard().setText(self.message.content)
        self.copied.emit("message")

    def _link(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            try:
                index = int(url.path())
                block = code_blocks(self.message.content)[index]
            except (ValueError, IndexError):
                return
            QGuiApplication.clipboard().setText(block.code)
            self.copied.emit(f"{block.language} code".strip())
        elif url.scheme() in ("http", "https", "mailto"):
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)

    # -- editing (user messages) ---------------------------------------------------------------------------

    def start_editing(self) -> None:
        if self.editor is not None:
            self.editor.setFocus()
            return
        self.editor = QPlainTextEdit(self.message.content)
        self.editor.setAccessibleName("Edit message")
        self.editor.setMaximumHeight(160)
        self.edit_row = QWidget()
        row = QHBoxLayout(self.edit_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.resend_button = QPushButton("Save && resend")
        self.resend_button.setAccessibleName("Save edited message and resend")
        self.resend_button.setDefault(True)
        self.resend_button.clicked.connect(self._submit_edit)
        self.cancel_edit_button = QPushButton("Cancel")
        self.cancel_edit_button.setAccessibleName("Cancel editing")
        self.cancel_edit_button.clicked.connect(self.stop_editing)
        row.addWidget(self.resend_button)
        row.addWidget(self.cancel_edit_button)
        layout = self.layout()
        index = layout.indexOf(self.body)
        layout.insertWidget(index + 1, self.editor)
        layout.insertWidget(index + 2, self.edit_row)
        self.body.hide()
        self.editor.setFocus()

    def stop_editing(self) -> None:
        if self.editor is None:
            return
        for widget in (self.editor, self.edit_row):
            widget.hide()
            widget.deleteLater()
        self.editor = self.edit_row = None
        self.body.show()

    def _submit_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText().strip()
        if text:
            self.stop_editing()
            self.edit_submitted.emit(self.message.id, text)

    def set_actions_enabled(self, enabled: bool) -> None:
        if self.edit_button is not None:
            self.edit_button.setEnabled(enabled)


class ChatView(QScrollArea):
    """Binds to a MessageListModel: rows in, rows out, rows changed."""

    edit_submitted = Signal(int, str)
    copied = Signal(str)

    def __init__(self, model: MessageListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.widgets: list[MessageWidget] = []
        self._actions_enabled = True
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAccessibleName("Conversation")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        container = QWidget()
        container.setObjectName("chatContainer")
        self.column = QVBoxLayout(container)
        self.column.setContentsMargins(16, 12, 16, 12)
        self.column.setSpacing(10)
        self.placeholder = QLabel()
        self.placeholder.setObjectName("chatPlaceholder")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.column.addWidget(self.placeholder)
        self.column.addStretch(1)
        self.setWidget(container)
        self.set_placeholder("Start a conversation: type a message below and press Enter.")
        self._stick = True
        self.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self.verticalScrollBar().valueChanged.connect(self._value_changed)
        model.modelReset.connect(self._rebuild)
        model.rowsInserted.connect(self._inserted)
        model.rowsRemoved.connect(self._removed)
        model.dataChanged.connect(self._changed)
        self._rebuild()

    def set_placeholder(self, text: str) -> None:
        self.placeholder.setText(text)

    # -- model binding -------------------------------------------------------------------------------------

    def _make(self, message: Message) -> MessageWidget:
        widget = MessageWidget(message)
        widget.edit_submitted.connect(self.edit_submitted)
        widget.copied.connect(self.copied)
        widget.set_actions_enabled(self._actions_enabled)
        return widget

    def _rebuild(self) -> None:
        for widget in self.widgets:
            self.column.removeWidget(widget)
            widget.deleteLater()
        self.widgets = []
        for message in self.model.rows:
            widget = self._make(message)
            self.column.insertWidget(self.column.count() - 1, widget)
            self.widgets.append(widget)
        self.placeholder.setVisible(not self.widgets)
        self._stick = True
        QTimer.singleShot(0, self.scroll_to_bottom)

    def _inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        for row in range(first, last + 1):
            widget = self._make(self.model.rows[row])
            self.column.insertWidget(1 + row, widget)  # 0 is the placeholder
            self.widgets.insert(row, widget)
        self.placeholder.setVisible(not self.widgets)
        self._stick = True

    def _removed(self, parent: QModelIndex, first: int, last: int) -> None:
        for widget in self.widgets[first : last + 1]:
            self.column.removeWidget(widget)
            widget.hide()
            widget.deleteLater()
        del self.widgets[first : last + 1]
        self.placeholder.setVisible(not self.widgets)

    def _changed(self, top: QModelIndex, bottom: QModelIndex, roles: list[int] | None = None) -> None:
        for row in range(top.row(), bottom.row() + 1):
            if 0 <= row < len(self.widgets):
                self.widgets[row].set_message(self.model.rows[row])

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit buttons are off while an answer streams."""
        self._actions_enabled = enabled
        for widget in self.widgets:
            widget.set_actions_enabled(enabled)

    # -- scrolling: follow the answer while the user is at the bottom ---------------------------------------

    def _value_changed(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = bar.maximum() - value <= STICK_TO_BOTTOM_PX

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(maximum)

    def scroll_to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())
