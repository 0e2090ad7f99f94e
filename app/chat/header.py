"""The bar above the chat: the chat's title, the model in use (click to change it), the context meter, and
the chat's settings (a panel at the window's right) and export."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QMenu, QSizePolicy, QToolButton, QWidget

from app.chat.context_meter import ContextMeter
from app.theme.icons import themed
from app.theme.tokens import SPACE
from app.window.labels import ElidedLabel, plain_tip


MIN_TITLE_PX = 96  # the title keeps this much of a narrow window; the model's name gives way first
MAX_MODEL_PX = 220
MIN_MODEL_PX = 64  # the model's name elides down to this much
COMPACT_PX = 600  # below this width the header drops words it can spare: Chat settings becomes its icon, the
# context meter its bar (both say it all on hover), so the chat settings panel fits beside it on a 1024 px screen


class ChatHeader(QFrame):
    model_switch_requested = Signal()  # the model manager opens
    settings_requested = Signal()
    export_requested = Signal(str)  # "markdown" | "json"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatHeader")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE.l, SPACE.s, SPACE.m, SPACE.s)
        layout.setSpacing(SPACE.s + 2)
        self.title_label = ElidedLabel(minimum_width=40)
        self.title_label.setObjectName("conversationTitle")
        self.title_label.setAccessibleName("Chat title")
        self.title_label.setMinimumWidth(MIN_TITLE_PX)
        self.model_button = QToolButton()
        self.model_button.setObjectName("modelChip")
        self.model_button.setAccessibleName("Model")
        self.model_button.clicked.connect(self.model_switch_requested)
        self.model_button.setMinimumWidth(MIN_MODEL_PX)
        self.model_button.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self._model_name = ""
        self.context_meter = ContextMeter()
        self.settings_button = QToolButton()
        self.settings_button.setText("Chat settings")
        self.settings_button.setObjectName("headerButton")
        self.settings_button.setCheckable(True)  # checked while the panel is open
        self.settings_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        themed(self.settings_button, "sliders-horizontal", size=16)
        self.settings_button.setAccessibleName("Chat settings")
        self.settings_button.setToolTip("System prompt, how varied answers are, answer length (Ctrl+Shift+S)")
        self.settings_button.clicked.connect(self.settings_requested)
        self.export_button = QToolButton()
        self.export_button.setObjectName("headerButton")
        self.export_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        themed(self.export_button, "share", size=16)
        self.export_button.setAccessibleName("Export chat")
        self.export_button.setToolTip("Export this chat as Markdown or JSON")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("As Markdown…", lambda: self.export_requested.emit("markdown"))
        menu.addAction("As JSON…", lambda: self.export_requested.emit("json"))
        self.export_button.setMenu(menu)
        layout.addWidget(self.title_label, 1)
        layout.addWidget(self.model_button)
        layout.addWidget(self.context_meter)
        layout.addWidget(self.settings_button)
        layout.addWidget(self.export_button)

    def set_title(self, title: str) -> None:
        self.title_label.set_full_text(title)

    def set_model(self, name: str, details: str) -> None:
        """The model in use as people call it ("SmolLM2 135M (built-in)", "beta-13b on GPU box"); the paths
        in the tooltip."""
        self._model_name = name
        self.model_button.setToolTip(plain_tip(details))
        self.model_button.setAccessibleDescription(name)
        self._fit()

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """Words as the width allows: compact below COMPACT_PX, the model's name elided to what is left
        beside the title's minimum and the buttons (never more than MAX_MODEL_PX)."""
        compact = self.width() < COMPACT_PX
        style = Qt.ToolButtonStyle.ToolButtonIconOnly if compact else Qt.ToolButtonStyle.ToolButtonTextBesideIcon
        if self.settings_button.toolButtonStyle() != style:
            self.settings_button.setToolButtonStyle(style)
        self.context_meter.set_compact(compact)
        layout = self.layout()
        margins = layout.contentsMargins()
        others = sum(w.sizeHint().width() for w in (self.context_meter, self.settings_button, self.export_button))
        spare = (
            self.width()
            - margins.left()
            - margins.right()
            - 4 * layout.spacing()
            - MIN_TITLE_PX
            - others
            - 2 * self.title_label.fontMetrics().averageCharWidth()
        )
        chrome = self.model_button.sizeHint().width() - self.model_button.fontMetrics().horizontalAdvance(
            self.model_button.text()
        )  # the chip's padding and border
        room = max(MIN_MODEL_PX - chrome, min(MAX_MODEL_PX, spare - chrome - 24))
        shown = self.model_button.fontMetrics().elidedText(self._model_name, Qt.TextElideMode.ElideRight, room)
        shown = shown.replace("&", "&&")  # a name's "&" (R&D) is shown, not taken for a keyboard shortcut
        if self.model_button.text() != f"{shown}  ▾":
            self.model_button.setText(f"{shown}  ▾")
