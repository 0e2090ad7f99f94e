"""A banner above the chat for things that need the user: the engine crashed (Restart), models failed to
load (Settings / Retry), a remote server's connection was lost (Retry the answer / Connections). It speaks plainly; the technical words (signal, exit code) are one click away."""

from __future__ import annotations

import re
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from app.window.buttons import LINK, PRIMARY, SECONDARY, button, set_role
from app.window.labels import Label
from core.planning.residency import PLANNED_CONTEXT


# What a signal that ended the engine most likely means, for people.
SIGNAL_MEANINGS = {
    "SIGKILL": "It was ended by the system, most often because the computer ran out of memory.",
    "SIGSEGV": "It crashed.",
    "SIGABRT": "It crashed.",
    "SIGBUS": "It crashed.",
    "SIGTERM": "It was asked to quit by another program.",
}


def engine_stopped_text(message: str) -> str:
    """Why the engine stopped, in a sentence for people (the client's message names pids and signals)."""
    found = re.search(r"killed by (SIG[A-Z]+)", message)
    if found:
        return SIGNAL_MEANINGS.get(found.group(1), "It was stopped by the system.")
    if "did not start" in message:
        return "It could not start."
    if "stopped answering" in message:
        return "It stopped answering."
    if re.search(r"exited with code", message):
        return "It quit unexpectedly."
    return "It stopped unexpectedly."


def too_little_memory_text(context_length: int) -> str:
    """Why the models did not load when they do not fit (the engine's plan, in gigabytes and command-line flags,
    goes under Details), and the ways out in the app: a shorter context where Settings ask for a long one (its
    caches are set aside at load), a smaller model, other programs closed."""
    context = (
        f"Settings keep room for {context_length:,} tokens of chat, which takes memory of its own: a shorter "
        "Context length may let them fit. "
        if context_length > PLANNED_CONTEXT
        else ""
    )
    return (
        f"<b>The models do not fit in this computer's memory.</b> {context}A smaller model from the Models page "
        "will; closing other programs may free enough."
    )


def details_html(details: str) -> str:
    """The technical details (an engine's or a check's own words, which may quote a model's files) as rich text
    that shows them as written, one line per line."""
    return escape(details).replace("\n", "<br>")


class Banner(QFrame):
    action_clicked = Signal(str)  # the action's name

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName("Alert")
        # the message over the whole width, its actions in a row under it: beside the text, four buttons left
        # a long message (a full drive, a model that does not fit) a column a few words wide
        column = QVBoxLayout(self)
        column.setContentsMargins(12, 8, 8, 8)
        self.label = Label(rich=True)  # callers escape what they quote (html.escape)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.label.setOpenExternalLinks(True)  # e.g. the NVIDIA driver download in the GPU check's banner
        column.addWidget(self.label)
        layout = QHBoxLayout()
        layout.addStretch(1)
        column.addLayout(layout)
        self.buttons: dict[str, QPushButton] = {}
        for name, text in (
            ("restart", "&Restart engine"),
            ("retry", "&Retry"),
            ("retry_answer", "&Retry"),
            ("connections", "&Connections"),
            ("models", "Open &models"),
            ("settings", "Open &settings"),
        ):
            action = button(text, SECONDARY)
            action.setAccessibleName(text.replace("&", ""))
            action.clicked.connect(lambda _=False, n=name: self.action_clicked.emit(n))
            layout.addWidget(action)
            self.buttons[name] = action
        self.details_button = button("Details", LINK)
        self.details_button.setAccessibleName("Show the technical details")
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._toggle_details)
        layout.addWidget(self.details_button)
        self._text = self._details = ""
        self.close_button = button("Dismiss", LINK)
        self.close_button.setAccessibleName("Dismiss alert")
        self.close_button.clicked.connect(self.hide)
        layout.addWidget(self.close_button)
        self.hide()

    def details(self) -> str:
        return self._details

    def text(self) -> str:
        """The message shown (or last shown), without its details."""
        return self._text

    def _toggle_details(self, shown: bool) -> None:
        self.label.setText(
            self._text
            + (f"<br><small>Details: {details_html(self._details)}</small>" if shown and self._details else "")
        )

    def show_message(self, text: str, actions: tuple[str, ...] = (), details: str = "") -> None:
        """Show `text` (rich text: bold words of ours, the rest escaped by the caller) with `actions` (their
        names, the first the main one) and `details` (plain text, shown as written under Details)."""
        self._text, self._details = text, details
        self.details_button.setVisible(bool(details))
        self.details_button.setChecked(False)
        self.label.setText(text)
        self.setAccessibleDescription(text)
        for name, action in self.buttons.items():
            action.setVisible(name in actions)
        self.show()
        for name, action in self.buttons.items():  # the first action is the main one: one primary button
            set_role(action, PRIMARY if name == next(iter(actions), None) else SECONDARY)
