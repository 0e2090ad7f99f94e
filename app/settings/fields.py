"""Form fields as chat apps draw them (LM Studio, Jan), not spin boxes: a name with its value on the right, a
slider under it, and a line of help in plain words under that; a choice from a short list; a number that may
be left empty ("Random").

Sliders work in whole steps of `scale` (hundredths for temperature), so a value read back is exactly the value
set (1.1 stays 1.1, not 1.1000000000000001).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QIntValidator
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.theme.tokens import SPACE
from app.window.wheel_guard import NoWheelComboBox, NoWheelSlider
from app.window.labels import Label


def help_line(text: str) -> QLabel:
    """A line of help under a field, in muted words that wrap."""
    label = Label(text)
    label.setObjectName("fieldHelp")
    label.setProperty("muted", True)
    label.setWordWrap(True)
    return label


def scrolled_body(scroll_name: str, body_name: str) -> tuple[QScrollArea, QWidget]:
    """A frameless area that scrolls up and down only, and the body widget inside it that a page lays its
    fields out on (the names are the style sheet's)."""
    scroll = QScrollArea()
    scroll.setObjectName(scroll_name)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    body = QWidget()
    body.setObjectName(body_name)
    scroll.setWidget(body)
    return scroll, body


class Field(QWidget):
    """A name (with its value on the right), the control, and a line of help under it."""

    def __init__(self, name: str, control: QWidget, help_text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.control = control
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(SPACE.xs)
        top = QHBoxLayout()
        top.setSpacing(SPACE.s)
        self.name_label = Label(name)
        self.name_label.setObjectName("fieldName")
        self.name_label.setBuddy(control)
        self.value_label = Label()
        self.value_label.setObjectName("fieldValue")
        self.value_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        top.addWidget(self.name_label, 1)
        top.addWidget(self.value_label)
        column.addLayout(top)
        column.addWidget(control)
        self.help_label = help_line(help_text)
        self.help_label.setVisible(bool(help_text))
        column.addWidget(self.help_label)
        control.setAccessibleName(name.replace("&", ""))
        if help_text:
            control.setAccessibleDescription(help_text)


class _SliderChoice(Field):
    """A value chosen on a slider: the value label says `words(value)`, and `changed` is emitted when the
    person moves it (never when the program sets it). Subclasses set the slider's range, then `_ready`."""

    changed = Signal()

    def __init__(self, name: str, words: Callable, help_text: str, parent: QWidget | None) -> None:
        self.slider = NoWheelSlider(Qt.Orientation.Horizontal)  # the wheel scrolls the page past it
        super().__init__(name, self.slider, help_text, parent)
        self.words = words

    def _ready(self, value) -> None:
        self.slider.valueChanged.connect(self._moved)
        self.set_value(value)

    def _place(self, position: int, count: int | None = None) -> None:
        """Put the slider at `position` (of `count` positions, when the range changes) without `changed`."""
        self.slider.blockSignals(True)
        if count is not None:
            self.slider.setRange(0, count - 1)
        self.slider.setValue(position)
        self.slider.blockSignals(False)
        self._show()

    def _moved(self) -> None:
        self._show()
        self.changed.emit()

    def _show(self) -> None:
        self.value_label.setText(self.words(self.value()))


class SliderField(_SliderChoice):
    """A number on a slider, from `low` to `high` in steps of 1/`scale`; `words(value)` is what the value
    label says (e.g. "Off" at the bottom of the range)."""

    def __init__(
        self,
        name: str,
        low: float,
        high: float,
        value: float,
        scale: int = 100,
        words: Callable[[float], str] | None = None,
        help_text: str = "",
        step: float | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(name, words or (lambda v: f"{v:.2f}"), help_text, parent)
        self.scale = scale
        self.slider.setRange(round(low * scale), round(high * scale))
        self.slider.setSingleStep(round((step or 1 / scale) * scale))
        self.slider.setPageStep(max(self.slider.singleStep() * 4, 1))
        self._ready(value)

    def value(self) -> float:
        return self.slider.value() / self.scale

    def set_value(self, value: float) -> None:
        self._place(round(value * self.scale))


class StepsField(_SliderChoice):
    """One of a few values on a slider (answer lengths: 256, 512, 1024, ...); a value outside the list (set
    by hand in settings.json, or by a test) joins it, so nothing is rounded away."""

    def __init__(
        self,
        name: str,
        steps: Sequence[int],
        value: int,
        words: Callable[[int], str],
        help_text: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(name, words, help_text, parent)
        self.base_steps = tuple(sorted(steps))
        self.steps = list(self.base_steps)
        self.slider.setPageStep(1)
        self._ready(value)

    def value(self) -> int:
        return self.steps[self.slider.value()]

    def set_value(self, value: int) -> None:
        self.steps = sorted(set(self.base_steps) | {int(value)})
        self._place(self.steps.index(int(value)), len(self.steps))


class ChoiceField(Field):
    """One of a list of (label, value) pairs."""

    changed = Signal()

    def __init__(
        self,
        name: str,
        choices: Sequence[tuple[str, object]],
        value: object,
        help_text: str = "",
        parent: QWidget | None = None,
    ) -> None:
        self.combo = NoWheelComboBox()
        super().__init__(name, self.combo, help_text, parent)
        for label, data in choices:
            self.combo.addItem(label, data)
        self.set_value(value)
        self.combo.currentIndexChanged.connect(lambda _index: self.changed.emit())

    def value(self) -> object:
        return self.combo.currentData()

    def set_value(self, value: object) -> None:
        self.combo.blockSignals(True)
        self.combo.setCurrentIndex(max(0, self.combo.findData(value)))
        self.combo.blockSignals(False)


class OptionalNumberField(Field):
    """A whole number that may be left empty; empty means `empty_value` (a seed: empty is "Random", -1)."""

    changed = Signal()

    def __init__(
        self,
        name: str,
        placeholder: str,
        empty_value: int,
        value: int,
        high: int,
        help_text: str = "",
        parent: QWidget | None = None,
    ) -> None:
        self.edit = QLineEdit()
        super().__init__(name, self.edit, help_text, parent)
        self.empty_value = empty_value
        self.edit.setPlaceholderText(placeholder)
        self.edit.setValidator(QIntValidator(0, high, self.edit))
        self.edit.setClearButtonEnabled(True)
        self.set_value(value)
        self.edit.textChanged.connect(lambda _text: self.changed.emit())

    def value(self) -> int:
        text = self.edit.text().strip()
        return int(text) if text else self.empty_value

    def set_value(self, value: int) -> None:
        self.edit.blockSignals(True)
        self.edit.setText("" if value == self.empty_value else str(value))
        self.edit.blockSignals(False)
