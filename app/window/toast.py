"""Toasts: short feedback ("Copied python code", "Exported the chat to …") in a rounded card that floats over
the bottom of the chat for a few seconds, then goes. It wraps instead of being cut, and it never takes room
from the window's layout (it is a child drawn on top, not a widget in a bar).

One toast at a time: a new one replaces the one on screen. A click dismisses it.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QTimer, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QWidget

from app.theme.tokens import SPACE
from app.window.labels import Label

DEFAULT_MS = 4000
MAX_WIDTH_PX = 560
BOTTOM_GAP_PX = 96  # above the message box


class Toast(QFrame):
    """Shows over `host` (the chat pane), centred near its bottom."""

    def __init__(self, host: QWidget) -> None:
        super().__init__(host)
        self.host = host
        self.setObjectName("toast")
        self.setAccessibleName("Notification")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE.l, SPACE.s + 2, SPACE.l, SPACE.s + 2)
        self.label = Label()
        self.label.setObjectName("toastText")
        self.label.setWordWrap(True)
        layout.addWidget(self.label)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.dismiss)
        host.installEventFilter(self)
        self.hide()

    def show_message(self, text: str, timeout_ms: int = DEFAULT_MS) -> None:
        self.label.setText(text)
        self.setAccessibleDescription(text)
        self._place()
        self.show()
        self.raise_()
        self._timer.start(max(timeout_ms, 1000))

    def text(self) -> str:
        """What the toast says until its time is up ("" once it went; said before the window showed, it shows
        with the window)."""
        return self.label.text() if self._timer.isActive() else ""

    def dismiss(self) -> None:
        self._timer.stop()
        self.hide()

    def _place(self) -> None:
        """As wide as the text on one line, at most MAX_WIDTH_PX (or the chat's width); longer text wraps."""
        widest = min(MAX_WIDTH_PX, max(self.host.width() - 2 * SPACE.xl, 160)) - 2 * SPACE.l
        one_line = self.label.fontMetrics().horizontalAdvance(self.label.text()) + 2
        self.label.setFixedWidth(min(one_line, widest))
        self.adjustSize()
        self.move((self.host.width() - self.width()) // 2, max(self.host.height() - self.height() - BOTTOM_GAP_PX, 0))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.dismiss()
        event.accept()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False
