"""A banner above the chat for things that need the user: the engine crashed (Restart), models failed to
load (Settings / Retry)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class Banner(QFrame):
    action_clicked = Signal(str)  # the action's name

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName("Alert")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        self.buttons: dict[str, QPushButton] = {}
        for name, text in (("restart", "&Restart engine"), ("retry", "&Retry"), ("settings", "Open &settings")):
            button = QPushButton(text)
            button.setAccessibleName(text.replace("&", ""))
            button.clicked.connect(lambda _=False, n=name: self.action_clicked.emit(n))
            layout.addWidget(button)
            self.buttons[name] = button
        self.close_button = QPushButton("Dismiss")
        self.close_button.setAccessibleName("Dismiss alert")
        self.close_button.clicked.connect(self.hide)
        layout.addWidget(self.close_button)
        self.hide()

    def show_message(self, text: str, actions: tuple[str, ...] = ()) -> None:
        self.label.setText(text)
        self.setAccessibleDescription(text)
        for name, button in self.buttons.items():
            button.setVisible(name in actions)
        self.show()
        first = next((self.buttons[a] for a in actions if a in self.buttons), None)
        if first is not None:
            first.setDefault(True)
