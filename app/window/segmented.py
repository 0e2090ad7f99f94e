"""Pages behind a segmented switch: a row of joined buttons, one of them on, above the page it names (the look
of LM Studio's and macOS's segmented controls, instead of classic tabs).

The keyboard reaches every segment with Tab; Left and Right move between them (and show their page), as they
move between radio buttons. The wheel over a segment does nothing: only a click or a key switches pages.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QPushButton, QStackedWidget, QVBoxLayout, QWidget

from app.theme.tokens import SPACE


class SegmentedPages(QWidget):
    """`add_page(widget, text)` adds a segment and its page."""

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.switch = QWidget()
        self.switch.setObjectName("segmentedSwitch")
        self.switch.setAccessibleName(name)
        self.switch.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)  # its rounded track is drawn
        self._row = QHBoxLayout(self.switch)
        self._row.setContentsMargins(3, 3, 3, 3)
        self._row.setSpacing(2)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.group.idClicked.connect(self.setCurrentIndex)
        self.stack = QStackedWidget()
        self.buttons: list[QPushButton] = []
        switch_row = QHBoxLayout()
        switch_row.setContentsMargins(0, 0, 0, 0)
        switch_row.addWidget(self.switch)
        switch_row.addStretch(1)  # as wide as its words, at the left: a switch, not a bar across the page
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(SPACE.m)
        column.addLayout(switch_row)
        column.addWidget(self.stack, 1)

    def add_page(self, page: QWidget, text: str) -> int:
        index = self.stack.addWidget(page)
        segment = QPushButton(text)
        segment.setObjectName("segment")
        segment.setCheckable(True)
        segment.setAutoDefault(False)
        segment.setCursor(Qt.CursorShape.PointingHandCursor)
        segment.setAccessibleName(text)
        segment.installEventFilter(self)
        self.group.addButton(segment, index)
        self._row.addWidget(segment)
        self.buttons.append(segment)
        if index == 0:
            segment.setChecked(True)
        return index

    # the QTabWidget calls its users know
    def count(self) -> int:
        return self.stack.count()

    def widget(self, index: int) -> QWidget:
        return self.stack.widget(index)

    def text(self, index: int) -> str:
        return self.buttons[index].text()

    def currentIndex(self) -> int:  # noqa: N802 - Qt's naming, as QTabWidget's
        return self.stack.currentIndex()

    def currentWidget(self) -> QWidget:  # noqa: N802
        return self.stack.currentWidget()

    def setCurrentWidget(self, page: QWidget) -> None:  # noqa: N802
        self.setCurrentIndex(self.stack.indexOf(page))

    def setCurrentIndex(self, index: int) -> None:  # noqa: N802
        if not 0 <= index < self.count():
            return
        self.buttons[index].setChecked(True)
        if index != self.stack.currentIndex():
            self.stack.setCurrentIndex(index)

    def current_button(self) -> QPushButton:
        return self.buttons[self.currentIndex()]

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt signature
        """Left / Right on a segment: the segment beside it, focused and shown."""
        if event.type() == QEvent.Type.KeyPress and watched in self.buttons:
            step = {Qt.Key.Key_Left: -1, Qt.Key.Key_Right: 1}.get(event.key())
            if step is not None:
                index = self.buttons.index(watched) + step
                if 0 <= index < self.count():
                    self.setCurrentIndex(index)
                    self.buttons[index].setFocus(Qt.FocusReason.TabFocusReason)
                return True
        return super().eventFilter(watched, event)
