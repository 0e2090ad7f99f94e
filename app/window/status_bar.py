"""The status bar: engine state, tokens/s, tokens per target pass, tree budget, a live bar chart of
tokens per pass for the current answer, and the automatic choice of method and budget in one line. Widgets
bind to the bridge's EngineStatus, its AutoChoice events and to AnswerStats."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from app.chat.answer_stats import AnswerStats
from app.engine.bridge import CRASHED, FAILED, EngineBridge, EngineStatus
from core.engine import protocol as P

MAX_BARS = 48


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
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        palette = self.palette()
        painter.setPen(palette.color(QPalette.ColorRole.Mid))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        painter.drawRect(rect)
        bars = self.bars()
        if not bars:
            painter.end()
            return
        top = max(max(bars), 1)
        inner = rect.adjusted(2, 2, -2, -2)
        width = inner.width() / MAX_BARS
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(palette.color(QPalette.ColorRole.Highlight))
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
        layout.setContentsMargins(0, 0, 4, 0)
        layout.setSpacing(14)
        self.engine_label = QLabel()
        self.engine_label.setAccessibleName("Engine state")
        self.speed_label = QLabel()
        self.speed_label.setAccessibleName("Tokens per second")
        self.per_pass_label = QLabel()
        self.per_pass_label.setAccessibleName("Tokens per target pass")
        self.budget_label = QLabel()
        self.budget_label.setAccessibleName("Tree budget")
        self.chart = PassChart(stats)
        self.choice_label = QLabel()
        self.choice_label.setAccessibleName("Decoding method chosen for this machine")
        for widget in (self.engine_label, self.speed_label, self.per_pass_label, self.budget_label, self.chart,
                       self.choice_label):
            layout.addWidget(widget)
        self.uses_draft = True
        bridge.status_changed.connect(self.show_status)
        bridge.auto_choice.connect(self.show_choice)
        stats.changed.connect(self.show_stats)
        self.show_status(bridge.status)
        self.show_stats()

    def set_uses_draft(self, uses_draft: bool) -> None:
        """Without a draft there is no tree: hide its budget and the tokens-per-pass chart."""
        self.uses_draft = uses_draft
        for widget in (self.budget_label, self.per_pass_label, self.chart):
            widget.setVisible(uses_draft)

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
