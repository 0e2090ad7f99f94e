"""The bar above the chat: the conversation's title, the active model pair (click to change it), the
context meter, and the conversation's settings and export."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMenu, QSizePolicy, QToolButton, QWidget

from app.chat.context_meter import ContextMeter


def short_model_name(spec: str) -> str:
    """What to call a model in the header: a folder or file name without the path, a repo id's name."""
    if not spec:
        return ""
    if spec.startswith("builtin"):
        return {"builtin": "SmolLM2 135M (built-in)", "builtin-draft": "SmolLM2 135M 4-bit"}.get(spec, spec)
    name = Path(spec).name or spec
    return name.removesuffix(".gguf")


class ElidedLabel(QLabel):
    """A one-line label that ends in "…" when its text does not fit (a long conversation title)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.full_text = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def set_full_text(self, text: str) -> None:
        self.full_text = text
        self._elide()

    def text_shown(self) -> str:
        return super().text()

    def text(self) -> str:  # the title itself, whatever fits on screen
        return self.full_text

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideRight, max(self.width(), 40)))


class ChatHeader(QFrame):
    # The hook for choosing another model pair: the main window opens the settings today; the model manager
    # (wizard) connects here to offer the downloaded and recommended pairs instead.
    model_switch_requested = Signal()
    settings_requested = Signal()
    export_requested = Signal(str)  # "markdown" | "json"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatHeader")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 8, 12, 8)
        layout.setSpacing(10)
        self.title_label = ElidedLabel()
        self.title_label.setObjectName("conversationTitle")
        self.title_label.setAccessibleName("Conversation title")
        self.model_button = QToolButton()
        self.model_button.setObjectName("modelChip")
        self.model_button.setAccessibleName("Model pair")
        self.model_button.clicked.connect(self.model_switch_requested)
        self.context_meter = ContextMeter()
        self.settings_button = QToolButton()
        self.settings_button.setText("Chat settings")
        self.settings_button.setObjectName("headerButton")
        self.settings_button.setAccessibleName("Conversation settings")
        self.settings_button.setToolTip("System prompt, sampling, answer length and advanced settings")
        self.settings_button.clicked.connect(self.settings_requested)
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setObjectName("headerButton")
        self.export_button.setAccessibleName("Export conversation")
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
        self.title_label.setToolTip(title)

    def set_models(self, target: str, draft: str) -> None:
        text = short_model_name(target) + (f"  ·  draft: {short_model_name(draft)}" if draft else "  ·  no draft")
        self.model_button.setText(f"{text}  ▾")
        self.model_button.setToolTip(f"Model: {target}\nDraft: {draft or 'none (plain decoding)'}\nClick to change")
        self.model_button.setAccessibleDescription(text)
