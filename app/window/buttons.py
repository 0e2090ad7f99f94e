"""One look per kind of action, as GPT4All's MyButton / MySettingsDestructiveButton: the one main action of a
screen (primary, filled with the accent), the others beside it (secondary, outlined), actions that delete or
forget (destructive, red, never the default: Enter must not delete), and link-like ones (Show details).

No stock icons (Qt's style draws a green tick on OK, a red cross on Cancel, a floppy disk on Save on some
desktops): these buttons carry words, and an icon only where one was chosen from the app's own set.
resources/style.qss draws each kind by its `role` property; QPushButton's `default` state draws nothing of
its own, so a default button never looks like a second primary one.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

PRIMARY, SECONDARY, DESTRUCTIVE, LINK = "primary", "secondary", "destructive", "link"


def button(text: str, role: str = SECONDARY, tip: str = "") -> QPushButton:
    """A push button of one of the four kinds. It never becomes a dialog's default by being focused."""
    if role not in (PRIMARY, SECONDARY, DESTRUCTIVE, LINK):
        raise ValueError(f"unknown button role {role!r}")
    widget = QPushButton(text)
    widget.setProperty("role", role)
    widget.setAutoDefault(False)
    widget.setCursor(Qt.CursorShape.PointingHandCursor)
    if tip:
        widget.setToolTip(tip)
    return widget


def set_role(widget: QPushButton, role: str) -> None:
    """Give an existing button (a wizard's Next) one of the four looks."""
    widget.setProperty("role", role)
    widget.setAutoDefault(False)
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def button_row(*buttons: QPushButton, left: tuple[QPushButton, ...] = ()) -> QHBoxLayout:
    """Buttons at the right of a row, in reading order (Cancel, then the main action last, where the eye
    ends), with `left` ones (Delete…) at the row's start."""
    row = QHBoxLayout()
    row.setSpacing(8)
    for widget in left:
        row.addWidget(widget)
    row.addStretch(1)
    for widget in buttons:
        row.addWidget(widget)
    return row


def footer(parent: QWidget | None, *buttons: QPushButton) -> QWidget:
    """A row of buttons as a widget (a dialog's or a page's bottom line)."""
    box = QWidget(parent)
    box.setObjectName("buttonFooter")
    layout = button_row(*buttons)
    layout.setContentsMargins(0, 0, 0, 0)
    box.setLayout(layout)
    return box
