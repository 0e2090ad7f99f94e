"""The mouse wheel scrolls pages, never the value of a control it passes over.

Qt gives a combo box, a spin box and a slider the wheel: scrolling the chat settings panel or the Settings page
with the pointer over one changed it (Method to "Plain decoding", Context length two steps), unseen and, in
the panel, applied at once. One filter on the application holds for every such control in every window: it
takes the wheel event from the control and hands it to the scroll area the control sits in, which scrolls as
if the control were not there. A control still changes by the keyboard, a click or a drag.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea, QAbstractSlider, QAbstractSpinBox, QApplication, QComboBox, QScrollBar, QWidget,
)

_GUARD_NAME = "specexecWheelGuard"


def _value_control(watched: QObject) -> QWidget | None:
    """The combo, spin box or slider (not a scroll bar) that `watched` is, or is the line edit of."""
    if isinstance(watched, QScrollBar):
        return None
    if isinstance(watched, (QComboBox, QAbstractSpinBox, QAbstractSlider)):
        return watched
    parent = watched.parent() if isinstance(watched, QWidget) else None  # a spin box's or combo's line edit
    if isinstance(parent, (QComboBox, QAbstractSpinBox)):
        return parent
    return None


def _scroll_area_of(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


class WheelGuard(QObject):
    """An application event filter: a wheel over a value control goes to its scroll area instead."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt signature
        kind = event.type()
        if kind not in (QEvent.Type.Wheel, QEvent.Type.Polish):
            return False
        control = _value_control(watched)
        if control is None:
            return False
        if kind == QEvent.Type.Polish:  # a wheel passing over must not take the keyboard focus either
            if control is watched and control.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                control.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            return False
        area = _scroll_area_of(control)
        if area is not None:
            QApplication.sendEvent(area.verticalScrollBar(), event)
        return True  # the control never sees it


def install_wheel_guard() -> WheelGuard | None:
    """Install the guard on the running application, once (each window calls this; tests build windows on
    an application they did not create). None without an application."""
    app = QApplication.instance()
    if app is None:
        return None
    guard = app.findChild(WheelGuard, _GUARD_NAME)
    if guard is None:
        guard = WheelGuard(app)
        guard.setObjectName(_GUARD_NAME)
        app.installEventFilter(guard)
    return guard
