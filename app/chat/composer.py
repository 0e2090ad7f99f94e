"""The composer: the message box and one round button that sends, and stops the answer while it streams."""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.system import resources
from app.chat.input_box import InputBox

SEND, STOP = "send", "stop"


class Composer(QFrame):
    send_requested = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 8, 8, 6)
        outer.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.input = InputBox()
        self.input.setObjectName("composerInput")
        self.button = QPushButton()
        self.button.setObjectName("sendButton")
        self.button.setFixedSize(38, 38)
        self.button.setIconSize(QSize(20, 20))
        self.button.clicked.connect(self._clicked)
        row.addWidget(self.input, 1)
        row.addWidget(self.button)
        outer.addLayout(row)
        self.hint = QLabel("Enter to send · Shift+Enter for a new line · Esc stops the answer")
        self.hint.setObjectName("composerHint")
        outer.addWidget(self.hint)
        self.input.submitted.connect(self.send_requested)
        self.mode = SEND
        self.set_mode(SEND)

    def set_mode(self, mode: str) -> None:
        """SEND: the button sends what is typed; STOP: an answer streams and the button stops it."""
        self.mode = mode
        sending = mode == SEND
        self.button.setIcon(resources.icon("send" if sending else "stop"))
        self.button.setProperty("stop", not sending)
        self.button.setAccessibleName("Send message" if sending else "Stop the answer")
        self.button.setToolTip("Send (Enter)" if sending else "Stop the answer; what was written so far is kept (Esc)")
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)

    def _clicked(self) -> None:
        if self.mode == STOP:
            self.stop_requested.emit()
        else:
            self.send_requested.emit(self.input.toPlainText())
