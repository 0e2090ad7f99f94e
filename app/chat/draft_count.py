"""How much of the context a message takes before it is sent: the engine counts the prompt sending it would
make (core.engine.protocol.CountTokens, with the model's own tokenizer and chat template), a moment after the
typing stops or a document lands in the message box, so the context meter can show the chat with it and a
message too long for the model is said while it can still be shortened, not after it failed.

The count is asked again when what it depends on changes (the chat, the model, its context, an answer's end);
an answer that comes back for an older text is dropped, and so is everything while there is nothing to count
(ChatController.draft_prompt: no model ready, an answer streaming, a remote server).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.bridge import EngineBridge
from core.engine import protocol as P

log = logging.getLogger(__name__)

PAUSE_MS = 300  # typing that pauses this long is counted (a keystroke's count would be stale at once)


@dataclass(frozen=True)
class DraftCount:
    """The prompt sending the message would make: `prompt_tokens` after the `dropped_messages` oldest
    messages are left out; `fits` False: too long even alone (the answer would fail for length)."""

    prompt_tokens: int
    dropped_messages: int
    fits: bool


class DraftCounter(QObject):
    changed = Signal()  # `count` is new, or gone

    def __init__(
        self,
        bridge: EngineBridge,
        prompt_for: Callable[[str], tuple[list[dict], dict] | None],
        parent: QObject | None = None,
    ) -> None:
        """`prompt_for(text)`: the messages and CountTokens settings sending `text` would make, or None where
        nothing is to be counted (ChatController.draft_prompt)."""
        super().__init__(parent)
        self.bridge = bridge
        self.prompt_for = prompt_for
        self.text = ""
        self.count: DraftCount | None = None
        self.asked: str | None = None  # the request whose answer is awaited; older answers are dropped
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(PAUSE_MS)
        self._timer.timeout.connect(self._ask)
        bridge.token_count.connect(self._answered)

    def set_text(self, text: str) -> None:
        """The message box now holds `text`: counted once the typing pauses; an empty box at once clears it."""
        self.text = text
        if text.strip():
            self._timer.start()
        else:
            self._timer.stop()
            self._set(None)

    def refresh(self) -> None:
        """Count the same text again: the chat, the model or its settings changed under it."""
        self.set_text(self.text)

    def _ask(self) -> None:
        prompt = self.prompt_for(self.text)
        if prompt is None:
            self._set(None)
            return
        messages, settings = prompt
        self.asked = self.bridge.count_tokens(messages, **settings)

    def _answered(self, event: P.TokenCount | P.Error) -> None:
        if event.request_id != self.asked:
            return
        self.asked = None
        if isinstance(event, P.Error):  # the answer will say it in full; the meter goes on without the message
            log.info("the message could not be counted: %s (%s)", event.message, event.kind)
            self._set(None)
        else:
            self._set(DraftCount(event.prompt_tokens, event.dropped_messages, event.fits))

    def _set(self, count: DraftCount | None) -> None:
        if count is None:
            self.asked = None
        if count != self.count:
            self.count = count
            self.changed.emit()
