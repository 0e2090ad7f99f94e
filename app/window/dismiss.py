"""A floating card (the speed details) closes as popovers do: Esc, or a click anywhere outside it.

While the card shows, one filter on the application watches key presses and mouse presses. Esc is taken
before any shortcut on it (the window's "Stop the answer"), so the first Esc closes the card and the next
one stops the answer. A click outside closes the card and still does what it was for (it is not eaten); a
click on the card's own toggle is left to the toggle, which closes it itself.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent, QMouseEvent
from PySide6.QtWidgets import QApplication, QWidget


def _inside(widget: QWidget, event: QMouseEvent) -> bool:
    point = widget.mapFromGlobal(event.globalPosition().toPoint())
    return widget.isVisible() and widget.rect().contains(point)


class Dismisser(QObject):
    """Calls `close()` on Esc or on a mouse press outside `card` and `toggle`, while started."""

    def __init__(self, card: QWidget, toggle: QWidget, close: Callable[[], None]) -> None:
        super().__init__(card)
        self.card, self.toggle, self.close = card, toggle, close
        self.active = False

    def start(self) -> None:
        if not self.active:
            QApplication.instance().installEventFilter(self)
            self.active = True

    def stop(self) -> None:
        if self.active:
            QApplication.instance().removeEventFilter(self)
            self.active = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt signature
        kind = event.type()
        if kind in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress):
            if isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Escape and self.card.isVisible():
                if kind == QEvent.Type.ShortcutOverride:
                    event.accept()  # Esc comes as a key press here, not as the window's shortcut
                else:
                    self.close()
                return True
        elif kind == QEvent.Type.MouseButtonPress and isinstance(event, QMouseEvent):
            if not _inside(self.card, event) and not _inside(self.toggle, event):  # closing twice does no harm
                self.close()
        return False
