"""A thinking model's thinking above its answer, in muted words: open while the model thinks ("Thinking… 5 s"),
folded to one line ("Thought for 12 s") once the answer starts, one click to open again. It stays open when
there is no answer (the answer was cut off while the model was still thinking)."""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import QFrame, QToolButton, QVBoxLayout, QWidget

from app.chat.message_text import MarkdownView
from app.chat.rendering import set_line_height
from app.chat.thinking_words import thought_summary
from app.conversations import store as S
from app.conversations.store import Message
from app.theme.icons import themed
from app.theme.tokens import SPACE, TYPE


def thinking_title(message: Message, now: float | None = None) -> str:
    """The thinking block's one line: "Thinking… 5 s" while the model thinks, then "Thought for 12 s"."""
    stats = message.stats or {}
    started = stats.get("thinking_started_at")
    if message.status == S.STREAMING and "thinking_seconds" not in stats:
        if isinstance(started, (int, float)):
            return f"Thinking… {int(max(0.0, (time.time() if now is None else now) - started))} s"
        return "Thinking…"
    return thought_summary(stats)


class ThinkingBlock(QFrame):
    """A thinking model's thinking above its answer: a one-line toggle (a chevron and the title) over the
    thinking in muted words with a rule at its left. Folded or open as `show_thinking` says, until the reader
    clicks: from then on this block stays as the reader left it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinkingBlock")
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(SPACE.xs)
        self.toggle = QToolButton()
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self._icon = themed(self.toggle, "chevron-right", "muted_text", size=14)
        self.toggle.clicked.connect(self._clicked)
        self.text_frame = QFrame()
        self.text_frame.setObjectName("thinkingText")
        inner = QVBoxLayout(self.text_frame)
        inner.setContentsMargins(SPACE.m, 0, 0, 0)
        self.view = MarkdownView()
        self.view.setObjectName("thinkingView")
        self.view.setAccessibleName("The model's thinking")
        self._follow_font()
        inner.addWidget(self.view)
        column.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        column.addWidget(self.text_frame)
        self.expanded = False
        self.reader_choice: bool | None = None  # open (True) or folded (False) by a click
        self._text = ""
        self._set_expanded(False)

    def show_thinking(self, text: str, title: str, open_by_default: bool) -> None:
        """Show `text` under `title`; open or folded as `open_by_default` says unless the reader chose."""
        if text != self._text:
            if self._text and text.startswith(self._text):  # it grew while streaming: add the new words only
                cursor = QTextCursor(self.view.document())
                cursor.movePosition(QTextCursor.MoveOperation.End)
                cursor.insertText(text[len(self._text) :])  # new lines take the last one's line height
            else:
                self.view.setPlainText(text)
                set_line_height(self.view.document(), TYPE.body_line_height - 10)
            self._text = text
        self.set_title(title)
        self._set_expanded(open_by_default if self.reader_choice is None else self.reader_choice)

    def set_title(self, title: str) -> None:
        if self.toggle.text() != title:
            self.toggle.setText(title)
            self._describe()

    def text(self) -> str:
        return self._text

    def _follow_font(self) -> None:
        """The thinking at the application's font size: a step below the answer's words."""
        font = self.view.font()
        font.setPointSizeF(QGuiApplication.font().pointSizeF())
        self.view.setFont(font)
        self.view.document().setDefaultFont(font)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt signature
        """A text size change: the thinking follows it (its view's font is its own, set when made)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._follow_font()

    def _clicked(self) -> None:
        self.reader_choice = not self.expanded
        self._set_expanded(self.reader_choice)

    def _set_expanded(self, expanded: bool) -> None:
        if expanded == self.expanded and self.text_frame.isHidden() != expanded:
            return
        self.expanded = expanded
        self.text_frame.setVisible(expanded)
        self._icon.set("chevron-down" if expanded else "chevron-right")
        self._describe()

    def _describe(self) -> None:
        what = "Hide the model's thinking" if self.expanded else "Show the model's thinking"
        self.toggle.setAccessibleName(f"{self.toggle.text()}: {what.lower()}")
        self.toggle.setToolTip(what)
