"""Esc for a panel or page: the window's "Stop the answer" shortcut is Esc too, and a shortcut wins over a
key press unless the focused widget (or one of its parents) claims the key first, on the ShortcutOverride
event Qt sends before it. A panel or page that closes on Esc claims it with `claims_escape` in its event()."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent


def claims_escape(event: QEvent) -> bool:
    """Accept `event` and say True if it is the ShortcutOverride of a plain Esc (the key press follows)."""
    if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape):
        event.accept()
        return True
    return False
