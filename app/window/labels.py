"""Text on screen shown as written. QLabel's default (AutoText) and every tooltip read text that looks like
HTML as HTML, and Qt then loads what its tags name: an <img> in a model folder's name, a server's reply, a
chat's title or an engine error quoting a config file would make the window read that path (a pipe or
/dev/zero: it hangs; on Windows a share on another computer is handed the user's sign-in). So the app's
labels are `Label`s, plain unless one asks for rich text, a rich one escapes what it quotes (html.escape), and
tooltips that may quote such text go through `plain_tip`. tests/test_app_hostile_text.py checks all three.
"""

from __future__ import annotations

import html

from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class Label(QLabel):
    """A QLabel that shows its text as written, or as rich text (bold, links) when made with `rich`."""

    def __init__(self, text: str = "", parent: QWidget | None = None, *, rich: bool = False) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
        self.setText(text)


def plain_tip(text: str) -> str:
    """`text` for setToolTip, shown as written: a tooltip that Qt would read as HTML comes back escaped, as
    rich text that says the same words (line breaks kept); any other comes back as it is."""
    if not QtGui.Qt.mightBeRichText(text):  # Qt's own test, the one a tooltip is read by
        return text
    return f"<p style='white-space:pre-wrap'>{html.escape(text)}</p>"


class ElidedLabel(Label):
    """One line of plain text that ends in "…" when it does not fit and never asks for more width than it is
    given (a long chat title, the engine's state); the whole text is its tooltip and what `text` returns."""

    def __init__(self, parent: QWidget | None = None, minimum_width: int = 20) -> None:
        super().__init__("", parent)
        self.full_text = ""
        self._minimum_width = minimum_width
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(minimum_width)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self.setToolTip(plain_tip(text))
        self.setAccessibleDescription(text)
        self._elide()

    def text(self) -> str:  # the text itself, whatever fits on screen (text_shown)
        return self.full_text

    def text_shown(self) -> str:
        return super().text()

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = max(self.width(), self._minimum_width)
        self.setText(self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideRight, width))
