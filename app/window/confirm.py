"""Questions with the verb on the button ("Delete chat", "Resume download") beside Cancel. Before something
that cannot be undone the verb is marked destructive and Cancel is the default (Enter or Esc never
deletes); otherwise the verb is the default."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget


def confirm_box(parent: QWidget | None, title: str, text: str, verb: str, destructive: bool = True) -> QMessageBox:
    """The question as a message box, not yet shown (tests look at it; `confirm_destructive` asks it)."""
    box = QMessageBox(QMessageBox.Icon.Warning if destructive else QMessageBox.Icon.Question, title, text,
                      parent=parent)
    act: QPushButton = box.addButton(verb, QMessageBox.ButtonRole.DestructiveRole if destructive
                                     else QMessageBox.ButtonRole.AcceptRole)
    act.setProperty("role", "destructive" if destructive else "primary")
    act.setObjectName("confirmButton")
    cancel = box.addButton("Cancel", QMessageBox.ButtonRole.RejectRole)
    cancel.setProperty("role", "secondary")  # never drawn as the main action, even as the default
    box.setDefaultButton(cancel if destructive else act)
    box.setEscapeButton(cancel)
    return box


def confirm_destructive(parent: QWidget | None, title: str, text: str, verb: str, destructive: bool = True) -> bool:
    """Ask; True only when the person pressed `verb`."""
    box = confirm_box(parent, title, text, verb, destructive)
    box.exec()
    return box.clickedButton() is box.findChild(QPushButton, "confirmButton")
