"""The message box: Enter sends, Shift+Enter starts a new line; grows with its text up to a few lines."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget

MIN_LINES, MAX_LINES = 2, 8


class InputBox(QPlainTextEdit):
    """Enter submits, Shift+Enter adds a line; with `cancellable`, Esc emits `cancelled` (a message edited in
    place: the window's Esc shortcut, Stop, is off then, as nothing streams while a message is edited)."""

    submitted = Signal(str)
    cancelled = Signal()

    def __init__(self, parent: QWidget | None = None, cancellable: bool = False) -> None:
        super().__init__(parent)
        self.cancellable = cancellable
        self.setPlaceholderText("Message")  # the keys are in the hint under the box
        self.setAccessibleName("Message input")
        self.setAccessibleDescription("Type a message. Enter sends it, Shift+Enter starts a new line.")
        self.setTabChangesFocus(True)  # Tab moves on to the Send button (keyboard navigation)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().contentsChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.cancellable and event.key() == Qt.Key.Key_Escape:
            self.cancelled.emit()
            event.accept()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submit()
            event.accept()
            return
        super().keyPressEvent(event)

    def submit(self) -> None:
        text = self.toPlainText()
        if text.strip():
            self.submitted.emit(text)

    def _fit(self) -> None:
        lines = max(MIN_LINES, min(MAX_LINES, self.document().blockCount()))
        margins = self.contentsMargins()
        height = lines * self.fontMetrics().lineSpacing() + int(2 * self.document().documentMargin())
        self.setFixedHeight(height + margins.top() + margins.bottom() + 4)
