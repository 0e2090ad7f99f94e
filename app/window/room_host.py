"""Make room: a message too long for the context window, answered after the model loads again with a context
that holds it (app.chat.context_room chose the length). Offered on an answer that failed for want of room, and
before sending, beside the note under the message box ("Make room and send"), so the chat does not first get
a failed answer.

The offer sets Settings' context length (saved, as if chosen there) and reloads the models; the answer is asked
for (or the message in the box sent) once the engine reports the longer context in force. A load that fails
with it (most often: not enough memory for the longer caches), or an answer that then runs out of memory (the
caches are made when a chat starts: on the processor nothing checks them at load), puts the old length back
and loads the models as they were, so one click never leaves a person with a model that cannot answer; the
failed answer then says that only a shorter message helps, and neither offer names that length again for
those models (ChatController.no_room).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from PySide6.QtCore import QTimer

from app.chat.context_room import Room, room_for
from app.conversations import store as S
from app.engine.bridge import CRASHED, FAILED, READY, EngineStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoomAttempt:
    """One Make room in progress: the chat and the failed answer it is for (None: the message in the box, sent
    once loaded; a new chat's conversation is None too), the context length asked for, the prompt's tokens (the
    context in force must exceed them), Settings' length before (0: automatic) and the target model then."""

    conversation_id: int | None
    message_id: int | None
    tokens: int
    prompt_tokens: int
    previous: int
    target: str


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
        self._start_room(conversation, message_id, tokens, prompt)

    def draft_room_offered(self) -> Room | None:
        """The room the note under the message box offers for the message being written (too long for the
        model, by the engine's count); None where it offers none: none needed or possible, an answer
        streaming, a Make room under way, or that length already failed for these models."""
        count = self.draft_counter.count
        if count is None or count.fits or self.controller.generating or self._room_attempt is not None:
            return None
        models = self.bridge.status.models
        max_tokens = self.controller.conversation_settings().max_tokens
        return room_for(count.prompt_tokens, max_tokens, models, self.controller.refused_room())

    def make_room_and_send(self) -> None:
        """Load the models again with the context length the message in the box needs, then send it."""
        room, count = self.draft_room_offered(), self.draft_counter.count
        if room is not None and count is not None:
            self._start_room(self.controller.conversation_id, None, room.tokens, count.prompt_tokens)

    def _start_room(self, conversation: int | None, message_id: int | None, tokens: int, prompt: int) -> None:
        target = str(self.bridge.status.models.get("target") or "")
        attempt = RoomAttempt(conversation, message_id, tokens, prompt, self.settings.context_length, target)
        self._room_attempt = attempt
        log.info("making room: context length %d for a %d-token prompt", tokens, prompt)
        self.toast.show_message(f"Loading the model again with room for {tokens:,} tokens…", 8000)
        self.apply_settings(dataclasses.replace(self.settings, context_length=tokens))
        self._update_actions()
        self._show_draft_count()  # the note offers no second Make room while this one loads
        self._room_progress(self.bridge.status)  # the models may hold it already (Settings raised it meanwhile)

    def _room_progress(self, status: EngineStatus) -> None:
        """Called on every engine status: answer once the longer context is in force; put the old length back if
        the load failed. A report of the models as they were (sent before the Load was read) waits."""
        attempt = self._room_attempt
        if attempt is None:
            return
        if status.state == READY and status.max_context > attempt.prompt_tokens:
            self._room_attempt = None
            if attempt.message_id is None:
                self._room_send(attempt)
                self._show_draft_count()
                return
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
            self.controller.no_room(attempt.message_id, attempt.tokens, attempt.target)
            self._show_draft_count()
            # after the bridge has said why (its engine_failed follows this status), not inside its signal
            QTimer.singleShot(0, self, lambda: self._room_undone(attempt))

    def _room_send(self, attempt: RoomAttempt) -> None:
        """The models hold the message in the box now: send it, where it is still there and its chat still
        open (else the toast says the room is made and the message waits for its Send)."""
        text = self.input.toPlainText()
        if self.controller.conversation_id == attempt.conversation_id and text.strip():
            self.send(text)
        if self.controller.generating:
            self._room_answering = attempt
        else:
            self.toast.show_message(f"The model now keeps {attempt.tokens:,} tokens in mind.", 6000)

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
        self.controller.no_room(message_id, attempt.tokens, attempt.target)
        self._room_undone(attempt)

    def _room_undone(self, attempt: RoomAttempt) -> None:
        """Put Settings' context length back and load the models as they were (a new engine if this one
        stopped: SettingsHostMixin.apply_settings)."""
        self.apply_settings(dataclasses.replace(self.settings, context_length=attempt.previous))
        self.toast.show_message(
            f"The model could not run with room for {attempt.tokens:,} tokens, so it is loading as before.", 12000
        )
