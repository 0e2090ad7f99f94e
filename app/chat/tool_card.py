"""An answer's tool calls on screen: one card per call, above the answer's words.

A card shows the tool's name, its server and its arguments (as the model wrote them, monospace, selectable),
then what happens: the question (Allow once / Always for this tool / Deny; Esc denies, as it closes a
question anywhere), "running…", or the outcome, with the result folded behind a toggle. The result is shown as
plain text, never rendered as Markdown or HTML: a tool's output is data.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat import tool_turns as T
from app.chat.rendering import fixed_font
from app.theme.tokens import SPACE
from app.window.buttons import PRIMARY, SECONDARY, button
from app.window.labels import Label

STATUS_WORDS = {
    T.ASKING: "wants to run: allow it?",
    T.RUNNING: "running…",
    T.DONE: "done",
    T.FAILED: "failed",
    T.DENIED: "not allowed",
    T.STOPPED: "stopped",
}
SHOWN_ARGUMENT_CHARS = 2_000
RESULT_LINES = 12  # the open result's height at most, in lines (it scrolls beyond)


class ToolCallCard(QFrame):
    """One call (a record of app/chat/tool_turns.py). `decided(call id, decision)` when a button or Esc answers."""

    decided = Signal(str, str)

    def __init__(self, record: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCallCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.record: dict[str, Any] = {}
        column = QVBoxLayout(self)
        column.setContentsMargins(SPACE.m, SPACE.s, SPACE.m, SPACE.s)
        column.setSpacing(SPACE.xs)
        self.title = Label()
        self.title.setObjectName("toolCallTitle")
        column.addWidget(self.title)
        self.arguments = Label()
        self.arguments.setObjectName("toolCallArguments")
        self.arguments.setWordWrap(True)
        self.arguments.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.arguments.setFont(fixed_font(QGuiApplication.font().pointSizeF() * 0.9))
        column.addWidget(self.arguments)
        self.buttons = QWidget()
        row = QHBoxLayout(self.buttons)
        row.setContentsMargins(0, 0, 0, 0)
        self.allow_once = button("Allow once", PRIMARY, "Run this call")
        self.allow_always = button(
            "Always for this tool", SECONDARY, "Run this tool's calls in this chat without asking"
        )
        self.deny = button("Deny", SECONDARY, "Do not run it; the model is told (Esc)")
        for widget, decision in ((self.allow_once, "once"), (self.allow_always, "always"), (self.deny, "deny")):
            widget.clicked.connect(lambda _=False, d=decision: self._decide(d))
            row.addWidget(widget)
        row.addStretch(1)
        column.addWidget(self.buttons)
        self.result_toggle = QToolButton()
        self.result_toggle.setObjectName("toolResultToggle")
        self.result_toggle.setAutoRaise(True)
        self.result_toggle.setCheckable(True)
        self.result_toggle.toggled.connect(self._show_result)
        column.addWidget(self.result_toggle, 0, Qt.AlignmentFlag.AlignLeft)
        self.result = QPlainTextEdit()
        self.result.setObjectName("toolResult")
        self.result.setReadOnly(True)
        self.result.setFont(fixed_font(QGuiApplication.font().pointSizeF() * 0.9))
        self.result.hide()
        column.addWidget(self.result)
        self.set_record(record)

    def set_record(self, record: dict[str, Any]) -> None:
        if record == self.record:
            return
        self.record = dict(record)
        status = record.get("status", "")
        server = f" · {record['server']}" if record.get("server") else ""
        words = f": {STATUS_WORDS[status]}" if status in STATUS_WORDS else ""  # none: a call read without one
        self.title.setText(f"Tool {record.get('name', '?')}{server}{words}")
        arguments = json.dumps(record.get("arguments", {}), ensure_ascii=False, indent=1)
        if len(arguments) > SHOWN_ARGUMENT_CHARS:
            arguments = arguments[:SHOWN_ARGUMENT_CHARS] + " …"
        self.arguments.setText(arguments)
        self.buttons.setVisible(status == T.ASKING)
        has_result = status not in T.OPEN_STATUSES and bool(record.get("result"))
        self.result_toggle.setVisible(has_result)
        if self.result.toPlainText() != record.get("result", ""):
            self.result.setPlainText(record.get("result", ""))
            lines = min(RESULT_LINES, max(1, record.get("result", "").count("\n") + 1))
            self.result.setFixedHeight(self.result.fontMetrics().lineSpacing() * (lines + 1) + 8)
        self._show_result(self.result_toggle.isChecked())
        self.setAccessibleName(self.title.text())

    @property
    def asking(self) -> bool:
        return self.record.get("status") == T.ASKING

    def _decide(self, decision: str) -> None:
        if self.asking:
            self.decided.emit(self.record["id"], decision)

    def _show_result(self, shown: bool) -> None:
        shown = shown and self.result_toggle.isVisible()
        self.result.setVisible(shown)
        self.result_toggle.setText(
            ("Hide the result" if shown else "Show the result") + (" (error)" if self.record.get("is_error") else "")
        )

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and self.asking:
            self._decide("deny")
            return
        super().keyPressEvent(event)


class ToolCallsBlock(QWidget):
    """The cards of an answer's rounds, in order (the words a round wrote before its calls above them)."""

    decided = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(SPACE.s)
        self.cards: dict[str, ToolCallCard] = {}
        self._shape: list[str] = []

    def show_rounds(self, rounds: list[dict[str, Any]]) -> None:
        shape = [
            f"{i}:{r.get('content', '')!s}:{c.get('id')}" for i, r in enumerate(rounds) for c in r.get("calls", [])
        ]
        if shape != self._shape:  # calls added or another answer shown: build the cards again
            while self.column.count():
                item = self.column.takeAt(0)
                if item.widget() is not None:
                    item.widget().deleteLater()
            self.cards = {}
            for round_ in rounds:
                if str(round_.get("content", "")).strip():
                    words = Label(str(round_["content"]).strip())
                    words.setWordWrap(True)
                    self.column.addWidget(words)
                for record in round_.get("calls", []):
                    card = ToolCallCard(record)
                    card.decided.connect(self.decided)
                    self.cards[record["id"]] = card
                    self.column.addWidget(card)
            self._shape = shape
        for round_ in rounds:
            for record in round_.get("calls", []):
                self.cards[record["id"]].set_record(record)
        self.setVisible(bool(self.cards))

    def card(self, call_id: str) -> ToolCallCard | None:
        return self.cards.get(call_id)
