"""The mouse wheel scrolls pages, never the value of a control it passes over.

Qt gives a combo box, a spin box and a slider the wheel: scrolling the chat settings panel or the Settings page
with the pointer over one changed it (Method to "Plain decoding", Context length two steps), unseen and, in
the panel, applied at once. The app's combo boxes and sliders are these classes: they hand the wheel to the
scroll area they sit in, which scrolls as if they were not there (or ignore it where there is none); and the
wheel does not give them the keyboard focus. They still change by the keyboard, a click or a drag.

A base class, not an event filter: a Python filter would run for every event such a control gets (a theme
switch sends thousands), where wheelEvent runs for wheel events only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollBar,
    QSlider,
    QWidget,
)


def scroll_instead(control: QWidget, event: QWheelEvent) -> None:
    """Give `event` to the scroll bar of the scroll area around `control`; ignore it where there is none."""
    parent = control.parentWidget()
    while parent is not None and not isinstance(parent, QAbstractScrollArea):
        parent = parent.parentWidget()
    if parent is None:
        event.ignore()
        return
    bar = parent.horizontalScrollBar() if event.angleDelta().y() == 0 else parent.verticalScrollBar()
    QApplication.sendEvent(bar, event)
    event.accept()


class NoWheelComboBox(QComboBox):
    """A combo box the wheel passes over."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # not WheelFocus

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt signature
        scroll_instead(self, event)


class NoWheelSlider(QSlider):
    """A slider the wheel passes over."""

    def __init__(self, orientation: Qt.Orientation, parent: QWidget | None = None) -> None:
        super().__init__(orientation, parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt signature
        scroll_instead(self, event)


def unguarded(root: QWidget) -> list[QWidget]:
    """The combo boxes, spin boxes and sliders (not scroll bars) under `root` that would take the wheel (a
    test walks every screen with this)."""
    return [
        w
        for w in root.findChildren(QWidget)
        if isinstance(w, (QComboBox, QAbstractSpinBox, QAbstractSlider))
        and not isinstance(w, (NoWheelComboBox, NoWheelSlider, QScrollBar))
    ]
