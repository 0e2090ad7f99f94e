"""The conversation on screen: one MessageWidget per row of a MessageListModel, in a scroll area; your
messages as bubbles on the right, answers as cards, actions on hover, code blocks coloured by Pygments.

Markdown goes through QTextBrowser.setMarkdown. While an answer streams, a message re-renders on a timer
whose interval grows with the cost of the last render (at least 100 ms; three times the last render time), so
a long answer never ties up the UI thread; the final render happens at once when the answer ends.
"""

from __future__ import annotations

import time
from datetime import datetime

from PySide6.QtCore import QModelIndex, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QPalette, QTextBlockFormat, QTextCursor, QTextDocument, QTextFormat
from PySide6.QtWidgets import (
    QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QScrollArea, QSizePolicy, QTextBrowser,
    QToolButton, QVBoxLayout, QWidget,
)

from app.conversations import store as S
from app.chat.highlight import highlight_code_blocks
from app.chat.markdown import COPY_SCHEME, code_blocks, with_copy_links
from app.conversations.list_models import MessageListModel
from app.conversations.store import Message

# GitHub dialect (tables, fenced code, task lists); raw HTML in an answer is shown as text, not interpreted.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)
MIN_RENDER_MS = 100
RENDER_COST_FACTOR = 3
STICK_TO_BOTTOM_PX = 48
PROGRESS_MS = 500  # the "reading your message… N s" line counts up
USER_BUBBLE_SHARE = 0.78  # your messages take at most this share of the row
MIN_BUBBLE_PX = 90
MAX_COLUMN_PX = 880  # the conversation column stays readable on a wide window
SIDE_MARGIN_PX = 20
SUGGESTIONS = (
    "Explain speculative decoding in two sentences.",
    "Write a Python function that checks whether a word is a palindrome.",
    "Give me three ideas for a weekend trip by train.",
)

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


def sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter, no trailing full stop (the caller adds one)."""
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:]


def error_text(message: Message) -> str:
    """A failed answer's error in plain sentences: what happened, then what to do."""
    stats = message.stats or {}
    text = sentence(stats.get("error") or "the engine reported an error") + "."
    if stats.get("hint"):
        text += " " + sentence(stats["hint"]) + "."
    return text


def format_time(timestamp: float, now: float | None = None) -> str:
    """"14:02" today, "23 Nov 14:02" on another day (local time)."""
    if timestamp <= 0:
        return ""
    moment = datetime.fromtimestamp(timestamp)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    return moment.strftime("%H:%M") if moment.date() == today else moment.strftime("%d %b %H:%M").lstrip("0")


def _action_button(text: str, name: str, tip: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setAccessibleName(name)
    button.setToolTip(tip)
    button.setObjectName("messageAction")
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class MessageWidget(QWidget):
    """One message as a bubble (yours, on the right) or a card (the answer): who and when, the rendered text,
    progress while the engine reads a long prompt, stats or the error, and actions that appear on hover
    (Copy, Edit for your messages; Copy, Regenerate and the alternatives of the last answer)."""

    edit_submitted = Signal(int, str)  # message id, new text
    copied = Signal(str)  # what was copied (for the status bar)
    regenerate_requested = Signal()
    alternative_requested = Signal(int, int)  # message id, step (-1 previous, +1 next)

    def __init__(self, message: Message, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message = message
        self.user = message.role == "user"
        self.render_count = 0
        self.last_render_ms = 0.0
        self._rendered: tuple[str, str] | None = None  # (text, status) last rendered
        self._rendered_at = float("-inf")
        self._is_last = False
        self._hovered = False
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        row = QHBoxLayout()
        self.bubble = QFrame()
        self.bubble.setObjectName("userMessage" if self.user else "assistantMessage")
        if self.user:
            row.addStretch(1)
        row.addWidget(self.bubble, 0 if self.user else 1)
        outer.addLayout(row)
        layout = QVBoxLayout(self.bubble)
        layout.setContentsMargins(14, 8, 14, 10)
        layout.setSpacing(4)

        header = QHBoxLayout()
        header.setSpacing(8)
        self.who = QLabel("You" if self.user else "Assistant")
        self.who.setObjectName("messageAuthor")
        self.time_label = QLabel()
        self.time_label.setObjectName("messageTime")
        self.status_label = QLabel()
        self.status_label.setObjectName("messageStatus")
        header.addWidget(self.who)
        header.addWidget(self.time_label)
        header.addWidget(self.status_label)
        header.addStretch(1)
        layout.addLayout(header)

        self.body = MarkdownView()
        self.body.setAccessibleName("Your message" if self.user else "Answer")
        self.body.link_activated.connect(self._link)
        layout.addWidget(self.body)

        self.progress = QLabel()
        self.progress.setObjectName("messageProgress")
        self.progress.setAccessibleName("Answer progress")
        self.progress.hide()
        layout.addWidget(self.progress)

        self.editor: QPlainTextEdit | None = None
        self.edit_row: QWidget | None = None

        self.footer = QLabel()
        self.footer.setObjectName("messageFooter")
        self.footer.setWordWrap(True)
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.footer)

        self.actions = QWidget()
        self.actions.setObjectName("messageActions")
        actions = QHBoxLayout(self.actions)
        actions.setContentsMargins(0, 0, 0, 0)
        actions.setSpacing(2)
        self.copy_button = _action_button("Copy", "Copy message", "Copy this message as markdown")
        self.copy_button.clicked.connect(self.copy_text)
        actions.addWidget(self.copy_button)
        self.edit_button: QToolButton | None = None
        self.regenerate_button: QToolButton | None = None
        if self.user:
            self.edit_button = _action_button("Edit", "Edit message and resend", "Edit this message and get a new answer")
            self.edit_button.clicked.connect(self.start_editing)
            actions.addWidget(self.edit_button)
        else:
            self.regenerate_button = _action_button("Regenerate", "Regenerate the answer",
                                                    "Another answer; this one is kept to flip back to (Ctrl+R)")
            self.regenerate_button.clicked.connect(self.regenerate_requested)
            actions.addWidget(self.regenerate_button)
        self.previous_button = _action_button("‹", "Previous answer", "Show the previous answer")
        self.previous_button.clicked.connect(lambda: self.alternative_requested.emit(self.message.id, -1))
        self.alternative_label = QLabel()
        self.alternative_label.setObjectName("messageTime")
        self.next_button = _action_button("›", "Next answer", "Show the next answer")
        self.next_button.clicked.connect(lambda: self.alternative_requested.emit(self.message.id, +1))
        for widget in (self.previous_button, self.alternative_label, self.next_button):
            actions.addWidget(widget)
        policy = self.actions.sizePolicy()
        policy.setRetainSizeWhenHidden(True)  # hover shows the actions without moving the text
        self.actions.setSizePolicy(policy)
        under = QHBoxLayout()  # the actions sit under the bubble, on its side
        under.setContentsMargins(8 if not self.user else 0, 0, 8 if self.user else 0, 0)
        if self.user:
            under.addStretch(1)
        under.addWidget(self.actions)
        if not self.user:
            under.addStretch(1)
        outer.addLayout(under)

        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self.render)
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(PROGRESS_MS)
        self._progress_timer.timeout.connect(self._show_progress)
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
        self.time_label.setText(format_time(message.created_at))
        self.footer.setText(self._footer_text(message))
        self.footer.setVisible(bool(self.footer.text()))
        self.body.setAccessibleDescription(message.content[:200])
        self._show_progress()
        self._show_alternatives()
        if self.streaming:
            self._throttled_render()
        else:
            self._render_timer.stop()
            self.render()

    def progress_text(self) -> str:
        """While the answer has no text yet: what the engine is doing and for how long; "" otherwise."""
        if not self.streaming or self.message.content:
            return ""
        seconds = int(max(0.0, time.time() - self.message.created_at))
        stats = self.message.stats or {}
        if "prompt_tokens" in stats:
            new = stats["prompt_tokens"] - stats.get("reused_tokens", 0)
            expected = stats.get("expected_s")  # from the speed the last long prompt was read at
            estimate = f" of about {expected:.0f} s" if expected and expected >= 2 else ""
            return f"Reading your message ({new:,} tokens)… {seconds} s{estimate}"
        return f"Waiting for the engine… {seconds} s"

    def _show_progress(self) -> None:
        text = self.progress_text()
        self.progress.setText(text)
        self.progress.setVisible(bool(text))
        self.body.setVisible(not text and self.editor is None)  # the progress line stands in for the "…"
        if text and not self._progress_timer.isActive():
            self._progress_timer.start()
        elif not text:
            self._progress_timer.stop()

    def _show_alternatives(self) -> None:
        m = self.message
        several = m.alt_count > 1 and not self.user
        for widget in (self.previous_button, self.alternative_label, self.next_button):
            widget.setVisible(several)
        if several:
            self.alternative_label.setText(f"{m.alt_index + 1} / {m.alt_count}")
            self.previous_button.setEnabled(m.alt_index > 0)
            self.next_button.setEnabled(m.alt_index < m.alt_count - 1)
        self._update_actions_visibility()

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
        if message.status == S.INTERRUPTED:  # the banner says why the engine stopped; no pids or signals here
            engine = stats.get("kind") == "engine_died" or "engine" in stats.get("error", "")
            parts.append("Interrupted: " + ("the engine stopped before the answer was finished" if engine
                                            else stats.get("error") or "the answer was cut off"))
        elif message.status == S.FAILED and message.content:
            parts.append(error_text(message))
        elif message.status == S.STOPPED:
            parts.append("Stopped")
        if message.role == "assistant" and stats.get("tokens"):
            parts.append(
                f"{stats['tokens']} tokens · {stats.get('tokens_per_s', 0):.1f} tokens/s · "
                f"{stats.get('tokens_per_pass', 0):.2f} tokens/pass"
            )
        return "   ".join(parts)

    def render(self) -> None:
        text, status = self.message.content, self.message.status
        if (text, status) == self._rendered:
            return
        started = time.perf_counter()
        if not text and self.streaming:
            self.body.setPlainText("…")
        elif not text and status == S.FAILED:  # nothing was written: the error is the message
            self.body.setPlainText(error_text(self.message))
        elif self.user:  # what the user typed is shown as typed
            self.body.setPlainText(text)
        else:
            self.body.document().setMarkdown(with_copy_links(text), MARKDOWN_FEATURES)
            shade_code_blocks(self.body.document(), self.palette())
            highlight_code_blocks(self.body.document(), self.palette().color(QPalette.ColorRole.Base).lightness() < 128)
        self.bubble.setProperty("failed", status == S.FAILED)
        self._rendered = (text, status)
        self._rendered_at = time.perf_counter()
        self.last_render_ms = (self._rendered_at - started) * 1000
        self.render_count += 1
        self._fit_bubble()

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

    # -- layout and hover ----------------------------------------------------------------------------------

    def _fit_bubble(self) -> None:
        """Your messages: a bubble as wide as the text, at most USER_BUBBLE_SHARE of the row."""
        if not self.user or self.width() <= 0:
            return
        widest = int(self.width() * USER_BUBBLE_SHARE)
        probe = self.body.document().clone(self)
        probe.setTextWidth(-1)
        margins = self.bubble.layout().contentsMargins()
        header = self.bubble.layout().itemAt(0).sizeHint().width()  # "You 12:02" must fit too
        ideal = max(int(probe.idealWidth()) + 16, header) + margins.left() + margins.right()
        probe.deleteLater()
        self.bubble.setFixedWidth(max(MIN_BUBBLE_PX, min(widest, ideal)))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit_bubble()

    def set_last(self, last: bool) -> None:
        """Regenerate is offered on the last answer only."""
        self._is_last = last
        if self.regenerate_button is not None:
            self.regenerate_button.setVisible(last)
        self._update_actions_visibility()

    def enterEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        self._hovered = True
        self._update_actions_visibility()
        super().enterEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        self._hovered = False
        self._update_actions_visibility()
        super().leaveEvent(event)

    def _update_actions_visibility(self) -> None:
        """Actions show on hover, on the last message (where the next step usually is), and for answers
        with alternatives to flip through; never while editing or streaming."""
        pinned = self._is_last or (self.message.alt_count > 1 and not self.user)
        self.actions.setVisible((self._hovered or pinned) and self.editor is None and not self.streaming)

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
        layout = self.bubble.layout()
        index = layout.indexOf(self.body)
        layout.insertWidget(index + 1, self.editor)
        layout.insertWidget(index + 2, self.edit_row)
        self.bubble.setFixedWidth(int(self.width() * USER_BUBBLE_SHARE))
        self.body.hide()
        self._update_actions_visibility()
        self.editor.setFocus()

    def stop_editing(self) -> None:
        if self.editor is None:
            return
        for widget in (self.editor, self.edit_row):
            widget.hide()
            widget.deleteLater()
        self.editor = self.edit_row = None
        self.body.show()
        self._fit_bubble()
        self._update_actions_visibility()

    def _submit_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText().strip()
        if text:
            self.stop_editing()
            self.edit_submitted.emit(self.message.id, text)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit and the alternatives are off while an answer streams."""
        for button in (self.edit_button, self.previous_button, self.next_button):
            if button is not None:
                button.setEnabled(enabled)
        if enabled:
            self._show_alternatives()


class ChatView(QScrollArea):
    """Binds to a MessageListModel: rows in, rows out, rows changed. Empty, it shows a welcome with the
    model pair and a few suggestions to start from."""

    edit_submitted = Signal(int, str)
    copied = Signal(str)
    regenerate_requested = Signal()
    alternative_requested = Signal(int, int)  # message id, step
    suggestion_clicked = Signal(str)

    def __init__(self, model: MessageListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.widgets: list[MessageWidget] = []
        self._actions_enabled = True
        self._regenerate_enabled = True
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAccessibleName("Conversation")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        container = QWidget()
        container.setObjectName("chatContainer")
        self.column = QVBoxLayout(container)  # centred by its side margins (resizeEvent), not a nested layout
        self.column.setContentsMargins(SIDE_MARGIN_PX, 16, SIDE_MARGIN_PX, 16)
        self.column.setSpacing(14)
        self.placeholder = self._welcome()
        self.column.addWidget(self.placeholder)
        self.column.addStretch(1)
        self.setWidget(container)
        self._stick = True
        self.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self.verticalScrollBar().valueChanged.connect(self._value_changed)
        model.modelReset.connect(self._rebuild)
        model.rowsInserted.connect(self._inserted)
        model.rowsRemoved.connect(self._removed)
        model.dataChanged.connect(self._changed)
        self._rebuild()

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        side = max(SIDE_MARGIN_PX, (self.viewport().width() - MAX_COLUMN_PX) // 2)
        self.column.setContentsMargins(side, 16, side, 16)

    def _welcome(self) -> QWidget:
        welcome = QWidget()
        welcome.setObjectName("chatPlaceholder")
        layout = QVBoxLayout(welcome)
        layout.setContentsMargins(0, 60, 0, 0)
        layout.setSpacing(10)
        title = QLabel("How can I help?")
        title.setObjectName("welcomeTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder_label = QLabel()
        self.placeholder_label.setObjectName("welcomeText")
        self.placeholder_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder_label.setWordWrap(True)
        layout.addWidget(title)
        layout.addWidget(self.placeholder_label)
        self.suggestion_buttons = []
        for text in SUGGESTIONS:
            button = QPushButton(text)
            button.setObjectName("suggestion")
            button.setAccessibleName(f"Suggestion: {text}")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, t=text: self.suggestion_clicked.emit(t))
            row = QHBoxLayout()
            row.addStretch(1)
            row.addWidget(button)
            row.addStretch(1)
            layout.addLayout(row)
            self.suggestion_buttons.append(button)
        return welcome

    def set_placeholder(self, text: str) -> None:
        self.placeholder_label.setText(text)

    def placeholder_text(self) -> str:
        return self.placeholder_label.text()

    # -- model binding -------------------------------------------------------------------------------------

    def _make(self, message: Message) -> MessageWidget:
        widget = MessageWidget(message)
        widget.edit_submitted.connect(self.edit_submitted)
        widget.copied.connect(self.copied)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.alternative_requested.connect(self.alternative_requested)
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
        self._rows_changed()
        self._stick = True
        QTimer.singleShot(0, self.scroll_to_bottom)

    def _inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        for row in range(first, last + 1):
            widget = self._make(self.model.rows[row])
            self.column.insertWidget(1 + row, widget)  # 0 is the placeholder
            self.widgets.insert(row, widget)
        self._rows_changed()
        self._stick = True

    def _removed(self, parent: QModelIndex, first: int, last: int) -> None:
        for widget in self.widgets[first : last + 1]:
            self.column.removeWidget(widget)
            widget.hide()
            widget.deleteLater()
        del self.widgets[first : last + 1]
        self._rows_changed()

    def _changed(self, top: QModelIndex, bottom: QModelIndex, roles: list[int] | None = None) -> None:
        for row in range(top.row(), bottom.row() + 1):
            if 0 <= row < len(self.widgets):
                self.widgets[row].set_message(self.model.rows[row])
        self._rows_changed()

    def _rows_changed(self) -> None:
        self.placeholder.setVisible(not self.widgets)
        for number, widget in enumerate(self.widgets):
            widget.set_last(number == len(self.widgets) - 1)
        self.set_regenerate_enabled(self._regenerate_enabled)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit buttons and alternatives are off while an answer streams."""
        self._actions_enabled = enabled
        for widget in self.widgets:
            widget.set_actions_enabled(enabled)

    def set_regenerate_enabled(self, enabled: bool) -> None:
        self._regenerate_enabled = enabled
        for widget in self.widgets:
            if widget.regenerate_button is not None:
                widget.regenerate_button.setEnabled(enabled)

    def last_answer(self) -> MessageWidget | None:
        return next((w for w in reversed(self.widgets) if not w.user), None)

    # -- scrolling: follow the answer while the user is at the bottom ---------------------------------------

    def _value_changed(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = bar.maximum() - value <= STICK_TO_BOTTOM_PX

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(maximum)

    def scroll_to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())
