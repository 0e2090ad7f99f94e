"""Make room: a message too long for the context window, answered after the model loads again with a context
that holds it (app.chat.context_room chose the length and put the offer on the failed answer).

The offer sets Settings' context length (saved, as if chosen there) and reloads the models; the answer is asked
for once the engine reports the longer context in force. A load that fails with it (most often: not enough
memory for the longer caches), or an answer that then runs out of memory (the caches are made when a chat
starts: on the processor nothing checks them at load), puts the old length back and loads the models as they
were, so one click never leaves a person with a model that cannot answer; the failed answer then says that
only a shorter message helps.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from PySide6.QtCore import QTimer

from app.conversations import store as S
from app.engine.bridge import CRASHED, FAILED, READY, EngineStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoomAttempt:
    """One Make room in progress: the failed answer it is for, the context length asked for, the prompt's
    tokens (the context in force must exceed them), and Settings' length before (0: automatic)."""

    conversation_id: int
    message_id: int
    tokens: int
    prompt_tokens: int
    previous: int


class RoomHostMixin:
    """MainWindow's Make room (a mixin: it reads the window's controller, bridge, settings and toast; the
    window connects controller.answer_finished to `_room_answered`)."""

    _room_attempt: RoomAttempt | None = None  # loading with room for it
    _room_answering: RoomAttempt | None = None  # loaded: its answer is being written

    def room_offered(self) -> int | None:
        """The failed answer whose Make room can be pressed now (the last one, nothing streaming, no Make room
        under way, the engine running), else None."""
        rows = self.controller.messages.rows
        last = rows[-1] if rows else None
        if last is None or last.role != "assistant" or last.status != S.FAILED or not last.stats.get("room_tokens"):
            return None
        stopped = self.bridge.status.state in (CRASHED, FAILED)
        return None if self.controller.generating or stopped or self._room_attempt is not None else last.id

    def try_again(self) -> None:
        """Regenerate (Ctrl+R): where the last answer failed for want of room and offers it, Make room, the
        keyboard's way to that button; else a new answer."""
        offered = None if self.controller.can_regenerate() else self.room_offered()
        if offered is not None:
            self.make_room(offered)
        else:
            self.controller.regenerate()

    def make_room(self, message_id: int) -> None:
        """Load the models again with the context length the failed answer `message_id` offers, then answer."""
        rows = self.controller.messages.rows
        last = rows[-1] if rows else None
        conversation = self.controller.conversation_id
        if last is None or last.id != message_id or conversation is None or self.controller.generating:
            return
        tokens, prompt = int(last.stats.get("room_tokens") or 0), int(last.stats.get("prompt_tokens") or 0)
        if not tokens or not prompt:
            return
        if self.settings.remote_endpoint() is not None:  # switched to a server since: its context is its own
            self.toast.show_message("The server in use keeps its own context: shorten the message instead.", 8000)
            return
        self._room_attempt = RoomAttempt(conversation, message_id, tokens, prompt, self.settings.context_length)
        log.info("making room: context length %d for a %d-token prompt", tokens, prompt)
        self.toast.show_message(f"Loading the model again with room for {tokens:,} tokens…", 8000)
        self.apply_settings(dataclasses.replace(self.settings, context_length=tokens))
        self._update_actions()
        self._room_progress(self.bridge.status)  # the models may hold it already (Settings raised it meanwhile)

    def _room_progress(self, status: EngineStatus) -> None:
        """Called on every engine status: answer once the longer context is in force; put the old length back if
        the load failed. A report of the models as they were (sent before the Load was read) waits."""
        attempt = self._room_attempt
        if attempt is None:
            return
        if status.state == READY and status.max_context > attempt.prompt_tokens:
            self._room_attempt = None
            rows = self.controller.messages.rows
            if (
                self.controller.conversation_id == attempt.conversation_id
                and rows
                and rows[-1].id == attempt.message_id
                and self.controller.regenerate()
            ):
                self._room_answering = attempt
        elif status.state in (FAILED, CRASHED):
            self._room_attempt = None
            log.warning("no room for %d tokens: %s", attempt.tokens, status.message)
            self.controller.no_room(attempt.message_id, attempt.tokens)
            # after the bridge has said why (its engine_failed follows this status), not inside its signal
            QTimer.singleShot(0, self, lambda: self._room_undone(attempt))

    def _room_answered(self, message_id: int, status: str) -> None:
        """The answer Make room asked for ended: one that ran out of memory (the longer caches did not fit)
        puts the old length back, as a load that failed does."""
        attempt, self._room_answering = self._room_answering, None
        if attempt is None or status != S.FAILED:
            return
        answer = self.controller.find_message(message_id)
        if answer is None or answer.stats.get("kind") != "out_of_memory":
            return
        log.warning("no memory for %d tokens of context", attempt.tokens)
        self.controller.no_room(message_id, attempt.tokens)
        self._room_undone(attempt)

    def _room_undone(self, attempt: RoomAttempt) -> None:
        """Put Settings' context length back and load the models as they were (a new engine if this one
        stopped: SettingsHostMixin.apply_settings)."""
        self.apply_settings(dataclasses.replace(self.settings, context_length=attempt.previous))
        self.toast.show_message(
            f"The model could not run with room for {attempt.tokens:,} tokens, so it is loading as before.", 12000
        )
