"""The status bar: one calm line of state ("Ready · SmolLM2 135M on this computer", "Loading the model… 62%",
"Answering…") and, on the right, the speed of the answer with its details one click away.

Transient feedback ("Copied", "Exported") is not here: it is a toast (app.window.toast). The details (tokens
per target pass, the tree budget, a chart of tokens per pass, why the method was chosen, where answers come
from) sit in a card the speed button opens over the window's corner; the bar itself holds nothing that sets
the window's width: its line is elided, so the window fits a 1280 px laptop screen whatever it says.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QStatusBar, QToolButton, QVBoxLayout, QWidget

from app.chat.answer_stats import AnswerStats
from app.chat.message_words import rate_words
from app.engine.bridge import CRASHED, FAILED, GENERATING, IDLE, LOADING, READY, STARTING, EngineBridge, EngineStatus
from app.theme.icons import themed
from app.theme.tokens import SPACE, current
from app.window.dismiss import Dismisser
from app.window.labels import ElidedLabel, Label
from core.engine import protocol as P

MAX_BARS = 48
DETAILS_WIDTH_PX = 360
NO_DRAFT_WORDS = "Plain decoding: without a draft model the big model writes one token per pass, so there is no chart."
AUTO_PLAIN_WORDS = (
    "Plain decoding: the big model writes one token per pass, with no guesses to check, so there is no chart."
)


def state_words(status: EngineStatus, source: str) -> str:
    """The engine's state for people, in a few words; `source` names where answers come from ("SmolLM2 135M
    on this computer", "beta-13b on GPU box")."""
    state = status.state
    remote = bool(status.models.get("remote")) if status.models else False
    if state == LOADING and status.stage.startswith("Connecting"):
        return f"Connecting to {source}…"
    if state == LOADING:
        percent = f" {status.progress * 100:.0f}%" if status.progress is not None else ""
        return f"Loading the model…{percent}"
    if state == CRASHED:
        return f"Disconnected from {source}" if remote else "The engine stopped: Restart engine brings it back"
    return {
        STARTING: "Starting…",
        READY: f"Ready · {source}",
        GENERATING: f"Answering · {source}",
        IDLE: "No model loaded",
        FAILED: "No model loaded: the message above says why",
    }.get(state, "Stopped")


class PassChart(QWidget):
    """Tokens accepted per target pass for the current answer: one bar per pass (the last MAX_BARS)."""

    def __init__(self, stats: AnswerStats, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stats = stats
        self.setAccessibleName("Tokens per pass chart")
        self.setToolTip("Tokens accepted per pass of the big model (this answer)")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        stats.changed.connect(self._changed)

    def sizeHint(self) -> QSize:
        return QSize(DETAILS_WIDTH_PX - 2 * SPACE.l, 36)

    def bars(self) -> list[int]:
        return self.stats.tokens_per_pass[-MAX_BARS:]

    def _changed(self) -> None:
        bars = self.bars()
        self.setAccessibleDescription(
            f"{len(self.stats.tokens_per_pass)} passes, mean {self.stats.mean_tokens_per_pass:.2f} tokens per pass"
            if bars
            else "no answer yet"
        )
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


def _line(name: str, muted: bool = False) -> QLabel:
    label = Label()
    label.setAccessibleName(name)
    label.setWordWrap(True)
    label.setProperty("muted", muted)
    return label


class SpeedDetails(QFrame):
    """The speed details card: tokens per second in numbers and words; with speculation, tokens per pass, the
    tree budget and the chart; why this method was chosen; where answers come from. Binds to the bridge's
    status and automatic choice, and to AnswerStats."""

    def __init__(self, bridge: EngineBridge, stats: AnswerStats, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speedDetails")
        self.setAccessibleName("Speed details")
        self.setFixedWidth(DETAILS_WIDTH_PX)
        self.stats = stats
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE.l, SPACE.m, SPACE.l, SPACE.m)
        layout.setSpacing(SPACE.xs + 2)
        title = Label("Speed")
        title.setObjectName("detailsTitle")
        self.speed_label = _line("Tokens per second")
        self.per_pass_label = _line("Tokens per pass", muted=True)
        self.budget_label = _line("Tree budget", muted=True)
        self.chart = PassChart(stats)
        self.plain_label = _line("Plain decoding", muted=True)  # in the chart's place: one token a pass is flat
        self.choice_label = _line("Why this method", muted=True)
        self.source_label = _line("Where answers come from", muted=True)
        for widget in (
            title,
            self.speed_label,
            self.per_pass_label,
            self.budget_label,
            self.chart,
            self.plain_label,
            self.choice_label,
            self.source_label,
        ):
            layout.addWidget(widget)
        self.choice_label.hide()  # until the engine has chosen
        self.uses_draft = True
        self.why_plain = ""
        self.chose_plain = False  # the automatic method chose plain decoding for this answer
        self.plain_label.hide()  # until there is no speculation to show
        self._budget = 0
        bridge.status_changed.connect(self.show_status)
        bridge.auto_choice.connect(self.show_choice)
        stats.changed.connect(self.show_stats)
        self.show_status(bridge.status)
        self.show_stats()

    def set_uses_draft(self, uses_draft: bool, why_plain: str = NO_DRAFT_WORDS) -> None:
        """Without speculation (no draft, plain decoding chosen, a server) there is no tree: no budget, no
        tokens per pass (always 1) and no chart (it would be flat), but a sentence that says so (`why_plain`)."""
        self.uses_draft = uses_draft
        self.why_plain = why_plain
        self._show_speculation()

    def _show_speculation(self) -> None:
        speculative = self.uses_draft and not self.chose_plain
        for widget in (self.budget_label, self.per_pass_label, self.chart):
            widget.setVisible(speculative)
        self.plain_label.setText(AUTO_PLAIN_WORDS if self.uses_draft else self.why_plain)
        self.plain_label.setVisible(not speculative)
        self.choice_label.setVisible(self.uses_draft and bool(self.choice_label.text()))
        self.adjustSize()

    def set_source(self, words: str) -> None:
        self.source_label.setText(words)

    def show_status(self, status: EngineStatus) -> None:
        budget = status.models.get("budget") if status.models else None
        if budget and not self.stats.budget:
            self._budget = budget
            self.show_stats()

    def show_choice(self, choice: P.AutoChoice) -> None:
        self.choice_label.setText(f"Chosen for this computer: {choice.reason}. It is checked again every few passes.")
        self.chose_plain = choice.method == "sequential"
        self._show_speculation()

    def show_stats(self) -> None:
        s = self.stats
        if s.passes:
            speed = s.summary()["tokens_per_s"]  # the answer's saved figure: the same words as under it
            self.speed_label.setText(f"{rate_words(speed).capitalize()} ({speed:.1f} tokens/s)")
            self.per_pass_label.setText(f"{s.mean_tokens_per_pass:.2f} tokens per pass of the big model")
        else:
            self.speed_label.setText("No answer yet: the speed shows while one is written")
            self.per_pass_label.setText("Tokens per pass: –")
            if self.chose_plain:  # a new answer: the automatic method chooses again for it
                self.chose_plain = False
                self._show_speculation()
        budget = s.budget or self._budget
        self.budget_label.setText(
            f"Tree budget: {budget} draft tokens checked per pass" if budget else "Tree budget: –"
        )
        self.chart.update()


class AppStatusBar(QStatusBar):
    """One line of state on the left, the speed button on the right; the details card is a child of the
    window (`details`), shown above the button's corner while the button is checked."""

    def __init__(self, bridge: EngineBridge, stats: AnswerStats, window: QWidget) -> None:
        super().__init__(window)
        self.setSizeGripEnabled(False)
        self.stats = stats
        self.status = bridge.status
        self.source = "this computer"
        self.state_label = ElidedLabel()
        self.state_label.setObjectName("stateLine")
        self.state_label.setAccessibleName("State")
        self.addWidget(self.state_label, 1)
        self.speed_button = QToolButton()
        self.speed_button.setObjectName("speedButton")
        self.speed_button.setCheckable(True)
        self.speed_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.speed_button.setAccessibleName("Speed details")
        self.speed_button.setToolTip("Speed details: tokens per second, per pass, and why this method")
        self.speed_button.setCursor(Qt.CursorShape.PointingHandCursor)
        themed(self.speed_button, "gauge", "muted_text", size=14)
        self.api_label = Label()  # "API server on 127.0.0.1:8000" while it runs (not a toast over the chat)
        self.api_label.setObjectName("apiServerLine")
        self.api_label.setAccessibleName("API server")
        self.api_label.hide()
        self.addPermanentWidget(self.api_label)
        self.addPermanentWidget(self.speed_button)
        self.details = SpeedDetails(bridge, stats, window)
        self.details.hide()
        self.speed_button.toggled.connect(self._toggle_details)
        self._dismisser = Dismisser(self.details, self.speed_button, self.close_details)
        window.installEventFilter(self)
        bridge.status_changed.connect(self.show_status)
        stats.changed.connect(self._show_speed)
        self.show_status(bridge.status)
        self._show_speed()

    def set_source(self, words: str, details: str) -> None:
        """Where answers come from ("SmolLM2 135M on this computer", "beta-13b on GPU box"); details in the
        card."""
        self.source = words
        self.details.set_source(details)
        self.show_status(self.status)

    def show_status(self, status: EngineStatus) -> None:
        self.status = status
        self.state_label.set_full_text(state_words(status, self.source))
        self.state_label.setProperty("alert", status.state in (CRASHED, FAILED))
        self.state_label.style().unpolish(self.state_label)  # re-apply the stylesheet ([alert="true"])
        self.state_label.style().polish(self.state_label)

    def show_api_server(self, url: str | None) -> None:
        """The local API server's address while it runs; nothing once it stopped."""
        if url:
            self.api_label.setText(f"API server on {url.removeprefix('http://').rstrip('/')}")
            self.api_label.setToolTip(
                f"Other programs on this computer can use the model at {url}/v1 "
                "(OpenAI API). Settings > Local API server turns it off."
            )
        self.api_label.setVisible(bool(url))

    def state_text(self) -> str:
        return self.state_label.full_text

    def _show_speed(self) -> None:
        """The last answer's speed in words, as under the answer; the exact figure on the tooltip, the rest in the
        card a click away."""
        speed = self.stats.summary()["tokens_per_s"]  # rounded as the answer's saved figure: the same words
        self.speed_button.setText(rate_words(speed).capitalize() if self.stats.passes else "Speed")
        figure = f"{speed:.1f} tokens per second. " if self.stats.passes else ""
        self.speed_button.setToolTip(f"{figure}Speed details: tokens per second, per pass, and why this method")

    def _toggle_details(self, shown: bool) -> None:
        if shown:
            self.details.adjustSize()
            self._place_details()
            self.details.raise_()
            self._dismisser.start()
        else:
            self._dismisser.stop()
        self.details.setVisible(shown)

    def close_details(self) -> None:
        """Close the card (Esc, a click outside it, another page over the chat)."""
        self.speed_button.setChecked(False)

    def _place_details(self) -> None:
        """Above the speed button, right-aligned with the window's edge."""
        window = self.details.parentWidget()
        corner = self.mapTo(window, QPoint(self.width(), 0))
        self.details.move(corner.x() - self.details.width() - SPACE.s, corner.y() - self.details.height() - SPACE.xs)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The card follows the window's size (and finds its place when a window opened with it shows)."""
        if event.type() in (QEvent.Type.Resize, QEvent.Type.Show) and self.speed_button.isChecked():
            self._place_details()
        return False
