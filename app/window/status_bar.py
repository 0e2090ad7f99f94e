"""The status bar: its own message area on the left ("Copied …", "Switched to …"), then where answers come
from (this computer, or a server on another one), the engine state,
tokens/s, and, when the answer is speculative, tokens per target pass, tree budget, a live bar chart of
tokens per pass for the current answer, and the automatic choice of method and budget in one line. Widgets
bind to the bridge's EngineStatus, its AutoChoice events and to AnswerStats.

The message area is a label of its own (QStatusBar's temporary message would be squeezed against, or hide,
the engine state); `showMessage` / `currentMessage` keep QStatusBar's names so callers need not know.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QStatusBar, QWidget

from app.chat.answer_stats import AnswerStats
from app.engine.bridge import CRASHED, FAILED, EngineBridge, EngineStatus
from app.theme.tokens import SPACE, current
from core.engine import protocol as P

MAX_BARS = 48
# The longest texts each label shows: its width is reserved, so the row never shifts sideways
ENGINE_TEXTS = ("Engine: Loading models 100%", "Engine: Models failed to load", "Engine: Generating")
SPEED_TEXT = "888.8 tokens/s"
PER_PASS_TEXT = "88.88 tokens/pass"


class AppStatusBar(QStatusBar):
    """A status bar whose messages have their own area on the left, never over the engine's state."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizeGripEnabled(False)
        self.message_label = QLabel()
        self.message_label.setObjectName("statusMessage")
        self.message_label.setAccessibleName("Status message")
        self.message_label.setTextFormat(Qt.TextFormat.PlainText)
        self.message_label.setMinimumWidth(40)
        self.message_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.addWidget(self.message_label, 1)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.clearMessage)

    def showMessage(self, text: str, timeout: int = 0) -> None:  # noqa: N802 - QStatusBar's name
        self.message_label.setText(text)
        self.message_label.setToolTip(text)
        self._timer.stop()
        if timeout > 0:
            self._timer.start(timeout)

    def clearMessage(self) -> None:  # noqa: N802 - QStatusBar's name
        self.message_label.clear()
        self.message_label.setToolTip("")

    def currentMessage(self) -> str:  # noqa: N802 - QStatusBar's name
        return self.message_label.text()


class PassChart(QWidget):
    """Tokens accepted per target pass for the current answer: one bar per pass (the last MAX_BARS)."""

    def __init__(self, stats: AnswerStats, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stats = stats
        self.setAccessibleName("Tokens per pass chart")
        self.setToolTip("Tokens accepted per target pass (current answer)")
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        stats.changed.connect(self._changed)

    def sizeHint(self) -> QSize:
        return QSize(150, 20)

    def bars(self) -> list[int]:
        return self.stats.tokens_per_pass[-MAX_BARS:]

    def _changed(self) -> None:
        bars = self.bars()
        self.setAccessibleDescription(
            f"{len(self.stats.tokens_per_pass)} passes, mean {self.stats.mean_tokens_per_pass:.2f} tokens per pass"
            if bars else "no answer yet")
        self.update()

    def paintEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        """Bars on a thin baseline; no box, so an empty chart (no answer yet) is just the line."""
        colors = current()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        inner = QRectF(self.rect()).adjusted(1, 2, -1, -2)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(colors.divider))
        painter.drawRect(QRectF(inner.left(), inner.bottom(), inner.width(), 1))
        bars = self.bars()
        if not bars:
            painter.end()
            return
        top = max(max(bars), 1)
        width = inner.width() / MAX_BARS
        painter.setBrush(QColor(colors.chart_bar))
        for number, value in enumerate(bars):
            height = inner.height() * value / top
            x = inner.left() + number * width
            painter.drawRect(QRectF(x, inner.bottom() - height, max(width - 1.0, 1.0), height))
        painter.end()


class StatusPanel(QWidget):
    """Permanent widgets of the status bar."""

    def __init__(self, bridge: EngineBridge, stats: AnswerStats, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stats = stats
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE.l, 0, SPACE.xs, 0)
        layout.setSpacing(SPACE.l)
        self.source_label = QLabel()
        self.source_label.setAccessibleName("Where answers come from")
        self.engine_label = QLabel()
        self.engine_label.setAccessibleName("Engine state")
        self.speed_label = QLabel()
        self.speed_label.setAccessibleName("Tokens per second")
        self.per_pass_label = QLabel()
        self.per_pass_label.setAccessibleName("Tokens per target pass")
        for label, longest in ((self.engine_label, ENGINE_TEXTS), (self.speed_label, (SPEED_TEXT,)),
                               (self.per_pass_label, (PER_PASS_TEXT,))):
            label.setMinimumWidth(max(label.fontMetrics().horizontalAdvance(text) for text in longest) + 4)
        self.budget_label = QLabel()
        self.budget_label.setAccessibleName("Tree budget")
        self.chart = PassChart(stats)
        self.choice_label = QLabel()
        self.choice_label.setAccessibleName("Decoding method chosen for this machine")
        for widget in (self.source_label, self.engine_label, self.speed_label, self.per_pass_label, self.budget_label, self.chart,
                       self.choice_label):
            layout.addWidget(widget)
        self.uses_draft = True
        bridge.status_changed.connect(self.show_status)
        bridge.auto_choice.connect(self.show_choice)
        stats.changed.connect(self.show_stats)
        self.show_status(bridge.status)
        self.show_stats()

    def set_uses_draft(self, uses_draft: bool) -> None:
        """Without speculation (no draft, or plain decoding chosen) there is no tree: hide its budget, the
        tokens per pass (always 1) and the chart, and the automatic choice's line."""
        self.uses_draft = uses_draft
        for widget in (self.budget_label, self.per_pass_label, self.chart, self.choice_label):
            widget.setVisible(uses_draft)

    def set_source(self, words: str, details: str) -> None:
        """Where answers come from ("On this computer", "From alpha-7b on GPU box"); details in the tooltip."""
        self.source_label.setText(words)
        self.source_label.setToolTip(details)

    def show_status(self, status: EngineStatus) -> None:
        text = status.describe()
        self.engine_label.setText(f"Engine: {text}")
        self.engine_label.setProperty("alert", status.state in (CRASHED, FAILED))
        self.engine_label.style().unpolish(self.engine_label)  # re-apply the stylesheet ([alert="true"])
        self.engine_label.style().polish(self.engine_label)
        self.engine_label.updateGeometry()
        budget = status.models.get("budget") if status.models else None
        if budget and not self.stats.budget:
            self.budget_label.setText(f"Tree budget: {budget}")

    def show_choice(self, choice: P.AutoChoice) -> None:
        """The reason's headline in the bar (it must fit beside the chart); the whole line in the tooltip."""
        self.choice_label.setText(choice.reason.split(" (", 1)[0])
        self.choice_label.setToolTip(f"{choice.reason}\nChosen automatically for this machine and re-checked every few passes")

    def show_stats(self) -> None:
        s = self.stats
        self.speed_label.setText(f"{s.tokens_per_second:.1f} tokens/s" if s.passes else "– tokens/s")
        self.per_pass_label.setText(f"{s.mean_tokens_per_pass:.2f} tokens/pass" if s.passes else "– tokens/pass")
        if s.budget:
            self.budget_label.setText(f"Tree budget: {s.budget}")
        elif not self.budget_label.text():
            self.budget_label.setText("Tree budget: –")
        self.chart.update()
