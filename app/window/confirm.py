"""Questions with the verb on the button ("Delete chat", "Download anyway") beside Cancel, in a card of the
app's own look (no stock warning icon). Before something that cannot be undone the verb is red and Cancel is
the default, so Enter or Esc never deletes; otherwise the verb is the primary, default button."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QPushButton, QVBoxLayout, QWidget

from app.theme.tokens import SPACE
from app.window.buttons import DESTRUCTIVE, PRIMARY, SECONDARY, button, footer
from app.window.labels import Label

DIALOG_WIDTH_PX = 440


class ConfirmDialog(QDialog):
    """`verb` None: a message with one button, `cancel` ("Close")."""

    def __init__(
        self,
        parent: QWidget | None,
        title: str,
        text: str,
        verb: str | None,
        destructive: bool = True,
        cancel: str = "Cancel",
    ) -> None:
        super().__init__(parent)
        self.setObjectName("confirmDialog")
        self.setWindowTitle(title)
        self.setFixedWidth(DIALOG_WIDTH_PX)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE.xl, SPACE.l + 4, SPACE.xl, SPACE.l)
        layout.setSpacing(SPACE.m)
        heading = Label(title)
        heading.setObjectName("dialogTitle")
        heading.setWordWrap(True)
        self.text = Label(text)
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.cancel_button = button(cancel, SECONDARY if verb else PRIMARY)
        self.cancel_button.clicked.connect(self.reject)
        buttons = [self.cancel_button]
        self.confirm_button: QPushButton | None = None
        if verb:
            self.confirm_button = button(verb, DESTRUCTIVE if destructive else PRIMARY)
            self.confirm_button.setObjectName("confirmButton")
            self.confirm_button.clicked.connect(self.accept)
            buttons.append(self.confirm_button)
        default = self.cancel_button if destructive or self.confirm_button is None else self.confirm_button
        default.setDefault(True)
        layout.addWidget(heading)
        layout.addWidget(self.text)
        layout.addSpacing(SPACE.xs)
        layout.addWidget(footer(self, *buttons))
        default.setFocus()

    def default_button(self) -> QPushButton:
        """The button Enter presses."""
        return (
            self.confirm_button
            if self.confirm_button is not None and self.confirm_button.isDefault()
            else self.cancel_button
        )


def confirm_box(
    parent: QWidget | None, title: str, text: str, verb: str | None, destructive: bool = True, cancel: str = "Cancel"
) -> ConfirmDialog:
    """The question, not yet shown (tests look at it; `confirm_destructive` asks it)."""
    return ConfirmDialog(parent, title, text, verb, destructive, cancel)


def confirm_destructive(parent: QWidget | None, title: str, text: str, verb: str, destructive: bool = True) -> bool:
    """Ask; True only when the person pressed `verb`."""
    return confirm_box(parent, title, text, verb, destructive).exec() == QDialog.DialogCode.Accepted
