"""The mouse wheel scrolls pages, never the value of a control it passes over.

Qt gives a combo box, a spin box and a slider the wheel: scrolling the chat settings panel or the Settings page
with the pointer over one changed it (Method to "Plain decoding", Context length two steps), unseen and, in
the panel, applied at once. `guard_wheel` puts one filter on such a control (the form fields' base does it
for each field, the few other boxes call it): it takes the wheel event from the control and hands it to the
scroll area the control sits in, which scrolls as if the control were not there; and the wheel no longer
gives the control the keyboard focus. A control still changes by the keyboard, a click or a drag.

The filter sits on the controls themselves, not on the application: an application-wide Python filter would
run for every event of every widget.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea, QAbstractSlider, QAbstractSpinBox, QApplication, QComboBox, QScrollBar, QWidget,
)

VALUE_CONTROLS = (QComboBox, QAbstractSpinBox, QAbstractSlider)


def _scroll_area_of(widget: QWidget) -> QAbstractScrollArea | None:
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


class WheelGuard(QObject):
    """The filter: a wheel over the control it watches goes to the control's scroll area instead."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt signature
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget):
            return False
        area = _scroll_area_of(watched)
        if area is not None:
            QApplication.sendEvent(area.verticalScrollBar(), event)
        return True  # the control never sees it


def is_value_control(widget: QWidget) -> bool:
    """A combo box, spin box or slider (a scroll bar is a slider that should keep the wheel)."""
    return isinstance(widget, VALUE_CONTROLS) and not isinstance(widget, QScrollBar)


def guard_wheel(control: QWidget) -> QWidget:
    """Guard `control` (and a spin box's or editable combo's line edit) against the wheel; returns it."""
    guard = WheelGuard(control)
    for widget in (control, *control.findChildren(QWidget)):
        widget.installEventFilter(guard)
    if control.focusPolicy() == Qt.FocusPolicy.WheelFocus:
        control.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    control.setProperty("wheelGuarded", True)
    return control


def unguarded(root: QWidget) -> list[QWidget]:
    """The value controls under `root` without the guard (a test walks every screen with this)."""
    return [w for w in root.findChildren(QWidget) if is_value_control(w) and not w.property("wheelGuarded")]
